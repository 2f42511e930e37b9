"""The public API against a real `auger serve` process (`auger.connect`): sessions with the same methods as
local ones over HTTP and server-sent events, a stream that drops mid-turn resumed by cursor with every
event read once, and a post whose answer was lost sent again without starting a second turn."""

from __future__ import annotations

import asyncio
import pytest

import auger
from auger.events import ApprovalRequest, ToolCallEnded, ToolCallStarted, TurnStarted, UserInputInjected
from auger.protocol.items import UserMessage
from auger.store.sqlite import SqliteStore
from tests.support.harness import conversation
from tests.support.mock_openai import Reply, ToolCall
from tests.support.serve import TOKEN
from tests.support.serve import start_process as start, stop_process as stop
from tests.support.tcp_proxy import TcpProxy

TIMEOUT = 90


def test_a_remote_session_runs_answers_approvals_diffs_undoes_and_forks(project, server, isolated_home, tmp_path):
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "remote\n"}),
                                 ToolCall("shell", {"command": "touch ran.txt"})]),
               Reply(text="wrote a.txt; the command was refused"),
               Reply(text="a fresh start"),
               Reply(text='{"ok": true}'))
    proc, url, _ = start(project, isolated_home, server, tmp_path / "served.db")  # --mode safe: changes ask
    asked: list[str] = []

    def approve(request: ApprovalRequest) -> auger.Decision:
        assert request.details is not None
        asked.append(request.details.tool)
        return auger.Decision.deny("no commands") if request.details.tool == "shell" else auger.Decision.approve()

    async def main():
        async with auger.connect(url, token=TOKEN) as client:
            with pytest.raises(auger.Refused, match="more permissive"):
                await client.open(str(project), mode="auto")
            async with client.open(str(project), approve=approve) as session:
                run = session.run("write a.txt, then run a command")
                tools = [e.name async for e in run if isinstance(e, ToolCallStarted)]
                first = await run
                diff = await session.diff()
                undone = await session.undo()
                gone = not (project / "a.txt").exists()
                await session.redo()
                async with session.fork(before=1) as fork:
                    forked = await fork.run("start again")
                    fork_id = fork.id
            checked = await client.run("is it ok?", cwd=str(project), output_schema={
                "type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]})
            return tools, first, diff, undone, gone, forked, fork_id, session.id, checked

    try:
        tools, first, diff, undone, gone, forked, fork_id, session_id, checked = asyncio.run(
            asyncio.wait_for(main(), TIMEOUT))
    finally:
        code, stderr = stop(proc)
    assert code == 0, stderr
    assert tools == ["write_file", "shell"] and asked == ["write_file", "shell"]
    assert (project / "a.txt").read_text() == "remote\n" and not (project / "ran.txt").exists()
    assert first.text == "wrote a.txt; the command was refused"
    assert [e.denied for e in first.events if isinstance(e, ToolCallEnded)] == [None, "unapproved"]
    assert diff.files == ["a.txt"] and "+remote" in diff.text
    assert undone.files == ["a.txt"] and gone
    assert forked.text == "a fresh start" and fork_id != session_id
    fork_users = [m["content"] for m in conversation(server.chat_requests[2].body["messages"]) if m["role"] == "user"]
    assert fork_users == ["start again"]  # cut before the first message: none of the source's
    assert checked.output == {"ok": True}


def test_a_dropped_stream_resumes_by_cursor_and_a_lost_answer_is_posted_again(project, server, isolated_home,
                                                                              tmp_path):
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "echo one"})]),
               Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "after the cut\n"})]),
               Reply(text="both done"))
    db = tmp_path / "served.db"
    proc, url, _ = start(project, isolated_home, server, db)  # --mode safe: the write waits for an answer
    port = int(url.rsplit(":", 1)[1])
    cuts: list[int] = []

    async def main(proxy: TcpProxy):
        def approve(request: ApprovalRequest) -> bool:
            cuts.append(proxy.cut())  # the turn waits for this answer: everything after it comes after the cut
            return True

        async with auger.connect(proxy.url, token=TOKEN) as client, \
                client.open(str(project), approve=approve) as session:
            proxy.drop_response_to(f"POST /api/sessions/{session.id}/ops".encode())  # the prompt's answer
            run = session.run("echo, then write")
            envelopes = [envelope async for envelope in run.envelopes()]
            return session.id, envelopes, await run.result()

    try:
        with TcpProxy(port) as proxy:
            session_id, envelopes, result = asyncio.run(asyncio.wait_for(main(proxy), TIMEOUT))
            requests = list(proxy.requests)
    finally:
        code, stderr = stop(proc)
    assert code == 0, stderr
    assert cuts and cuts[0] >= 1  # the event stream was open, and dropped
    seqs = [e.seq for e in envelopes]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # each envelope once, none missing
    assert result.text == "both done" and (project / "a.txt").read_text() == "after the cut\n"
    assert [e.event.turn_id for e in envelopes if isinstance(e.event, TurnStarted)] == [result.turn_id]
    assert not [e for e in envelopes if isinstance(e.event, UserInputInjected)]
    assert [e.event.name for e in envelopes if isinstance(e.event, ToolCallEnded)] == ["shell", "write_file"]
    streams = [r for r in requests if r.startswith(f"GET /api/sessions/{session_id}/events".encode())]
    posts = [r for r in requests if r.startswith(f"POST /api/sessions/{session_id}/ops".encode())]
    assert len(streams) >= 2  # the stream was opened again after the cut
    assert len(posts) >= 4  # the prompt twice (its first answer was lost), the approval, the shutdown

    async def stored() -> list[str]:
        store = SqliteStore(db)
        try:
            return [s.item.text for s in await store.load_items(session_id) if isinstance(s.item, UserMessage)]
        finally:
            await store.aclose()

    assert asyncio.run(stored()) == ["echo, then write"]  # posted twice, one turn
    assert len(server.chat_requests) == 3
