"""Sub-agents end to end against the mock Chat Completions server: parallel foreground children,
background children delivered between turns, the result cache, depth, mode and tool narrowing,
approvals routed to the parent's client, cancellation killing a child's commands, and resume after
the process was killed while a child ran."""

from __future__ import annotations

import asyncio
import json
import re
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from auger.protocol import events as ev
from auger.protocol.ops import ApprovalDecision, Shutdown, UserTurn
from auger.store.sqlite import SqliteStore
from tests.support.agents import (
    WAIT_FOR_FILE, Routes, follow, parent_turn_ended, pids_of, run_parent, spawn, tool_messages,
)
from tests.support.harness import dies_soon, open_session, process_alive, run_session
from tests.support.mock_openai import Reply, ToolCall


def test_foreground_children_in_one_reply_run_in_parallel_and_answer(project, server):
    routes = Routes({
        "go": [Reply(tool_calls=[spawn("find A", agent="explore"), spawn("find B", agent="explore"),
                                 spawn("find C", agent="explore")]),
               Reply(text="all found")],
        "find A": [Reply(text="A is in a.py", delay=1.0)],
        "find B": [Reply(text="B is in b.py", delay=1.0)],
        "find C": [Reply(text="C is in c.py", delay=1.0)],
    }).install(server)
    started = time.monotonic()
    run = run_parent(project, server, "go")
    elapsed = time.monotonic() - started
    assert run.ended.reason == "complete", run.ended.message
    outputs = tool_messages(routes.bodies("go")[-1])
    assert [o.splitlines()[1] for o in outputs] == ["A is in a.py", "B is in b.py", "C is in c.py"]
    assert all(o.startswith("Agent explore (") for o in outputs)
    assert elapsed < 2.6, f"three 1 s children took {elapsed:.1f} s: they did not overlap"
    # each child got the agent's instructions and only read-only tools
    child = routes.bodies("find A")[0]
    assert any(str(m.get("content", "")).startswith("<agent name='explore'>") for m in child["messages"])
    names = {t["function"]["name"] for t in child["tools"]}
    assert "read_file" in names and "shell" not in names and "write_file" not in names


def test_child_events_reach_the_parent_stream_with_the_spawn_call_id(project, server):
    Routes({"go": [Reply(tool_calls=[ToolCall("spawn_agent", {"prompt": "look"}, id="call_spawn")]),
                   Reply(text="ok")],
            "look": [Reply(tool_calls=[ToolCall("list_dir", {"path": "."})]), Reply(text="seen")]}).install(server)
    envelopes = []

    plain: list[ev.Event] = []  # what a client that follows events without envelopes (the TUI) sees

    async def main():
        session, store = await open_session(project, server, project.parent / "s.db")
        from auger.engine.session.sessions import run_prompt

        async def pull():
            async for event in session.events():
                plain.append(event)

        puller = asyncio.create_task(pull())
        try:
            await run_prompt(session, "go", on_envelope=envelopes.append)
            await puller
        finally:
            await store.aclose()

    asyncio.run(main())
    assert [type(e) for e in plain if isinstance(e, (ev.TurnStarted, ev.TurnEnded))] == [ev.TurnStarted, ev.TurnEnded]
    assert any(isinstance(e, ev.ToolCallStarted) and e.name == "list_dir" for e in plain)
    child = [e for e in envelopes if e.parent_call_id == "call_spawn"]
    kinds = [e.event.TYPE for e in child]
    assert kinds[0] == "turn_started" and kinds[-1] == "turn_ended"
    assert "tool_call_started" in kinds and "tool_call_ended" in kinds and "agent_message" in kinds
    assert "token_usage" in kinds
    parent_ends = [e for e in envelopes if isinstance(e.event, ev.TurnEnded) and e.parent_call_id is None]
    assert len(parent_ends) == 1 and parent_ends[0].event.reason == "complete"
    # the child's usage rolled up into the parent's turn total
    usage = [e.event for e in envelopes if isinstance(e.event, ev.TokenUsage) and e.parent_call_id is None]
    child_usage = [e.event for e in child if isinstance(e.event, ev.TokenUsage)]
    own = sum(u.last.input_tokens for u in usage)
    assert usage[-1].turn.input_tokens == own + sum(u.last.input_tokens for u in child_usage)


def test_a_background_child_finishing_between_turns_is_told_at_the_next_turn(project, server):
    routes = Routes({
        "start": [Reply(tool_calls=[spawn("slow job", background=True)]), Reply(text="started it"),
                  Reply(text="it said 42")],
        "slow job": [Reply(text="job result 42", delay=0.8)],
    }).install(server)

    async def main():
        session, store = await open_session(project, server, project.parent / "s.db")
        try:
            session.submit(UserTurn("start"))
            first = await follow(session, parent_turn_ended)
            assert first[-1].event.reason == "complete"
            # the turn ended while the child still ran; now wait for the child's own end
            child_end = await follow(session, lambda e: isinstance(e.event, ev.TurnEnded) and e.parent_call_id)
            assert child_end[-1].event.reason == "complete"
            session.submit(UserTurn("what did it say?"))
            await follow(session, lambda e: parent_turn_ended(e) and e.seq > first[-1].seq)
            session.submit(Shutdown())
            await session.wait_closed()
        finally:
            await store.aclose()

    asyncio.run(main())
    bodies = routes.bodies("start")
    assert "started it" not in json.dumps(bodies[1]["messages"][-1])
    spawned = tool_messages(bodies[1])[0]
    assert spawned.startswith("Started agent task in the background with id ")
    last = bodies[-1]["messages"]
    delivered = [m["content"] for m in last if m["role"] == "user" and "<agent_result" in str(m["content"])]
    assert len(delivered) == 1 and "job result 42" in delivered[0]
    # delivered before the user's new message, and only once
    texts = [str(m.get("content")) for m in last]
    assert texts.index(delivered[0]) < texts.index("what did it say?")


def test_wait_agent_returns_a_background_result_and_it_is_not_told_twice(project, server):
    routes = Routes({
        "start": [Reply(tool_calls=[spawn("slow job", background=True)]),
                  Reply(tool_calls=[ToolCall("wait_agent", {"timeout": 10})]), Reply(text="done")],
        "slow job": [Reply(text="job result 7", delay=0.5)],
    }).install(server)
    run = run_parent(project, server, "start")
    assert run.ended.reason == "complete"
    last = routes.bodies("start")[-1]
    assert "job result 7" in tool_messages(last)[1]
    assert not any("<agent_result" in str(m.get("content")) for m in last["messages"])


def test_list_agents_shows_only_the_callers_children(project, server):
    routes = Routes({
        "start": [Reply(tool_calls=[spawn("child one")]), Reply(tool_calls=[ToolCall("list_agents", {})]),
                  Reply(text="done")],
        "child one": [Reply(tool_calls=[ToolCall("list_agents", {})]), Reply(text="one done")],
    }).install(server)
    run_parent(project, server, "start")
    assert tool_messages(routes.bodies("child one")[-1]) == ["You have started no sub-agents."]
    listing = tool_messages(routes.bodies("start")[-1])[1]
    assert "task" in listing and "completed" in listing and "child one" in listing


def test_cancelling_a_child_kills_its_shell_commands(project, server):
    pid_file = project / "child.pid"
    routes = Routes({
        "start": [Reply(tool_calls=[spawn("run it", background=True)]),
                  Reply(tool_calls=[ToolCall("shell", {"command": WAIT_FOR_FILE.format("child.pid")})]),
                  "CANCEL",
                  Reply(text="cancelled")],
        "run it": [Reply(tool_calls=[ToolCall("shell", {"command": "echo $$ > child.pid; exec sleep 61.5"})])],
    })
    agent_ids: list[str] = []

    seen: list[int] = []

    def cancel_step(body: dict) -> Reply:  # asked for once the parent's shell saw the child's pid file
        seen.extend(pids_of("sleep 61.5"))
        return Reply(tool_calls=[ToolCall("cancel_agent", {"id": agent_ids[0]})])

    original = routes.__call__

    class Dispatch:
        def __call__(self, body):
            reply = original(body)
            if reply == "CANCEL":
                agent_ids.append(tool_messages(body)[0].split("with id ")[1].split(".")[0])
                return cancel_step(body)
            return reply

    server.add(*[Dispatch()] * 10)
    run = run_parent(project, server, "start")
    assert run.ended.reason == "complete", run.ended.message
    assert pid_file.read_text().strip() and len(seen) == 1, seen
    assert dies_soon(seen[0]), "the child's command outlived its cancellation"
    cancelled = tool_messages(routes.bodies("start")[-1])[2]
    assert "cancelled" in cancelled


def test_shutting_the_session_down_kills_a_background_childs_commands(project, server):
    pid_file = project / "bg.pid"
    Routes({
        "start": [Reply(tool_calls=[spawn("run it", background=True)]),
                  Reply(tool_calls=[ToolCall("shell", {"command": WAIT_FOR_FILE.format("bg.pid")})]),
                  Reply(text="leaving")],
        "run it": [Reply(tool_calls=[ToolCall("shell", {"command": "echo $$ > bg.pid; exec sleep 62.5"})])],
    }).install(server)
    seen: list[int] = []

    def on_envelope(session, envelope):
        if isinstance(envelope.event, ev.TurnEnded):
            seen.extend(pids_of("sleep 62.5"))

    run = run_parent(project, server, "start", on_envelope=on_envelope)
    assert run.ended.reason == "complete"
    assert pid_file.read_text().strip() and len(seen) == 1, seen
    assert dies_soon(seen[0]), "a background child's command outlived the session"


KILLED_SCRIPT = """
import asyncio, sys
from pathlib import Path
from auger.protocol import events as ev
from auger.protocol.ops import UserTurn
from tests.support.harness import open_session

class Remote:  # the test's server, by URL
    base_url = sys.argv[3]

async def main():
    session, store = await open_session(Path(sys.argv[1]), Remote(), Path(sys.argv[2]))
    session.submit(UserTurn("start"))
    async for envelope in session.subscribe():
        if isinstance(envelope.event, ev.TurnStarted) and envelope.parent_call_id:
            print(session.id, flush=True)
        if isinstance(envelope.event, ev.TurnEnded) and envelope.parent_call_id is None:
            print("READY", flush=True)
            await asyncio.sleep(120)

asyncio.run(main())
"""


def test_a_child_running_when_the_process_is_killed_is_reported_interrupted_on_resume(project, server, tmp_path):
    routes = Routes({
        "start": [Reply(tool_calls=[spawn("long job", background=True)]), Reply(text="started"),
                  Reply(text="I will start it again")],
        "long job": [Reply(text="never seen", delay=30)],
    }).install(server)
    db = tmp_path / "killed.db"
    script = tmp_path / "killed.py"
    script.write_text(KILLED_SCRIPT)
    repo = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen([sys.executable, str(script), str(project), str(db), server.base_url], cwd=repo,
                            env={**os.environ, "PYTHONPATH": str(repo)}, stdout=subprocess.PIPE, text=True)
    try:
        session_id = proc.stdout.readline().strip()
        assert proc.stdout.readline().strip() == "READY", session_id
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()

    async def links():
        store = SqliteStore(db)
        try:
            return await store.list_links(session_id)
        finally:
            await store.aclose()

    assert [link.status for link in asyncio.run(links())] == ["running"]
    run_session(project, server, "is it done?", db=db, resume=session_id)
    assert [link.status for link in asyncio.run(links())] == ["interrupted"]
    last = routes.bodies("start")[-1]["messages"]
    notes = [m["content"] for m in last if "<agent_result" in str(m.get("content"))]
    assert len(notes) == 1 and "interrupted" in notes[0] and "long job" not in notes[0]


def test_an_identical_spawn_reuses_the_result_until_something_changes(project, server):
    routes = Routes({
        "start": [Reply(tool_calls=[spawn("where is X", agent="explore")]),
                  Reply(tool_calls=[spawn("where is X", agent="explore")]),
                  Reply(tool_calls=[ToolCall("write_file", {"path": "x.py", "content": "X = 1\n"})]),
                  Reply(tool_calls=[spawn("where is X", agent="explore")]),
                  Reply(tool_calls=[spawn("add Y", agent="task")]),
                  Reply(tool_calls=[spawn("where is X", agent="explore")]),
                  Reply(text="first turn done"),
                  Reply(tool_calls=[spawn("where is X", agent="explore")]), Reply(text="second turn done")],
        "where is X": [Reply(text="nowhere yet"), Reply(text="X is in x.py"), Reply(text="X and Y are in x.py")],
        "add Y": [Reply(tool_calls=[ToolCall("edit_file", {"path": "x.py", "old_string": "X = 1",
                                                           "new_string": "X = 1\nY = 2"})]),
                  Reply(text="added Y")],
    }).install(server)
    run = run_parent(project, server, "start", "again", overrides=("approve_all=true",))
    assert [e.reason for e in run.parent_ends()] == ["complete", "complete"]
    outputs = tool_messages(routes.bodies("start")[-1])
    assert "nowhere yet" in outputs[0]
    assert outputs[1].startswith("(cached result of an identical earlier run of agent explore") \
        and "nowhere yet" in outputs[1]
    assert "X is in x.py" in outputs[3]  # the parent wrote a file: run again
    assert "added Y" in outputs[4] and (project / "x.py").read_text() == "X = 1\nY = 2\n"
    assert "X and Y are in x.py" in outputs[5]  # a child wrote a file: run again
    assert outputs[6].startswith("(cached result") and "X and Y" in outputs[6]  # across turns, nothing changed
    assert len(routes.bodies("where is X")) == 3


def test_nesting_stops_at_the_depth_limit_with_a_clear_error(project, server):
    routes = Routes({
        "start": [Reply(tool_calls=[spawn("level one")]), Reply(text="done")],
        "level one": [Reply(tool_calls=[spawn("level two")]), Reply(text="one done")],
        "level two": [Reply(tool_calls=[spawn("level three")]), Reply(text="two done")],
    }).install(server)
    run = run_parent(project, server, "start")
    assert run.ended.reason == "complete"
    refused = tool_messages(routes.bodies("level two")[-1])[0]
    assert "nest at most 2 deep" in refused and "agents_max_depth" in refused
    assert "two done" in tool_messages(routes.bodies("level one")[-1])[0]
    assert "one done" in tool_messages(routes.bodies("start")[-1])[0]
    # grandchildren's events reach the session's stream too, under the child's spawn call
    child_calls = {e.parent_call_id for e in run if e.parent_call_id}
    assert len(child_calls) == 2


def test_depth_limit_is_configurable(project, server):
    routes = Routes({
        "start": [Reply(tool_calls=[spawn("level one")]), Reply(text="done")],
        "level one": [Reply(tool_calls=[spawn("level two")]), Reply(text="one done")],
    }).install(server)
    run_parent(project, server, "start", overrides=("agents_max_depth=1",))
    assert "nest at most 1 deep" in tool_messages(routes.bodies("level one")[-1])[0]


def test_a_child_is_never_less_restricted_than_its_parent(project, server):
    (project / ".auger" / "agents").mkdir(parents=True)
    (project / ".auger" / "agents" / "writer.md").write_text(
        "---\nname: writer\ndescription: writes files\nmode: auto\n---\nWrite what you are asked.\n")
    routes = Routes({
        "start": [Reply(tool_calls=[spawn("write a", agent="task"), spawn("write b", agent="writer")]),
                  Reply(text="done")],
        "write a": [Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "a"})]), Reply(text="a?")],
        "write b": [Reply(tool_calls=[ToolCall("write_file", {"path": "b.txt", "content": "b"})]), Reply(text="b?")],
    }).install(server)
    run_parent(project, server, "start", overrides=("mode=plan",))
    assert "plan mode" in tool_messages(routes.bodies("write a")[-1])[0]
    assert "plan mode" in tool_messages(routes.bodies("write b")[-1])[0]
    assert not (project / "a.txt").exists() and not (project / "b.txt").exists()
    env = [m["content"] for m in routes.bodies("write b")[0]["messages"] if "<environment_context>" in
           str(m.get("content"))]
    assert "plan" in env[0]


def test_a_childs_tools_are_its_definition_within_the_parents_catalog(project, server):
    (project / ".claude" / "agents").mkdir(parents=True)
    (project / ".claude" / "agents" / "reader.md").write_text(
        "---\nname: reader\ndescription: reads and edits\ntools: Read, Edit, Bash(git:*), no_such_tool\n---\n"
        "Read.\n")
    routes = Routes({
        "start": [Reply(tool_calls=[spawn("read it", agent="reader")]), Reply(text="done")],
        "read it": [Reply(tool_calls=[ToolCall("shell", {"command": "true"})]), Reply(text="read")],
    }).install(server)
    run_parent(project, server, "start")
    child = routes.bodies("read it")[0]
    names = {t["function"]["name"] for t in child["tools"]}
    assert names == {"read_file", "edit_file"}  # apply_patch is not in this model's catalog; Bash(git:*) unknown
    assert "no tool named 'shell'" in tool_messages(routes.bodies("read it")[-1])[0]


def test_a_grandchilds_tools_are_within_its_parents_agent_tools_included(project, server):
    (project / ".auger" / "agents").mkdir(parents=True)
    (project / ".auger" / "agents" / "lead.md").write_text(
        "---\nname: lead\ndescription: delegates only\ntools: read_file, spawn_agent\n---\nDelegate.\n")
    routes = Routes({
        "start": [Reply(tool_calls=[spawn("lead it", agent="lead")]), Reply(text="done")],
        "lead it": [Reply(tool_calls=[spawn("do it")]), Reply(text="led")],
        "do it": [Reply(tool_calls=[ToolCall("list_agents", {}), ToolCall("shell", {"command": "true"})]),
                  Reply(text="did")],
    }).install(server)
    run_parent(project, server, "start")
    grandchild = routes.bodies("do it")[0]
    assert {t["function"]["name"] for t in grandchild["tools"]} == {"read_file", "spawn_agent"}
    refused = tool_messages(routes.bodies("do it")[-1])
    assert "no tool named 'list_agents'" in refused[0] and "no tool named 'shell'" in refused[1]


def test_a_worktree_child_whose_sandbox_lacks_a_guarantee_asks_as_it_warns(project, server):
    """Landlock cannot protect the worktree's `.git`: the child's own sandbox warns that auto asks, so it
    asks (headless: refused), although the session's sandbox (a project without `.git`) lacks nothing."""
    from tests.support.redteam_sandbox import require

    require("landlock")
    routes = Routes({
        "start": [Reply(tool_calls=[spawn("add b", isolation="worktree")]), Reply(text="done")],
        "add b": [Reply(tool_calls=[ToolCall("write_file", {"path": "b.txt", "content": "b\n"})]),
                  Reply(text="tried")],
    }).install(server)
    run = run_parent(project, server, "start", overrides=("sandbox=landlock", "mode=auto"))
    warned = [e.message for e in run.events(ev.WarningEvent) if ".git is not protected" in e.message]
    assert len(warned) == 1 and warned[0].startswith("agent task (") and "auto mode will ask" in warned[0]
    assert not [e for e in run.events(ev.WarningEvent) if "cannot enforce" in e.message and "agent" not in e.message]
    assert "headless run" in tool_messages(routes.bodies("add b")[-1])[0]
    answer = tool_messages(routes.bodies("start")[-1])[0]
    assert "Its changes:)\n(none)" in answer, answer


def test_a_childs_approval_goes_to_the_parents_client_labelled_and_is_answered(project, server):
    routes = Routes({
        "start": [Reply(tool_calls=[ToolCall("spawn_agent", {"prompt": "write a"}, id="call_sp")]),
                  Reply(text="done")],
        "write a": [Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "a"})]),
                    Reply(text="wrote a")],
    }).install(server)
    asked = []

    def on_envelope(session, envelope):
        if isinstance(envelope.event, ev.ApprovalRequest):
            asked.append(envelope)
            session.submit(ApprovalDecision(envelope.event.request_id, "approve"))

    run = run_parent(project, server, "start", overrides=("mode=safe",), interactive=True, on_envelope=on_envelope)
    assert run.ended.reason == "complete"
    assert len(asked) == 1 and asked[0].parent_call_id == "call_sp"
    assert asked[0].event.message.startswith("[agent task ") and asked[0].event.details.tool == "write_file"
    assert (project / "a.txt").read_text() == "a"
    assert "wrote a" in tool_messages(routes.bodies("start")[-1])[0]


def test_a_childs_approval_is_denied_headless(project, server):
    routes = Routes({
        "start": [Reply(tool_calls=[spawn("write a")]), Reply(text="done")],
        "write a": [Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "a"})]),
                    Reply(text="could not")],
    }).install(server)
    run = run_parent(project, server, "start", overrides=("mode=safe",))
    assert not run.events(ev.ApprovalRequest)
    assert "headless run" in tool_messages(routes.bodies("write a")[-1])[0]
    assert not (project / "a.txt").exists()


def test_fan_out_is_capped_per_turn_and_queued_beyond_the_concurrency_cap(project, server):
    routes = Routes({
        "start": [Reply(tool_calls=[spawn("one"), spawn("two"), spawn("three")]), Reply(text="done")],
        "one": [Reply(text="1", delay=0.6)], "two": [Reply(text="2", delay=0.6)],
    }).install(server)
    started = time.monotonic()
    run_parent(project, server, "start", overrides=("agents_max_concurrent=1", "agents_max_per_turn=2"))
    elapsed = time.monotonic() - started
    outputs = tool_messages(routes.bodies("start")[-1])
    assert "finished:\n1" in outputs[0] and "finished:\n2" in outputs[1]
    assert "already started 2 sub-agents" in outputs[2] and "agents_max_per_turn" in outputs[2]
    assert elapsed >= 1.2, f"two 0.6 s children with one slot took {elapsed:.2f} s: they overlapped"


def test_the_loop_guard_sees_identical_spawns(project, server):
    Routes({
        "start": [Reply(tool_calls=[spawn("same", agent="explore")]) for _ in range(3)] + [Reply(text="done")],
        "same": [Reply(text="same answer")],
    }).install(server)
    run = run_parent(project, server, "start")
    detected = run.events(ev.LoopDetected)
    assert detected and detected[0].tool == "spawn_agent"


def test_unknown_agent_and_foreign_ids_are_errors_the_model_reads(project, server):
    routes = Routes({  # the follow-up tools are offered once the session has a sub-agent: "y" is one
        "start": [Reply(tool_calls=[spawn("x", agent="nope"), spawn("y")]),
                  Reply(tool_calls=[ToolCall("cancel_agent", {"id": "../../etc"}),
                                    ToolCall("wait_agent", {"ids": ["zzz"]})]),
                  Reply(text="done")],
        "y": [Reply(text="done y")],
    }).install(server)
    run_parent(project, server, "start")
    assert "no agent named 'nope'; available: explore, plan, task, verify" in tool_messages(
        routes.bodies("start")[1])[0]
    outputs = tool_messages(routes.bodies("start")[-1])[-2:]
    assert "no sub-agent '../../etc' of yours" in outputs[0] and "no sub-agent 'zzz'" in outputs[1]


def test_a_child_in_a_worktree_leaves_the_tree_alone_until_its_changes_are_applied(project, server, monkeypatch):
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    (project / "a.txt").write_text("a\n")
    (project / "c.txt").write_text("c\n")
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run(["git", "-C", str(project), *argv], check=True)
    (project / "uncommitted.txt").write_text("seen by the child\n")
    head = subprocess.run(["git", "-C", str(project), "rev-parse", "HEAD"], capture_output=True, text=True).stdout

    def apply(body):  # the parent applies what the child made, after changing c.txt itself meanwhile
        (project / "c.txt").write_text("changed by the parent\n")
        agent_id = re.search(r"apply_agent_changes with id (\S+)", tool_messages(body)[0]).group(1)
        return Reply(tool_calls=[ToolCall("apply_agent_changes", {"id": agent_id})])

    routes = Routes({
        "start": [Reply(tool_calls=[spawn("add b", isolation="worktree")]), apply, Reply(text="done")],
        "add b": [Reply(tool_calls=[ToolCall("read_file", {"path": "uncommitted.txt"}),
                                    ToolCall("write_file", {"path": "b.txt", "content": "b\n"}),
                                    ToolCall("write_file", {"path": "c.txt", "content": "changed by the child\n"}),
                                    ToolCall("shell", {"command": "echo made-by-a-command > d.txt && cat d.txt"})]),
                  Reply(text="added b")],
    }).install(server)
    run_parent(project, server, "start")
    child_view = tool_messages(routes.bodies("add b")[-1])
    assert "seen by the child" in child_view[0], "the worktree starts from the tree as it is, not from HEAD"
    assert "made-by-a-command" in child_view[-1], "the child's commands can write its worktree (its own sandbox)"
    result = tool_messages(routes.bodies("start")[1])[0]
    assert "added b" in result and "+b" in result and "b.txt" in result
    applied = tool_messages(routes.bodies("start")[-1])[-1]
    assert (project / "b.txt").read_text() == "b\n"
    assert (project / "d.txt").read_text() == "made-by-a-command\n"
    assert (project / "c.txt").read_text() == "changed by the parent\n" and "c.txt" in applied, applied
    assert subprocess.run(["git", "-C", str(project), "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout == head


def test_a_childs_usage_counts_against_the_session_budget(project, server):
    routes = Routes({
        "start": [Reply(tool_calls=[spawn("busy")], usage={"prompt_tokens": 100, "completion_tokens": 10}),
                  Reply(text="done")],
        "busy": [Reply(tool_calls=[ToolCall("list_dir", {"path": "."})],
                       usage={"prompt_tokens": 1000, "completion_tokens": 10}),
                 Reply(text="never asked")],
    }).install(server)
    run = run_parent(project, server, "start", overrides=("session_token_budget=500",))
    assert len(routes.bodies("busy")) == 1  # the child stopped: the session's budget was spent
    assert len(routes.bodies("start")) == 1  # and so did the parent, counting the child's usage
    assert run.ended.reason == "error" and "session token budget reached: 1,120 of 500" in run.ended.message


def test_an_interrupt_stops_the_turn_but_background_agents_run_until_cancelled(project, server):
    from auger.protocol.ops import CancelAgents, Interrupt

    Routes({
        "start": [Reply(tool_calls=[spawn("run it", background=True)]),
                  Reply(tool_calls=[ToolCall("shell", {"command": WAIT_FOR_FILE.format("bg.pid")})]),
                  Reply(tool_calls=[ToolCall("shell", {"command": "sleep 33.5"})]),
                  Reply(text="yes")],  # the next turn, "still there?"
        "run it": [Reply(tool_calls=[ToolCall("shell", {"command": "echo $$ > bg.pid; exec sleep 64.5"})])],
    }).install(server)

    async def main():
        session, store = await open_session(project, server, project.parent / "s.db")
        stream = session.subscribe()

        async def until(match):
            async for envelope in stream:
                if match(envelope):
                    return envelope.event
            raise AssertionError("the session ended first")

        try:
            session.submit(UserTurn("start"))
            await until(lambda e: isinstance(e.event, ev.ToolCallStarted) and "33.5" in str(e.event.arguments))
            session.submit(Interrupt())  # Esc mid-turn: the turn stops, the background agent does not
            first = await until(parent_turn_ended)
            after_turn = pids_of("sleep 64.5")
            session.submit(Interrupt())  # with no turn running: nothing to stop
            session.submit(UserTurn("still there?"))
            await until(parent_turn_ended)
            after_idle = [pid for pid in after_turn if process_alive(pid)]
            session.submit(CancelAgents(["nope"]))
            refused = await until(lambda e: isinstance(e.event, ev.WarningEvent))
            session.submit(CancelAgents())
            child_end = await until(lambda e: isinstance(e.event, ev.TurnEnded) and e.parent_call_id)
            session.submit(Shutdown())
            await session.wait_closed()
            return first, after_turn, after_idle, refused, child_end, await store.list_links(session.id)
        finally:
            await store.aclose()

    first, after_turn, after_idle, refused, child_end, links = asyncio.run(asyncio.wait_for(main(), 30))
    assert first.reason == "cancelled"
    assert len(after_turn) == 1 and after_idle == after_turn, "an interrupt killed a background agent's command"
    assert "no sub-agent 'nope' in this session" in refused.message
    assert child_end.reason == "cancelled" and child_end.message == "cancelled by the user"
    assert dies_soon(after_turn[0]), "the cancelled agent's command outlived it"
    assert [link.status for link in links] == ["cancelled"]


def test_an_approval_for_the_session_given_to_one_child_holds_for_the_next(project, server):
    Routes({
        "start": [Reply(tool_calls=[spawn("write a")]), Reply(tool_calls=[spawn("write a again")]),
                  Reply(text="done")],
        "write a": [Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "1"})]), Reply(text="1")],
        "write a again": [Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "2"})]),
                          Reply(text="2")],
    }).install(server)
    asked = []

    def on_envelope(session, envelope):
        if isinstance(envelope.event, ev.ApprovalRequest):
            asked.append(envelope.event)
            session.submit(ApprovalDecision(envelope.event.request_id, "approve_session"))

    run_parent(project, server, "start", overrides=("mode=safe",), interactive=True, on_envelope=on_envelope)
    assert len(asked) == 1 and (project / "a.txt").read_text() == "2"


def test_auger_exec_prints_the_parents_answer_never_a_childs(project, server, isolated_home):
    from tests.support.harness import auger_cli, json_events

    fast = ["-c", "model_retry_base_delay=0.01", "-c", "generate_titles=false"]
    Routes({"go": [Reply(tool_calls=[spawn("say something", agent="explore")]), Reply(text="")],
            "say something": [Reply(text="child words")]}).install(server, count=3)
    result = auger_cli("exec", "--base-url", server.base_url, "-m", "m", *fast, "go", home=isolated_home, cwd=project)
    assert result.returncode == 0, result.stderr
    assert "child words" not in result.stdout
    Routes({"go": [Reply(tool_calls=[spawn("say it", agent="explore")]), Reply(text="parent words")],
            "say it": [Reply(text="child words")]}).install(server, count=3)
    result = auger_cli("exec", "--json", "--base-url", server.base_url, "-m", "m", *fast, "go", home=isolated_home,
                       cwd=project)
    events = json_events(result.stdout)
    children = [e for e in events if e["parent_call_id"]]
    assert [e["type"] for e in children][:1] == ["turn_started"] and children[-1]["type"] == "turn_ended"
    assert [e["text"] for e in events if e["type"] == "agent_message" and not e["parent_call_id"]] == ["parent words"]
    assert events[-2]["type"] == "turn_ended" and events[-2]["parent_call_id"] is None


def test_an_agent_with_its_own_model_calls_that_model(project, server):
    (project / ".auger" / "agents").mkdir(parents=True)
    (project / ".auger" / "agents" / "small.md").write_text(
        "---\nname: small\ndescription: a smaller model\nmodel: small-model\nmax_model_calls: 1\n---\nBe brief.\n")
    routes = Routes({
        "start": [Reply(tool_calls=[spawn("quick look", agent="small")]), Reply(text="done")],
        "quick look": [Reply(tool_calls=[ToolCall("list_dir", {"path": "."})]), Reply(text="never")],
    }).install(server)
    run_parent(project, server, "start")
    assert [b["model"] for b in routes.bodies("quick look")] == ["small-model"]
    assert [b["model"] for b in routes.bodies("start")] == ["mock-model", "mock-model"]
    # its call cap (1) stopped it, headless, and the parent was told
    assert "It ended early" in tool_messages(routes.bodies("start")[-1])[0]


def _agent_id(body: dict) -> str:
    """The id of the agent named by the latest agent tool output (a spawn's, a cancel's)."""
    for output in reversed(tool_messages(body)):
        found = re.search(r"(?:with id |^Agent \w+ \()([0-9a-f]{8})[).]", output)
        if found:
            return found.group(1)
    raise AssertionError(f"no agent id in {tool_messages(body)}")


def test_a_follow_up_to_a_running_background_child_changes_what_it_does_next(project, server):
    routes = Routes({  # the child works (waits for go.flag) while its parent sends the follow-up
        "count the files": [
            Reply(tool_calls=[ToolCall("shell", {"command": "echo on > busy.flag; "
                                                            + WAIT_FOR_FILE.format("go.flag")})]),
            lambda body: Reply(text="banana" if any(m.get("content") == "FOLLOW-UP: also say banana"
                                                    for m in body["messages"]) else "no follow-up seen")],
        "go": [Reply(tool_calls=[spawn("count the files", background=True)]),
               Reply(tool_calls=[ToolCall("shell", {"command": WAIT_FOR_FILE.format("busy.flag")})]),
               lambda body: Reply(tool_calls=[
                   ToolCall("send_input", {"agent_id": _agent_id(body), "message": "FOLLOW-UP: also say banana"}),
                   ToolCall("shell", {"command": "echo go > go.flag"})]),
               Reply(tool_calls=[ToolCall("wait_agent", {"timeout": 20})]),
               Reply(text="done")],
    }).install(server)
    run = run_parent(project, server, "go")
    assert run.ended.reason == "complete", run.ended.message
    child = routes.bodies("count the files")
    assert len(child) == 2 and child[1]["messages"][-1] == {"role": "user", "content": "FOLLOW-UP: also say banana"}
    sent, _, waited = tool_messages(routes.bodies("go")[-1])[2:]
    assert sent.startswith("Sent to agent task (") and "banana" in waited
    injected = [e for e in run if isinstance(e.event, ev.UserInputInjected)]
    assert [e.event.text for e in injected] == ["FOLLOW-UP: also say banana"] and injected[0].parent_call_id


def test_a_follow_up_to_a_finished_child_resumes_it_with_its_history(project, server):
    routes = Routes({
        "remember 42": [Reply(text="noted 42"), Reply(text="it was 42")],
        "go": [Reply(tool_calls=[spawn("remember 42")]),
               lambda body: Reply(tool_calls=[ToolCall("send_input", {"agent_id": _agent_id(body),
                                                                      "message": "which number?"})]),
               Reply(tool_calls=[ToolCall("wait_agent", {"timeout": 20})]),
               Reply(text="done")],
    }).install(server)
    run = run_parent(project, server, "go")
    assert run.ended.reason == "complete", run.ended.message
    resumed = routes.bodies("remember 42")[1]["messages"]
    said = [(m["role"], m["content"]) for m in resumed if m["role"] in ("user", "assistant")
            and not str(m["content"]).startswith(("<environment_context>", "<user_instructions>", "<agent "))]
    assert said == [("user", "remember 42"), ("assistant", "noted 42"), ("user", "which number?")]
    resumed_note, waited = tool_messages(routes.bodies("go")[-1])[1:]
    assert "had completed; it resumes with your message" in resumed_note and "it was 42" in waited
    child_turns = [e for e in run if isinstance(e.event, ev.TurnEnded) and e.parent_call_id]
    assert [e.event.reason for e in child_turns] == ["complete", "complete"]


def test_a_follow_up_to_a_cancelled_child_resumes_it_and_counts_against_the_turn_cap(project, server):
    routes = Routes({
        "long job": [Reply(tool_calls=[ToolCall("shell", {"command": "echo on > started.flag; sleep 30"})]),
                     Reply(text="picked up again")],
        "go": [Reply(tool_calls=[spawn("long job", background=True)]),
               Reply(tool_calls=[ToolCall("shell", {"command": WAIT_FOR_FILE.format("started.flag")})]),
               lambda body: Reply(tool_calls=[ToolCall("cancel_agent", {"id": _agent_id(body)})]),
               lambda body: Reply(tool_calls=[ToolCall("send_input", {"agent_id": _agent_id(body),
                                                                      "message": "go on"})]),
               Reply(tool_calls=[ToolCall("wait_agent", {"timeout": 20})]),
               Reply(text="done")],
    }).install(server)
    run = run_parent(project, server, "go", overrides=("agents_max_per_turn=2",))
    assert run.ended.reason == "complete", run.ended.message
    resumed, waited = tool_messages(routes.bodies("go")[-1])[3:]
    assert "had cancelled; it resumes with your message" in resumed and "picked up again" in waited
    assert routes.bodies("long job")[-1]["messages"][-1] == {"role": "user", "content": "go on"}


def test_send_input_names_only_the_callers_children(project, server):
    routes = Routes({"go": [Reply(tool_calls=[spawn("y")]),
                            Reply(tool_calls=[ToolCall("send_input", {"agent_id": "nope", "message": "hi"})]),
                            Reply(text="done")],
                     "y": [Reply(text="done y")]}).install(server)
    run_parent(project, server, "go")
    assert "no sub-agent 'nope' of yours" in tool_messages(routes.bodies("go")[-1])[-1]
