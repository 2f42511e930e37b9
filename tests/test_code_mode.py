"""run_code through real sessions: a Python program in the session's real sandbox whose tool calls travel
back through the tool runtime one by one — shown as children of the run_code call, refused exactly as direct
calls are — and which an interrupt, its timeout and the loop guard stop."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

import pytest

from auger.policy.sandbox import detect
from auger.protocol import events as ev
from auger.protocol.ops import Interrupt, Shutdown, UserTurn
from auger.protocol.vocab import Refusal
from auger.tools.base import READ_ONLY, ToolResult, ToolSpec
from auger.tools.code_mode import prelude
from tests.support.harness import Follow, open_session, run_session
from tests.support.mock_openai import Reply, ToolCall

ON = ("code_mode=true",)
RUNNER = "The program run_code starts"  # in the program's command line (its source is passed with -c)


@pytest.fixture(autouse=True)
def require_bwrap():
    sandbox, why = detect("bwrap")
    assert sandbox is not None, f"these tests need bubblewrap (apt-get install bubblewrap): {why}"


def run_code(code: str, **more) -> Reply:
    return Reply(tool_calls=[ToolCall("run_code", {"code": code, **more})])


def programs_in(project: Path) -> list[str]:
    """The pids of the run_code programs running in `project`: pgrep alone sees every program on the machine,
    those of the tests running beside this one too (the suite runs on several processes)."""
    found = []
    for pid in subprocess.run(["pgrep", "-f", RUNNER], capture_output=True, text=True).stdout.split():
        try:
            if os.readlink(f"/proc/{pid}/cwd") == str(project):
                found.append(pid)
        except OSError:
            pass  # it ended meanwhile
    return found


def tool_outputs(server) -> list[str]:
    return [m["content"] for m in server.chat_requests[-1].body["messages"] if m["role"] == "tool"]


def envelopes(project, server, *prompts: str, overrides=ON) -> list:
    """Every envelope a session emitted for the prompts (parent call ids included)."""

    async def main():
        session, store = await open_session(project, server, project.parent / "s.db", *overrides)
        seen = []

        async def follow():
            async for envelope in session.subscribe():
                seen.append(envelope)

        reader = asyncio.create_task(follow())
        follow_events = Follow(session)
        try:
            for prompt in prompts:
                session.submit(UserTurn(prompt))
                await follow_events.until(ev.TurnEnded, where=lambda e: True)
            session.submit(Shutdown())
            await session.wait_closed()
            await reader
        finally:
            await store.aclose()
        return seen

    return asyncio.run(asyncio.wait_for(main(), 60))


def test_inner_calls_are_shown_as_children_and_only_what_is_printed_returns(project, server):
    for i in range(5):
        (project / f"f{i}.txt").write_text("line\nTODO one\n" * (i + 1))
    server.add(run_code("n = 0\nfor i in range(5):\n    n += read_file(f'f{i}.txt').count('TODO')\nprint('todos:', n)"),
               Reply(text="15 todos"))
    seen = envelopes(project, server, "count the TODOs")
    run_id = next(e.event.call_id for e in seen if isinstance(e.event, ev.ToolCallStarted)
                  and e.event.name == "run_code")
    inner = [e for e in seen if isinstance(e.event, (ev.ToolCallStarted, ev.ToolCallEnded)) and e.event.name == "read_file"]
    assert len(inner) == 10 and {e.parent_call_id for e in inner} == {run_id}
    assert all(e.event.ok for e in inner if isinstance(e.event, ev.ToolCallEnded))
    output = tool_outputs(server)[0]
    assert "todos: 15" in output and "5 tool calls (0 failed)" in output
    assert "line" not in output  # the files' text stayed in the program
    assert [m["role"] for m in server.chat_requests[-1].body["messages"]].count("tool") == 1


def test_a_destructive_inner_call_is_refused_headless_exactly_as_a_direct_one(project, server):
    (project / "keep").mkdir()
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "rm -rf keep"})]),
               run_code("try:\n    shell('rm -rf keep')\nexcept ToolFailed as e:\n    print('REFUSED', e)"),
               Reply(text="could not"))
    seen = envelopes(project, server, "clean up")
    ends = [e.event for e in seen if isinstance(e.event, ev.ToolCallEnded) and e.event.name == "shell"]
    direct, inner = ends
    assert direct.denied == inner.denied == Refusal.UNAPPROVED
    assert inner.output == direct.output and "needs the user's approval" in inner.output
    assert f"REFUSED {direct.output}" in tool_outputs(server)[1]
    assert (project / "keep").is_dir()


def test_in_plan_mode_the_program_is_read_only_and_its_writes_are_refused(project, server):
    server.add(run_code("try:\n    open('direct.txt', 'w').write('x')\nexcept OSError as e:\n    print('OS', e)\n"
                        "try:\n    write_file('tool.txt', 'x')\nexcept ToolFailed as e:\n    print('TOOL', e)"),
               Reply(text="read-only"))
    run = run_session(project, server, "try", overrides=(*ON, "mode=plan"))
    output = tool_outputs(server)[0]
    assert "OS [Errno 30] Read-only file system" in output and "TOOL Not run: plan mode" in output
    assert not (project / "direct.txt").exists() and not (project / "tool.txt").exists()
    assert run.of(ev.ToolCallEnded)[-1].ok


def test_a_program_that_loops_forever_is_stopped_by_its_timeout_and_by_the_loop_guard(project, server):
    (project / "a.txt").write_text("a\n")
    server.add(run_code("while True:\n    pass", timeout=1),
               run_code("while True:\n    read_file('a.txt')"),
               Reply(text="stopped"))
    left: list[str] = []

    def at_the_end(session, event):  # the session and its sandbox still run: a program left behind is seen
        if isinstance(event, ev.TurnEnded):
            left.extend(programs_in(project))

    started = time.monotonic()
    run_session(project, server, "spin", overrides=ON, on_event=at_the_end)
    timed, guarded = tool_outputs(server)
    assert timed.startswith("Stopped: it ran past its timeout of 1s")
    assert guarded.startswith("Stopped: the program called read_file with the same arguments 20 times in a row")
    assert time.monotonic() - started < 30
    assert not left and not programs_in(project)


def test_an_interrupt_stops_a_program_that_loops_forever(project, server):
    server.add(run_code("print('spinning', flush=True)\nwhile True:\n    pass", timeout=300), Reply(text="unused"))

    async def main():
        session, store = await open_session(project, server, project.parent / "s.db", *ON)
        follow = Follow(session)
        try:
            session.submit(UserTurn("spin"))
            await follow.until(ev.ToolOutputDelta, where=lambda e: "spinning" in e.text)
            sent = time.monotonic()
            session.submit(Interrupt())
            ended = await follow.until(ev.TurnEnded)
            waited = time.monotonic() - sent
            running = programs_in(project)
            session.submit(Shutdown())
            await session.wait_closed()
        finally:
            await store.aclose()
        return ended, waited, running

    ended, waited, running = asyncio.run(asyncio.wait_for(main(), 60))
    assert ended.reason == "cancelled" and waited < 5 and not running


def test_the_prelude_has_a_function_per_tool_with_its_arguments():
    async def handler(args, ctx):
        return ToolResult("")

    specs = [ToolSpec("read_file", "", {"type": "object", "properties": {"path": {"type": "string"},
                                                                         "offset": {"type": "integer"}},
                                        "required": ["path"]}, handler, READ_ONLY),
             ToolSpec("mcp__my-server__get", "", {"type": "object", "properties": {"from": {"type": "string"}}},
                      handler, READ_ONLY)]
    calls = []
    namespace = {"_call": lambda name, args: calls.append((name, args)) or "ok"}
    exec(prelude(specs), namespace)
    assert namespace["read_file"]("a.py") == "ok"
    namespace["read_file"](path="b.py", offset=3)
    namespace["mcp__my_server__get"](**{"from": "x"})  # a keyword as an argument name: by keyword
    assert calls == [("read_file", {"path": "a.py"}), ("read_file", {"path": "b.py", "offset": 3}),
                     ("mcp__my-server__get", {"from": "x"})]


def test_an_agent_defined_with_code_mode_gets_run_code_when_it_may_run_commands(project, server):
    from tests.support.agents import Routes, run_parent
    from tests.support.mock_openai import ToolCall as Call

    agents = project / ".auger" / "agents"
    agents.mkdir(parents=True)
    (agents / "coder.md").write_text("---\nname: coder\ndescription: d\ntools: read_file, shell\ncode_mode: true\n"
                                     "---\nCode.\n")
    (agents / "reader.md").write_text("---\nname: reader\ndescription: d\ntools: read_file\ncode_mode: true\n"
                                      "---\nRead.\n")
    (project / "a.txt").write_text("alpha\n")
    routes = Routes({
        "start": [Reply(tool_calls=[Call("spawn_agent", {"prompt": "code", "agent": "coder"}),
                                    Call("spawn_agent", {"prompt": "read", "agent": "reader"})]), Reply(text="done")],
        "code": [run_code("print(read_file('a.txt').count('alpha'))"), Reply(text="coded")],
        "read": [Reply(text="read")],
    }).install(server)
    seen = run_parent(project, server, "start")
    coder = {t["function"]["name"] for t in routes.bodies("code")[0]["tools"]}
    reader = {t["function"]["name"] for t in routes.bodies("read")[0]["tools"]}
    assert "run_code" in coder and "run_code" not in reader  # a program can do no more than a command could
    assert "Exit code: 0 | 1 tool calls" in routes.bodies("code")[-1]["messages"][-1]["content"]
    run_id = next(e.event.call_id for e in seen if isinstance(e.event, ev.ToolCallStarted)
                  and e.event.name == "run_code")
    assert [e.parent_call_id for e in seen if isinstance(e.event, ev.ToolCallStarted)
            and e.event.name == "read_file"] == [run_id]


def test_abort_at_an_inner_calls_approval_ends_the_turn(project, server):
    from auger.protocol.ops import ApprovalDecision

    server.add(run_code("write_file('new.txt', 'x')\nprint('after')"), Reply(text="unused"))

    def answer(session, event):  # approve the program, abort at the write it makes
        if isinstance(event, ev.ApprovalRequest):
            decision = "approve" if event.details.tool == "run_code" else "abort"
            session.submit(ApprovalDecision(event.request_id, decision))

    run = run_session(project, server, "write", overrides=(*ON, "mode=safe"), interactive=True, on_event=answer)
    assert [a.details.tool for a in run.of(ev.ApprovalRequest)] == ["run_code", "write_file"]
    assert run.ended.reason == "cancelled" and "aborted by the user" in run.ended.message
    assert not (project / "new.txt").exists() and len(server.chat_requests) == 1


def test_the_timeout_counts_the_programs_own_time_not_the_calls_it_waits_for(project, server):
    server.add(run_code("shell('sleep 2')\nprint('after the call')", timeout=1), Reply(text="done"))
    run_session(project, server, "wait", overrides=ON)
    output = tool_outputs(server)[0]
    assert output.startswith("Exit code: 0 | 1 tool calls (0 failed)") and "after the call" in output
