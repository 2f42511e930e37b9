"""The public Python API (`import auger`) in this process: the real engine against the loopback mock model,
real sandbox, real git snapshots — events, approvals by callback and by policy, interrupt, fork, diff,
undo, the one-call `run` and its Result, structured output, resume, and the errors."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import auger
from auger.events import (
    AgentMessage, ApprovalRequest, Event, ToolCallEnded, ToolCallStarted, TurnEnded, TurnStarted,
)
from tests.support.harness import conversation
from tests.support.mock_openai import Reply, ToolCall

FAST = {"model_retry_base_delay": 0.01, "model_retry_max_delay": 0.05, "generate_titles": False}
TIMEOUT = 60


def mock(project: Path, server, **settings):
    """Where and with what model: the mock server, retries fast, no background titles."""
    return {"cwd": project, "base_url": server.base_url, "model": "mock-model", "config": FAST, **settings}


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, TIMEOUT))


def test_importing_auger_loads_nothing_but_its_version():
    script = ("import sys, auger\n"
              "print(sorted(m for m in sys.modules if m.startswith('auger')))\n"
              "auger.Decision; auger.events.AgentMessage\n"
              "print(sorted(m for m in sys.modules if m.startswith('auger.engine')) == [])\n"
              "try:\n    auger.nothing_of_that_name\nexcept AttributeError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["['auger', 'auger._version']", "True",
                                       "module 'auger' has no attribute 'nothing_of_that_name'"]


def test_every_name_in_all_resolves_and_every_event_type_is_in_auger_events():
    import auger.events as events
    from auger.protocol.events import Event as ProtocolEvent

    for name in auger.__all__:
        assert getattr(auger, name) is not None, name
    exported = {getattr(events, name) for name in events.__all__}
    assert set(ProtocolEvent.registry().values()) <= exported


def test_a_run_yields_its_typed_events_through_its_turn_end_and_its_result(project, server, isolated_home):
    server.add(Reply(text="Writing it.", tool_calls=[ToolCall("write_file", {"path": "hello.py",
                                                                            "content": "print('hello')\n"})]),
               Reply(text="Done: hello.py prints hello.", usage={"prompt_tokens": 1000, "completion_tokens": 20}))

    async def main():
        async with auger.open(**mock(project, server)) as session:
            run_ = session.run("write hello.py")
            seen = [event async for event in run_]
            result = await run_  # what the iteration read still counts
            return session.id, seen, result

    session_id, seen, result = run(main())
    assert isinstance(seen[0], TurnStarted) and isinstance(seen[-1], TurnEnded)  # not the session's shutdown
    assert all(isinstance(e, Event) for e in seen)
    started = [e for e in seen if isinstance(e, ToolCallStarted)]
    assert [(e.name, e.arguments["path"]) for e in started] == [("write_file", "hello.py")]
    assert result.session_id == session_id and result.reason == "complete"
    assert result.text == "Done: hello.py prints hello."
    assert result.files[0].path == "hello.py" and "+print('hello')" in result.diff
    assert result.usage.input_tokens >= 1000 and result.usage.output_tokens >= 20
    assert (project / "hello.py").read_text() == "print('hello')\n"
    assert not list(project.glob("*.db")) and (isolated_home / "sessions.db").exists()  # the user's store


def test_an_approval_callback_that_denies_keeps_the_command_from_running(project, server):
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "touch ran.txt"})]), Reply(text="it was refused"))
    asked: list[ApprovalRequest] = []

    async def deny(request: ApprovalRequest) -> auger.Decision:
        asked.append(request)
        return auger.Decision.deny("not now: only read")

    async def main():
        async with auger.open(**mock(project, server, mode="safe", approve=deny)) as session:
            return await session.run("make ran.txt")

    result = run(main())
    assert not (project / "ran.txt").exists()
    [request] = asked
    assert request.details is not None and request.details.tool == "shell"
    assert "touch ran.txt" in request.details.subject
    [ended] = [e for e in result.events if isinstance(e, ToolCallEnded)]
    assert not ended.ok and ended.denied == "unapproved"
    told = [m["content"] for m in server.chat_requests[-1].body["messages"] if m["role"] == "tool"]
    assert "not now: only read" in told[-1]  # the model hears why


def test_an_approval_callback_that_approves_lets_it_run_and_a_bool_is_an_answer(project, server):
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "touch ran.txt"})]), Reply(text="ran"))

    async def main():
        async with auger.open(**mock(project, server, mode="safe", approve=lambda request: True)) as session:
            return await session.run("make ran.txt")

    assert run(main()).text == "ran" and (project / "ran.txt").exists()


def test_an_approval_callback_that_raises_approves_nothing_and_the_run_says_why(project, server):
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "x"})]), Reply(text="unused"))

    def broken(request: ApprovalRequest) -> bool:
        raise KeyError("no such user")

    async def main():
        async with auger.open(**mock(project, server, mode="safe", approve=broken)) as session:
            return await session.run("write a.txt")

    with pytest.raises(auger.ApprovalFailed) as caught:
        run(main())
    assert isinstance(caught.value.__cause__, KeyError) and "KeyError" in str(caught.value)
    assert caught.value.reason == "cancelled"  # aborted: the turn did not go on
    assert not (project / "a.txt").exists()


def test_without_a_callback_the_policy_decides_deny_or_approve_all(project, server):
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "x"})]), Reply(text="denied"),
               Reply(tool_calls=[ToolCall("write_file", {"path": "b.txt", "content": "x"})]), Reply(text="written"))

    async def main():
        first = await auger.run("write a", **mock(project, server, mode="safe"))
        second = await auger.run("write b", **mock(project, server, mode="safe", approve_all=True))
        return first, second

    first, second = run(main())
    assert not (project / "a.txt").exists() and (project / "b.txt").exists()
    assert [e.denied for e in first.events if isinstance(e, ToolCallEnded)] == ["unapproved"]


def test_interrupt_stops_the_running_command_and_the_run_ends_interrupted(project, server):
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "sleep 30; touch late.txt"})]))

    async def main():
        async with auger.open(**mock(project, server)) as session:
            run_ = session.run("wait, then touch late.txt")
            async for event in run_:
                if isinstance(event, ToolCallStarted):
                    await run_.interrupt()
            started = time.monotonic()
            with pytest.raises(auger.TurnInterrupted) as caught:
                await run_.result()
            return caught.value, time.monotonic() - started

    interrupted, waited = run(main())
    assert interrupted.reason == "cancelled" and interrupted.result.turn_id
    assert waited < 5
    time.sleep(0.2)
    assert not (project / "late.txt").exists()


def test_fork_cut_before_a_message_continues_without_it_and_leaves_the_source(project, server):
    server.add(Reply(text="one"), Reply(text="two"), Reply(text="forked"), Reply(text="three"))

    async def main():
        async with auger.open(**mock(project, server)) as session:
            await session.run("first question")
            await session.run("second question")
            async with session.fork(before=2) as fork:
                assert fork.id != session.id
                forked = await fork.run("another second question")
            after = await session.run("third question")
            return forked, after

    forked, after = run(main())
    assert forked.text == "forked" and after.text == "three"
    users = [[m["content"] for m in conversation(r.body["messages"]) if m["role"] == "user"]
             for r in server.chat_requests[-2:]]
    assert users[0] == ["first question", "another second question"]
    assert users[1] == ["first question", "second question", "third question"]


def test_a_fork_cut_the_history_does_not_have_is_refused(project, server):
    server.add(Reply(text="one"))

    async def main():
        async with auger.open(**mock(project, server)) as session:
            await session.run("only question")
            await session.fork(before=5)

    with pytest.raises(auger.Refused, match="1 user messages"):
        run(main())


def test_diff_by_turn_and_session_then_undo_and_redo(project, server):
    (project / "keep.txt").write_text("kept\n")
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "one\n"})]), Reply(text="a"),
               Reply(tool_calls=[ToolCall("write_file", {"path": "b.txt", "content": "two\n"})]), Reply(text="b"))

    async def main():
        async with auger.open(**mock(project, server)) as session:
            first = await session.run("write a")
            await session.run("write b")
            whole, second = await session.diff(), await session.diff(2)
            undone = await session.undo()
            b_after_undo = (project / "b.txt").exists()
            redone = await session.redo()
            with pytest.raises(auger.Refused, match="names no turn"):
                await session.diff(first.turn_id + "zz")
            return whole, second, first, undone, b_after_undo, redone

    whole, second, first, undone, b_after_undo, redone = run(main())
    assert [t.number for t in whole.turns] == [1, 2] and whole.turns[0].turn_id == first.turn_id
    assert whole.files == ["a.txt", "b.txt"] and "+one" in whole.text and "+two" in whole.text
    assert [t.files[0].path for t in second.turns] == ["b.txt"]
    assert undone.files == ["b.txt"] and not b_after_undo and not undone.redo
    assert redone.redo and (project / "b.txt").read_text() == "two\n" and (project / "a.txt").exists()


def test_undo_with_nothing_to_undo_is_refused_and_the_session_stays_usable(project, server):
    server.add(Reply(text="nothing changed"), Reply(text="still here"))

    async def main():
        async with auger.open(**mock(project, server)) as session:
            await session.run("look around")
            with pytest.raises(auger.Refused, match="undo refused"):
                await session.undo()
            return await session.run("are you there?")

    assert run(main()).text == "still here"


def test_structured_output_is_the_checked_value_and_a_broken_schema_fails_the_turn(project, server):
    schema = {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"],
              "additionalProperties": False}
    server.add(Reply(text='{"count": 3}'))

    async def main():
        counted = await auger.run("how many TODOs?", output_schema=schema, **mock(project, server))
        with pytest.raises(auger.TurnFailed, match="not a valid JSON Schema"):
            await auger.run("again", output_schema={"type": "nonsense"}, **mock(project, server))
        return counted

    counted = run(main())
    assert counted.output == {"count": 3} and counted.text == '{"count": 3}'
    assert len(server.chat_requests) == 1  # a broken schema never reaches the model


def test_run_sync_and_resume_continue_a_stored_session(project, server):
    server.add(Reply(text="first answer"), Reply(text="second answer"))
    first = auger.run_sync("remember the word plum", **mock(project, server))
    assert first.text == "first answer"

    async def main():
        prefix = first.session_id[:8]  # a unique prefix will do
        async with auger.resume(prefix, base_url=server.base_url, config=FAST) as session:
            assert session.id == first.session_id and session.cwd == str(project.resolve())
            return await session.run("which word?")

    assert run(main()).text == "second answer"
    users = [m["content"] for m in conversation(server.chat_requests[-1].body["messages"]) if m["role"] == "user"]
    assert users == ["remember the word plum", "which word?"]


def test_a_session_is_open_once_and_errors_are_the_apis_own(project, server, tmp_path, isolated_home):
    server.add(Reply(text="hi"))

    async def main():
        async with auger.open(**mock(project, server)) as session:
            with pytest.raises(auger.SessionBusy):
                await auger.resume(session.id, config=FAST)
            leases = sqlite3.connect(isolated_home / "sessions.db").execute(
                "SELECT count(*) FROM leases WHERE session_id = ?", (session.id,)).fetchone()[0]
            assert leases == 1  # refusing the second opening left the first one's lease alone
        with pytest.raises(auger.SessionNotFound):
            await auger.resume("0123456789abcdef", config=FAST)
        with pytest.raises(auger.ConfigError, match="'mode' must be one of plan, safe, auto"):
            await auger.open(**mock(project, server, mode="yolo"))
        with pytest.raises(auger.ConfigError, match="no-such-provider"):
            await auger.open(project, provider="no-such-provider")
        with pytest.raises(auger.ConfigError, match="not a directory"):
            await auger.open(**{**mock(project, server), "cwd": tmp_path / "absent"})

    run(main())


def test_two_runs_on_one_session_each_end_with_their_own_turn(project, server):
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "sleep 0.5"})]), Reply(text="both answered"))

    async def main():
        async with auger.open(**mock(project, server)) as session:
            first = session.run("start something slow")
            async for event in first:
                if isinstance(event, ToolCallStarted):
                    second = session.run("and also this")  # injected into the running turn
                    break
            return await asyncio.gather(first.result(), second.result())

    first, second = run(main())
    assert first.turn_id == second.turn_id and first.text == second.text == "both answered"
    assert [m["content"] for m in conversation(server.chat_requests[-1].body["messages"])
            if m["role"] == "user"] == ["start something slow", "and also this"]


def test_envelopes_number_the_run_and_name_its_submission(project, server):
    server.add(Reply(text="numbered"))

    async def main():
        async with auger.open(**mock(project, server)) as session:
            run_ = session.run("count")
            return run_.submission_id, [e async for e in run_.envelopes()]

    submission_id, envelopes = run(main())
    seqs = [e.seq for e in envelopes]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert isinstance(envelopes[-1].event, TurnEnded) and envelopes[-1].submission_id == submission_id
    assert any(isinstance(e.event, AgentMessage) for e in envelopes)


def test_config_file_problems_are_warnings_not_errors(project, server, isolated_home):
    (isolated_home / "config.toml").write_text("snapshots = 'maybe'\n")
    server.add(Reply(text="fine"))
    with pytest.warns(UserWarning, match="'snapshots' expects true or false"):
        result = auger.run_sync("hi", **mock(project, server))
    assert result.text == "fine" and os.path.isdir(project)
