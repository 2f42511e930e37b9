"""ACP over `auger serve`'s `/acp` WebSocket, driven by the ACP SDK's own WebSocket client: initialize,
session/new, a prompt whose write is approved through a permission request, the end of the turn — held
to the server's roots and mode, with the tools working on the server (not the editor's files)."""

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
from tests.support.serve import TOKEN, served  # noqa: E402

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
            await conn.close()
            await transport.close()
            for _ in range(200):  # the socket's end shuts its sessions down and lets them go
                if not srv.server.acp.agents:
                    break
                await asyncio.sleep(0.05)
            lease = await srv.store.claim(new.session_id)
            return init, new, outside_root.value, too_permissive.value, reply, editor, open_here, lease

    init, new, outside_root, too_permissive, reply, editor, open_here, lease = \
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
    assert open_here is None  # an ACP session is the ACP agent's, not opened twice by the HTTP side
    assert lease is None  # released when the socket closed
