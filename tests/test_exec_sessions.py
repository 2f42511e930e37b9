"""exec_command / write_stdin through real sessions: processes on a real pseudo-terminal or pipes, in the
session's real (bubblewrap) sandbox, under the same policy as shell; keystrokes stay inside the decision
that started the process; processes end with the session, with a killed auger, when idle, and to make room."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest

from auger.policy.sandbox import detect
from auger.protocol import events as ev
from auger.protocol.ops import SetMode, Shutdown, UserTurn
from auger.protocol.vocab import Refusal
from auger.tools.exec_command import KEYSTROKES
from tests.support.harness import Follow, cli_env, open_session, run_session
from tests.support.mock_openai import Fault, Reply, ToolCall
from tests.support.typist import exec_call, typist, write_call

ON = ("exec_sessions=true",)


@pytest.fixture(autouse=True)
def require_bwrap():
    sandbox, why = detect("bwrap")
    assert sandbox is not None, f"these tests need bubblewrap (apt-get install bubblewrap): {why}"


def tool_outputs(server) -> list[str]:
    return [m["content"] for m in server.chat_requests[-1].body["messages"] if m["role"] == "tool"]


def live(run, call_name: str) -> str:
    """The output streamed live (tool_output_delta) for calls of one tool."""
    ids = {e.call_id for e in run.of(ev.ToolCallStarted) if e.name == call_name}
    return "".join(e.text for e in run.of(ev.ToolOutputDelta) if e.call_id in ids)


def alive(pattern: str) -> bool:
    return subprocess.run(["pgrep", "-f", pattern], capture_output=True).returncode == 0


def gone_soon(pattern: str, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not alive(pattern):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("sandbox", [(), ("sandbox=off", "approve_all=true")], ids=["sandboxed", "unsandboxed"])
def test_a_python_repl_on_a_terminal_answers_is_interrupted_and_exits(project, server, sandbox):
    server.add(*typist([
        (exec_call("python3 -q -i", tty=True), ">>> "),
        (write_call("print(6*7)\n"), "42"),
        (write_call("import time; time.sleep(120)\n"), "sleep(120)"),
        (write_call("\u0003"), "KeyboardInterrupt"),
        (write_call("exit()\n"), "Process exited with code 0"),
    ]))
    started = time.monotonic()
    run = run_session(project, server, "use python", overrides=(*ON, *sandbox))
    outputs = "\n".join(tool_outputs(server))
    assert run.ended.reason == "complete" and run.of(ev.AgentMessage)[-1].text == "done", outputs
    assert "Process running with session ID 1" in outputs
    assert "\n42\n" in outputs  # what the model read: the terminal's answer, line endings as text
    assert "KeyboardInterrupt" in outputs and "Process exited with code 0" in outputs
    assert time.monotonic() - started < 60  # Ctrl-C cut the two-minute sleep short
    assert "42" in live(run, "write_stdin")  # shown live to the front ends as it came


def test_an_installer_prompt_is_answered_through_stdin(project, server):
    (project / "install.sh").write_text(
        "printf 'Proceed? [y/N] '\nread answer\n"
        "if [ \"$answer\" = y ]; then echo ok > installed.txt; echo Installed; else echo Aborted; exit 1; fi\n")
    server.add(*typist([
        (exec_call("bash install.sh"), "Proceed? [y/N]"),
        (write_call("y\n"), "Process exited with code 0"),
    ]))
    run_session(project, server, "install it", overrides=ON)
    outputs = tool_outputs(server)
    assert "Process running with session ID 1" in outputs[0] and "Proceed? [y/N]" in outputs[0]
    assert "Installed" in "".join(outputs[1:])
    assert (project / "installed.txt").read_text() == "ok\n"


def test_in_plan_mode_a_repl_cannot_start_and_keystrokes_to_a_read_only_one_cannot_write(project, server):
    """Plan mode refuses an interpreter; a pager it allows runs read-only, so even the REPL its shell escape
    starts cannot write, whatever is typed."""
    (project / "README.md").write_text("hello\n" * 5)
    server.add(Reply(tool_calls=[exec_call("python3 -q -i", tty=True)]), *typist([
        (exec_call("less README.md", tty=True), "RETURN"),
        (write_call("\r"), "(END)"),
        (write_call("!python3 -q\r"), ">>> "),
        (write_call("open('x', 'w').write('y')\n"), ">>> "),
        (write_call("exit()\n"), "(press RETURN)"),
        (write_call("\rq"), "Process exited"),
    ]))
    run = run_session(project, server, "look", overrides=(*ON, "mode=plan"))
    refused = run.of(ev.ToolCallEnded)[0]
    assert refused.name == "exec_command" and not refused.ok and "plan mode" in refused.output
    outputs = "\n".join(tool_outputs(server))
    assert "Read-only file system: 'x'" in outputs, outputs
    assert not (project / "x").exists()


def test_after_a_switch_to_plan_only_a_poll_or_ctrl_c_reaches_a_writable_session(project, server):
    server.add(*typist([(exec_call("python3 -q -i", tty=True), ">>> ")], final="started", then=[
        Reply(tool_calls=[write_call("open('y', 'w').write('z')\n")]),
        Reply(tool_calls=[write_call("\u0003")]),
        Reply(text="stopped")]))

    async def steps(session, follow: Follow):
        session.submit(UserTurn("start python"))
        await follow.until(ev.TurnEnded)
        session.submit(SetMode("plan"))
        await follow.until(ev.ModeChanged)
        session.submit(UserTurn("write a file"))
        await follow.until(ev.TurnEnded)

    from tests.support.harness import follow_session

    events = follow_session(project, server, steps, *ON)
    ends = [e for e in events if isinstance(e, ev.ToolCallEnded) and e.name == "write_stdin"]
    typed, interrupt = ends[-2], ends[-1]
    assert not typed.ok and typed.denied == Refusal.POLICY and "plan mode" in typed.output
    assert interrupt.ok and "KeyboardInterrupt" in interrupt.output
    assert not (project / "y").exists()


def test_processes_end_with_the_session(project, server):
    server.add(*typist([(exec_call("sleep 987651"), "session ID 1")], final="left running"))
    run_session(project, server, "start it", overrides=ON)
    assert gone_soon("sleep 987651")


def test_processes_end_when_auger_is_killed(project, server, auger_home):
    server.add(Reply(tool_calls=[exec_call("sleep 987652", tty=True)]), Fault.hang(60))
    proc = subprocess.Popen([sys.executable, "-m", "auger", "exec", "--json", "--base-url", server.base_url, "-m", "m",
                             "-c", "exec_sessions=true", "start it"], cwd=project, env=cli_env(auger_home),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not alive("sleep 987652") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert alive("sleep 987652"), "the process never started"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert gone_soon("sleep 987652")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_the_oldest_idle_session_makes_room_and_an_idle_one_ends(project, server):
    server.add(Reply(tool_calls=[exec_call("cat", yield_ms=250)]),
               Reply(tool_calls=[exec_call("cat", yield_ms=250)]),
               Reply(tool_calls=[exec_call("cat", yield_ms=250)]),
               Reply(tool_calls=[write_call("hi\n")]),
               Reply(tool_calls=[ToolCall("shell", {"command": "sleep 1.5"})]),
               Reply(tool_calls=[write_call("hi\n", session_id=3)]),
               Reply(text="done"))
    run_session(project, server, "cats", overrides=(*ON, "exec_sessions_max=2", "exec_session_idle_timeout=1"))
    outputs = tool_outputs(server)
    assert "Session 1 (`cat`) was ended to make room" in outputs[2] and "session ID 3" in outputs[2]
    assert "session 1 has ended (ended to make room" in outputs[3]
    assert "session 3 has ended (unused for 1s" in outputs[5]


def test_an_interrupted_wait_leaves_a_known_session_running(project, server):
    """An interrupt stops the wait; the process whose id the model had goes on, and is there next turn."""
    server.add(*typist([(exec_call("cat"), "session ID 1")], final="started", then=[
        Reply(tool_calls=[write_call("", yield_ms=30_000)]),
        Reply(tool_calls=[write_call("still here\n")]), Reply(text="done")]))

    async def main():
        session, store = await open_session(project, server, project.parent / "s.db", *ON)
        follow = Follow(session)
        try:
            session.submit(UserTurn("start"))
            await follow.until(ev.TurnEnded)
            session.submit(UserTurn("wait"))
            await follow.until(ev.ToolCallStarted, where=lambda e: e.name == "write_stdin")
            from auger.protocol.ops import Interrupt

            session.submit(Interrupt())
            ended = await follow.until(ev.TurnEnded)
            session.submit(UserTurn("again"))
            await follow.until(ev.TurnEnded)
            session.submit(Shutdown())
            await session.wait_closed()
        finally:
            await store.aclose()
        return ended

    ended = asyncio.run(asyncio.wait_for(main(), 60))
    assert ended.reason == "cancelled"
    assert "still here" in tool_outputs(server)[-1]


def test_an_approved_process_takes_keystrokes_without_asking_again(project, server):
    """Safe mode asks once, for the command; what is typed into it is inside that approval."""
    server.add(*typist([(exec_call("python3 -q -i", tty=True), ">>> "),
                        (write_call("print('typed')\n"), "typed\n"),
                        (write_call("exit()\n"), "Process exited with code 0")]))
    run = run_session(project, server, "python", overrides=(*ON, "mode=safe"), interactive=True,
                      on_event=approve_all)
    asked = run.of(ev.ApprovalRequest)
    assert [a.details.tool for a in asked] == ["exec_command"]
    assert asked[0].details.subject == "python3 -q -i"
    assert KEYSTROKES in asked[0].details.findings  # the card says what approving it means
    assert run.of(ev.AgentMessage)[-1].text == "done"


def approve_all(session, event) -> None:
    from auger.protocol.ops import ApprovalDecision

    if isinstance(event, ev.ApprovalRequest):
        session.submit(ApprovalDecision(event.request_id, "approve"))


def test_a_sub_agents_processes_are_its_own_and_end_with_it(project, server):
    from tests.support.agents import Routes, run_parent

    alive_after_child: list[bool] = []

    def check(body):
        alive_after_child.append(alive("sleep 987654"))
        return Reply(tool_calls=[write_call("")])

    routes = Routes({
        "start": [Reply(tool_calls=[ToolCall("spawn_agent", {"prompt": "start a process"})]), check,
                  Reply(text="done")],
        "start a process": [Reply(tool_calls=[exec_call("sleep 987654")]), Reply(text="started")],
    }).install(server)
    run_parent(project, server, "start", overrides=ON)
    child_output = routes.bodies("start a process")[-1]["messages"][-1]["content"]
    assert "Process running with session ID 1" in child_output
    assert alive_after_child == [False]  # ended with the child, before the parent's next step
    parent_output = routes.bodies("start")[-1]["messages"][-1]["content"]
    assert "there is no session 1" in parent_output  # the parent cannot type into its child's process
