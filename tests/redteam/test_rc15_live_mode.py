"""Root cause 15: a mode switch must take effect at once, everywhere.

The user switches to plan mode because they want nothing changed from now on. A turn that is running,
a background sub-agent spawned in auto mode, a call waiting for an approval, a command the classifier
misjudged: each must be decided (and sandboxed) in the session's mode as it is when the call is decided,
capped by a sub-agent's own definition — never the mode fixed when the turn or the child started. Each
case switches through the real `set_mode` op while a scripted mock model waits for the switch; the
effect judged is a file written or not.
"""

from __future__ import annotations

import asyncio
import threading

from auger.protocol import events as ev
from auger.protocol.ops import ApprovalDecision, SetMode, Shutdown, UserTurn
from tests.support.agents import Routes, parent_turn_ended, run_parent, spawn, tool_messages
from tests.support.harness import open_session
from tests.support.mock_openai import Reply, ToolCall
from tests.support.redteam_sandbox import force_read_only, require

WAIT = 20  # seconds a scripted reply waits for the switch (it comes within milliseconds)


def after(switched: threading.Event, *calls: ToolCall):
    """A scripted reply that is only given once the mode switch happened."""

    def step(body: dict) -> Reply:
        assert switched.wait(WAIT), "the mode switch never came"
        return Reply(tool_calls=list(calls))

    return step


def write(path: str) -> ToolCall:
    return ToolCall("write_file", {"path": path, "content": "written\n"})


def background_run(project, server, switched: threading.Event, switch_to: str, *overrides: str) -> list:
    """Start a session whose first turn spawns background children and ends; then switch the mode, let
    the children go on (`switched`), and wait for every child's end. The envelopes, in order."""
    seen: list = []

    async def main():
        session, store = await open_session(project, server, project.parent / "sessions.db", *overrides)
        stream = session.subscribe()

        async def until(match):
            async for envelope in stream:
                seen.append(envelope)
                if match(envelope):
                    return envelope
            raise AssertionError("the session ended first")

        try:
            session.submit(UserTurn("start"))
            await until(parent_turn_ended)
            session.submit(SetMode(switch_to))
            await until(lambda e: isinstance(e.event, ev.ModeChanged))
            switched.set()
            spawned = sum(isinstance(e.event, ev.ToolCallStarted) and e.event.name == "spawn_agent" for e in seen)
            for _ in range(spawned):
                await until(lambda e: isinstance(e.event, ev.TurnEnded) and e.parent_call_id is not None)
            session.submit(Shutdown())
            await session.wait_closed()
        finally:
            await store.aclose()

    asyncio.run(asyncio.wait_for(main(), 60))
    return seen


def test_a_switch_to_plan_mid_turn_stops_the_running_turns_next_write(project, server):
    switched = threading.Event()
    routes = Routes({"start": [Reply(tool_calls=[write("one.txt")]), after(switched, write("two.txt")),
                               Reply(text="done")]}).install(server)

    def on_envelope(session, envelope):
        event = envelope.event
        if isinstance(event, ev.ToolCallEnded) and event.call_id and not switched.is_set():
            session.submit(SetMode("plan"))
        elif isinstance(event, ev.ModeChanged):
            switched.set()

    run = run_parent(project, server, "start", overrides=("mode=auto", "approve_all=true"), on_envelope=on_envelope)
    assert run.ended.reason == "complete", run.ended.message
    assert (project / "one.txt").exists()  # before the switch
    assert not (project / "two.txt").exists(), "the running turn wrote after the switch to plan mode"
    assert tool_messages(routes.bodies("start")[-1])[1].startswith("Not run: plan mode")


def test_a_command_decided_after_the_switch_runs_in_the_read_only_sandbox(project, server, monkeypatch):
    require("bwrap")
    force_read_only(monkeypatch)  # the classifier calls `touch` read-only: only the sandbox stands in the way
    switched = threading.Event()
    Routes({"start": [Reply(tool_calls=[write("one.txt")]),
                      after(switched, ToolCall("shell", {"command": "touch made.txt"})),
                      Reply(text="done")]}).install(server)

    def on_envelope(session, envelope):
        if isinstance(envelope.event, ev.ToolCallEnded) and not switched.is_set():
            session.submit(SetMode("plan"))
        elif isinstance(envelope.event, ev.ModeChanged):
            switched.set()

    run_parent(project, server, "start", overrides=("sandbox=bwrap", "mode=auto"), on_envelope=on_envelope)
    assert (project / "one.txt").exists() and not (project / "made.txt").exists()


def test_a_child_whose_definition_says_plan_runs_commands_read_only_in_an_auto_session(project, server,
                                                                                       monkeypatch):
    require("bwrap")
    force_read_only(monkeypatch)
    (project / ".auger" / "agents").mkdir(parents=True)
    (project / ".auger" / "agents" / "lookout.md").write_text(
        "---\nname: lookout\ndescription: looks around\ntools: shell\nmode: plan\n---\nLook.\n")
    Routes({"start": [Reply(tool_calls=[spawn("look", agent="lookout")]), Reply(text="done")],
            "look": [Reply(tool_calls=[ToolCall("shell", {"command": "touch made.txt"})]), Reply(text="looked")],
            }).install(server)
    run_parent(project, server, "start", overrides=("sandbox=bwrap", "mode=auto"))
    assert not (project / "made.txt").exists(), "the sandbox followed the session's mode, not the child's"


def test_a_switch_to_plan_narrows_a_background_child_spawned_in_auto(project, server):
    switched = threading.Event()
    routes = Routes({
        "start": [Reply(tool_calls=[spawn("write later", background=True)]), Reply(text="started")],
        "write later": [after(switched, write("late.txt")), Reply(text="child done")],
    }).install(server)
    seen = background_run(project, server, switched, "plan", "mode=auto", "approve_all=true")
    assert not (project / "late.txt").exists(), "a background child kept the auto mode it was spawned with"
    assert tool_messages(routes.bodies("write later")[-1])[0].startswith("Not run: plan mode")
    assert [e.event.reason for e in seen if isinstance(e.event, ev.TurnEnded) and e.parent_call_id] == ["complete"]


def test_a_background_child_in_a_worktree_runs_its_commands_read_only_after_the_switch(project, server,
                                                                                        monkeypatch):
    require("bwrap")
    force_read_only(monkeypatch)
    switched = threading.Event()
    routes = Routes({
        "start": [Reply(tool_calls=[spawn("touch later", background=True, isolation="worktree")]),
                  Reply(text="started")],
        "touch later": [after(switched, ToolCall("shell", {"command": "touch made.txt && echo touched"})),
                        Reply(text="child done")],
    }).install(server)
    background_run(project, server, switched, "plan", "sandbox=bwrap", "mode=auto")
    told = tool_messages(routes.bodies("touch later")[-1])[0]
    assert "touched" not in told and "read-only" in told, told


def test_the_session_mode_now_capped_by_the_childs_own_decides(project, server):
    """Switching plan → auto frees a child that took the session's mode, not one whose definition says plan."""
    (project / ".auger" / "agents").mkdir(parents=True)
    (project / ".auger" / "agents" / "careful.md").write_text(
        "---\nname: careful\ndescription: never writes\nmode: plan\n---\nBe careful.\n")
    switched = threading.Event()
    Routes({
        "start": [Reply(tool_calls=[spawn("free", background=True), spawn("capped", agent="careful",
                                                                          background=True)]),
                  Reply(text="started")],
        "free": [after(switched, write("free.txt")), Reply(text="free done")],
        "capped": [after(switched, write("capped.txt")), Reply(text="capped done")],
    }).install(server)
    background_run(project, server, switched, "auto", "mode=plan", "approve_all=true")
    assert (project / "free.txt").exists(), "the child did not follow the session's switch to auto"
    assert not (project / "capped.txt").exists(), "a child got a weaker mode than its definition's"


def test_a_switch_to_plan_while_an_approval_waits_refuses_the_approved_call(project, server):
    Routes({"start": [Reply(tool_calls=[write("asked.txt")]), Reply(text="done")]}).install(server)

    def on_envelope(session, envelope):
        event = envelope.event
        if isinstance(event, ev.ApprovalRequest):
            session.submit(SetMode("plan"))
            session.submit(ApprovalDecision(event.request_id, "approve"))  # answered after the switch

    run = run_parent(project, server, "start", overrides=("mode=safe",), interactive=True, on_envelope=on_envelope)
    assert run.ended.reason == "complete"
    assert run.events(ev.ApprovalRequest) and not (project / "asked.txt").exists()


def test_session_parts_are_told_of_a_switch(project, server):
    told: list[tuple[str, str]] = []

    async def main():
        session, store = await open_session(project, server, project.parent / "sessions.db", "mode=auto")
        try:
            async def listener(mode: str, previous: str) -> None:
                told.append((mode, previous))

            session.shared.mode.listen(listener)
            session.submit(SetMode("plan"))
            session.submit(SetMode("plan"))  # no change: nobody is told
            session.submit(SetMode("safe"))
            session.submit(Shutdown())
            await session.wait_closed()
        finally:
            await store.aclose()

    asyncio.run(main())
    assert told == [("plan", "auto"), ("safe", "plan")]
