"""ACP over `auger serve`'s `/acp` WebSocket, driven by the ACP SDK's own WebSocket client: initialize,
session/new, a prompt whose write is approved through a permission request, the end of the turn — held
to the server's roots and mode, with the tools working on the server (not the editor's files); its sessions
in the session list and its stream like the HTTP API's own."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

acp = pytest.importorskip("acp", reason="the agent-client-protocol SDK (the `acp` extra) is not installed")
from acp import RequestError, connect_to_agent, text_block  # noqa: E402
from acp.schema import (  # noqa: E402
    AllowedOutcome, ClientCapabilities, FileSystemCapabilities, RequestPermissionResponse,
)
from acp.ws.client import create_websocket_stream  # noqa: E402

from tests.support.mock_openai import Reply, ToolCall  # noqa: E402
from tests.support.serve import TOKEN, served, sse_events  # noqa: E402

TIMEOUT = 60


class Editor:
    """A client that records updates and answers permission requests with `answer`."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.updates: list[Any] = []
        self.permissions: list[Any] = []
        self.file_reads: list[str] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any],
                                 **kwargs: Any) -> RequestPermissionResponse:
        self.permissions.append((tool_call, [o.option_id for o in options]))
        return RequestPermissionResponse(outcome=AllowedOutcome(option_id=self.answer, outcome="selected"))

    async def read_text_file(self, *args: Any, **kwargs: Any) -> Any:
        self.file_reads.append(kwargs.get("path", ""))
        raise RequestError.invalid_params({"message": "not here"})

    def on_connect(self, conn: Any) -> None:
        pass


def test_acp_over_the_websocket_prompts_asks_permission_and_ends_the_turn(project, server, tmp_path):
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "hello.txt", "content": "hi\n"})]),
               Reply(text="wrote it"))
    outside = tmp_path / "elsewhere"
    outside.mkdir()

    async def main():
        async with served(project, server, tmp_path / "s.db") as srv:
            transport = await create_websocket_stream(srv.url.replace("http", "ws") + "/acp",
                                                      headers={"Authorization": f"Bearer {TOKEN}"})
            editor = Editor("approve")
            conn = connect_to_agent(editor, transport)
            caps = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True, write_text_file=True))
            init = await conn.initialize(protocol_version=1, client_capabilities=caps)
            new = await conn.new_session(cwd=str(project), mcp_servers=[])
            with pytest.raises(RequestError) as outside_root:
                await conn.new_session(cwd=str(outside), mcp_servers=[])
            with pytest.raises(RequestError) as too_permissive:
                await conn.set_session_mode(mode_id="auto", session_id=new.session_id)
            reply = await conn.prompt(prompt=[text_block("write hello.txt")], session_id=new.session_id)
            open_here = srv.server.hub.live(new.session_id)
            acp_own = next(iter(srv.server.acp.agents)).sessions[new.session_id].session
            await conn.close()
            await transport.close()
            for _ in range(200):  # the socket's end shuts its sessions down and lets them go
                if not srv.server.acp.agents:
                    break
                await asyncio.sleep(0.05)
            lease = await srv.store.claim(new.session_id)
            return init, new, outside_root.value, too_permissive.value, reply, editor, open_here is acp_own, lease

    init, new, outside_root, too_permissive, reply, editor, same_session, lease = \
        asyncio.run(asyncio.wait_for(main(), TIMEOUT))
    assert init.agent_info.name == "auger" and new.session_id
    assert "outside the directories" in str(outside_root.data)
    assert "more permissive" in str(too_permissive.data)
    assert reply.stop_reason == "end_turn"
    assert len(editor.permissions) == 1 and "approve" in editor.permissions[0][1]
    assert (project / "hello.txt").read_text() == "hi\n"  # written on the server, not through the editor
    assert editor.file_reads == []
    text = "".join(u.content.text for u in editor.updates if u.session_update == "agent_message_chunk")
    assert "wrote it" in text
    assert same_session  # the HTTP side knows the ACP agent's session as open, and never opens it twice
    assert lease is None  # released when the socket closed


class Away(Editor):
    """An editor whose user never answers: the permission request stays open."""

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any],
                                 **kwargs: Any) -> RequestPermissionResponse:
        self.permissions.append((tool_call, [o.option_id for o in options]))
        await asyncio.Event().wait()
        raise AssertionError("never answered")


def test_sessions_opened_over_acp_are_in_the_session_list_and_its_stream_and_answered_there(project, server,
                                                                                            tmp_path):
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "x"})]), Reply(text="done"))

    async def main():
        async with served(project, server, tmp_path / "s.db") as srv:
            got: list[dict] = []

            async def follow(stream) -> None:
                async for event in stream:
                    if "data" in event:
                        got.append(event["data"])

            async def told(kind: str, count: int = 1) -> None:
                for _ in range(500):
                    if sum(e["type"] == kind for e in got) >= count:
                        return
                    await asyncio.sleep(0.02)
                raise AssertionError(f"the session list's stream did not tell {kind} ({count}): {got}")

            async def connect() -> tuple[Any, Any]:
                transport = await create_websocket_stream(srv.url.replace("http", "ws") + "/acp",
                                                          headers={"Authorization": f"Bearer {TOKEN}"})
                conn = connect_to_agent(editor, transport)
                await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities())
                return conn, transport

            async with srv.client.stream("GET", "/api/events") as response:
                following = asyncio.create_task(follow(sse_events(response)))
                conn, transport = await connect()
                sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
                prompting = asyncio.create_task(conn.prompt(prompt=[text_block("write a.txt")], session_id=sid))
                await told("approval_waiting")  # the editor's user is away: it is answered from the API
                waiting = next(e for e in got if e["type"] == "approval_waiting")
                answered = await srv.client.post(f"/api/sessions/{sid}/ops", json={
                    "submission_id": "a1", "op": {"type": "approval_decision", "decision": "approve",
                                                  "request_id": waiting["request_id"]}})
                reply = await prompting
                await told("turn_ended")
                asking = next(iter(srv.server.acp.agents)).sessions[sid].asking  # the editor is no longer asked
                listed_open = (await srv.client.get("/api/sessions")).json()["sessions"]
                snapshot = (await srv.client.get(f"/api/sessions/{sid}")).json()
                await conn.close()
                await transport.close()  # the socket's end shuts the connection's sessions down
                await told("session_closed")
                conn, transport = await connect()  # another editor loads it
                await conn.load_session(session_id=sid, cwd=str(project), mcp_servers=[])
                await told("session_opened")
                await conn.close()
                await transport.close()
                await told("session_closed", 2)
                listed_closed = (await srv.client.get("/api/sessions")).json()["sessions"]
                following.cancel()
            return sid, got, listed_open, snapshot, listed_closed, answered.status_code, reply, dict(asking)

    editor = Away("approve")
    sid, got, listed_open, snapshot, listed_closed, answered, reply, asking = \
        asyncio.run(asyncio.wait_for(main(), TIMEOUT))
    assert [e["type"] for e in got if e["type"] != "session_updated"] == [
        "session_created", "turn_started", "approval_waiting", "approval_resolved", "turn_ended", "session_closed",
        "session_opened", "session_closed"]
    assert all(e["session_id"] == sid for e in got)
    assert got[0]["cwd"] == str(project.resolve()) and got[0]["model"] == "mock-model"
    resolved = next(e for e in got if e["type"] == "approval_resolved")
    assert answered == 202 and resolved["decision"] == "approve" and resolved["by"] == "owner"
    assert len(editor.permissions) == 1 and asking == {} and reply.stop_reason == "end_turn" and (project / "a.txt").read_text() == "x"
    assert [(s["id"], s["open"]) for s in listed_open] == [(sid, True)]
    assert snapshot["state"]["open"] is True and snapshot["state"]["running_turn"] is None
    assert [(s["id"], s["open"]) for s in listed_closed] == [(sid, False)]
