"""The turn loop through the library API: concurrency, injection, interrupts, guards, usage."""

from __future__ import annotations

import asyncio
import time

from auger.engine.session.sessions import SessionManager
from auger.engine.workspace import Workspace
from auger.protocol import events as ev
from auger.protocol.ops import ApprovalDecision, Interrupt, UserTurn
from auger.tools.base import LOCAL_MUTATION, READ_ONLY, ToolResult, ToolSpec
from auger.tools.toolset import StaticToolset
from tests.support.harness import drive, make_config, run_session
from tests.support.mock_openai import Reply, ToolCall

TIMELINE: list[tuple[str, str, float]] = []


def _sleeper(name: str, effect: str, parallel: bool) -> ToolSpec:
    async def handler(args, ctx):
        TIMELINE.append((name, "start", time.monotonic()))
        await asyncio.sleep(0.3)
        TIMELINE.append((name, "end", time.monotonic()))
        return ToolResult(f"{name} done")

    return ToolSpec(name, "sleeps", {"type": "object", "properties": {}}, handler, effect, parallel)


def test_read_only_calls_run_concurrently_and_mutations_in_order(project, server):
    TIMELINE.clear()
    tools = StaticToolset([_sleeper("look_a", READ_ONLY, True), _sleeper("look_b", READ_ONLY, True),
                           _sleeper("change_a", LOCAL_MUTATION, False), _sleeper("change_b", LOCAL_MUTATION, False)])
    server.add(Reply(tool_calls=[ToolCall("look_a", {}), ToolCall("look_b", {}),
                                 ToolCall("change_a", {}), ToolCall("change_b", {})]),
               Reply(text="ok"))

    async def main():
        from auger.models.registry import create_client, resolve_provider
        from auger.store.sqlite import SqliteStore

        store = SqliteStore(project.parent / "s.db")
        sessions = SessionManager(Workspace.open(project, make_config(), tools=tools), store)
        client = create_client(resolve_provider("openai-compatible", server.base_url), "m",
                               env={"OPENAI_API_KEY": "k"})
        session = await sessions.create(client)
        run = await drive(session, "go")
        await store.aclose()
        return run

    run = asyncio.run(main())
    assert run.ended.reason == "complete"
    t = {(n, k): at for n, k, at in TIMELINE}
    # the two read-only calls overlap...
    assert t[("look_b", "start")] < t[("look_a", "end")]
    # ...the mutating ones do not, and keep their order
    assert t[("change_a", "end")] <= t[("change_b", "start")]
    assert t[("look_a", "end")] <= t[("change_a", "start")] and t[("look_b", "end")] <= t[("change_a", "start")]
    # every output reached the model, in call order
    tool_msgs = [m for m in server.chat_requests[-1].body["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_msgs] == ["look_a done", "look_b done", "change_a done", "change_b done"]


def test_input_submitted_mid_turn_is_injected_before_next_model_call(project, server):
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "sleep 0.5; echo slow"})]),
               Reply(text="saw both"))
    injected = []

    def on_event(session, event):
        if isinstance(event, ev.ToolCallStarted) and not injected:
            injected.append(True)
            session.submit(UserTurn("also: use tabs"))

    run = run_session(project, server, "first task", on_event=on_event)
    assert run.ended.reason == "complete"
    assert len(run.of(ev.TurnStarted)) == 1
    assert [e.text for e in run.of(ev.UserInputInjected)] == ["also: use tabs"]
    last = server.chat_requests[-1].body["messages"]
    assert last[-1] == {"role": "user", "content": "also: use tabs"}
    assert any(m["role"] == "tool" and "slow" in m["content"] for m in last)


def test_interrupt_kills_running_command_within_a_second_and_next_turn_knows(project, server):
    pidfile, marker = project / "child.pid", project / "survived"
    # the child proves it survived by touching a marker after the interrupt; pids are namespaced in the sandbox
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": f"(sleep 1.5; touch {marker}) & echo $! > {pidfile}; "
                                                               "sleep 30"})]),
               Reply(text="after interrupt"))
    stamps = {}

    def on_event(session, event):
        if isinstance(event, ev.ToolCallStarted):
            async def later():
                for _ in range(100):
                    if pidfile.exists() and pidfile.read_text().strip():
                        break
                    await asyncio.sleep(0.02)
                stamps["interrupt"] = time.monotonic()
                session.submit(Interrupt())
            asyncio.get_running_loop().create_task(later())
        elif isinstance(event, ev.TurnEnded) and "ended" not in stamps:
            stamps["ended"] = time.monotonic()
            session.submit(UserTurn("what happened?"))

    run = run_session(project, server, "run it", on_event=on_event, turns=2)
    ends = run.of(ev.TurnEnded)
    assert [e.reason for e in ends] == ["cancelled", "complete"]
    assert stamps["ended"] - stamps["interrupt"] < 1.0
    time.sleep(2)
    assert not marker.exists(), "the command's child process survived the interrupt"
    messages = server.chat_requests[-1].body["messages"]
    tool = [m for m in messages if m["role"] == "tool"]
    assert tool and "interrupted" in tool[0]["content"]
    users = [m["content"] for m in messages if m["role"] == "user"]
    assert any("<turn_aborted>" in u for u in users)
    assert users[-1] == "what happened?"


def test_interrupt_during_a_stalled_model_stream(project, server):
    from tests.support.mock_openai import Fault

    server.add(Fault.hang(after_chunks=1, seconds=20), Reply(text="fine"))
    stamps = {}

    def on_event(session, event):
        if isinstance(event, ev.TurnStarted) and "interrupt" not in stamps:
            async def later():
                server.wait_for_requests(1)
                await asyncio.sleep(0.2)
                stamps["interrupt"] = time.monotonic()
                session.submit(Interrupt())
            asyncio.get_running_loop().create_task(later())
        elif isinstance(event, ev.TurnEnded) and "ended" not in stamps:
            stamps["ended"] = time.monotonic()
            session.submit(UserTurn("again"))

    run = run_session(project, server, "hello", on_event=on_event, turns=2)
    assert [e.reason for e in run.of(ev.TurnEnded)] == ["cancelled", "complete"]
    assert stamps["ended"] - stamps["interrupt"] < 1.0


def test_loop_cap_stops_headless_runs_with_a_clear_message(project, server):
    for i in range(5):
        server.add(Reply(tool_calls=[ToolCall("list_dir", {"depth": 1 + i})]))
    run = run_session(project, server, "loop", overrides=("max_model_calls_per_turn=3",))
    assert run.ended.reason == "error"
    assert "max_model_calls_per_turn = 3" in run.ended.message
    assert len(server.chat_requests) == 3


def test_loop_cap_asks_an_interactive_client(project, server):
    for i in range(4):
        server.add(Reply(tool_calls=[ToolCall("list_dir", {"depth": 1 + i})]))
    server.add(Reply(text="finished"))
    asked = []

    def on_event(session, event):
        if isinstance(event, ev.ApprovalRequest):
            asked.append(event)
            session.submit(ApprovalDecision(event.request_id, "continue" if len(asked) == 1 else "stop"))

    run = run_session(project, server, "loop", overrides=("max_model_calls_per_turn=2",), on_event=on_event,
                      interactive=True)
    assert [a.kind for a in asked] == ["continue", "continue"]
    assert asked[0].options == ["continue", "stop"]
    assert run.ended.reason == "error"  # stopped at the second ask
    assert len(server.chat_requests) == 4


def test_repeated_identical_call_is_reported_to_model_and_client(project, server):
    for _ in range(3):
        server.add(Reply(tool_calls=[ToolCall("read_file", {"path": "x.txt"})]))
    server.add(Reply(text="ok, stopping"))
    (project / "x.txt").write_text("same\n")
    run = run_session(project, server, "read")
    detected = run.of(ev.LoopDetected)
    assert len(detected) == 1 and detected[0].tool == "read_file" and detected[0].repeats == 3
    last_tool = [m for m in server.chat_requests[-1].body["messages"] if m["role"] == "tool"][-1]
    assert "same arguments 3 times in a row" in last_tool["content"]


def test_malformed_arguments_and_unknown_tool_become_errors_the_model_reads(project, server):
    server.add(Reply(tool_calls=[ToolCall("read_file", '{"path": "a.txt"'),  # truncated JSON
                                 ToolCall("teleport", {"to": "mars"}),
                                 ToolCall("read_file", {"path": 42}),
                                 ToolCall("read_file", {}),
                                 ToolCall("edit_file", {"path": "a.txt", "old": "x"})]),
               Reply(text="recovered"))
    run = run_session(project, server, "go")
    assert run.ended.reason == "complete"
    outputs = [m["content"] for m in server.chat_requests[-1].body["messages"] if m["role"] == "tool"]
    assert "not valid JSON" in outputs[0]
    assert "no tool named 'teleport'" in outputs[1] and "read_file" in outputs[1]
    assert "'path' must be a string" in outputs[2]
    assert "missing required argument(s): path" in outputs[3]
    assert "unknown argument(s): old" in outputs[4]
    assert all(not e.ok for e in run.of(ev.ToolCallEnded))


def test_usage_is_reported_per_turn_and_per_session(project, server):
    db = project.parent / "u.db"
    server.add(Reply(tool_calls=[ToolCall("list_dir", {})], usage={"prompt_tokens": 100, "completion_tokens": 10,
                                                                      "cached_tokens": 40, "reasoning_tokens": 3}),
               Reply(text="a", usage={"prompt_tokens": 200, "completion_tokens": 20}),
               Reply(text="b", usage={"prompt_tokens": 300, "completion_tokens": 30}))
    run = run_session(project, server, "one", "two", db=db)
    usages = run.of(ev.TokenUsage)
    assert [u.last.input_tokens for u in usages] == [100, 200, 300]
    assert usages[1].turn.input_tokens == 300 and usages[1].turn.cached_input_tokens == 40
    assert usages[2].turn.input_tokens == 300 and usages[2].session.input_tokens == 600
    assert usages[2].session.output_tokens == 60 and usages[2].session.reasoning_tokens == 3

    async def stored():
        from auger.store.sqlite import SqliteStore
        store = SqliteStore(db)
        total = await store.usage_total(run.session_id)
        await store.aclose()
        return total

    total = asyncio.run(stored())
    assert (total.input_tokens, total.output_tokens, total.cached_input_tokens) == (600, 60, 40)


def test_many_sessions_share_one_agent_concurrently(project, server):
    def echo(body):
        last_user = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
        return Reply(text=f"echo: {last_user}", delay=0.05)

    for _ in range(8):
        server.add(echo)

    async def main():
        from auger.models.registry import create_client, resolve_provider
        from auger.store.sqlite import SqliteStore

        store = SqliteStore(project.parent / "many.db")
        manager = SessionManager(Workspace.open(project, make_config()), store)
        sessions = []
        for _ in range(8):
            client = create_client(resolve_provider("openai-compatible", server.base_url), "m",
                                   env={"OPENAI_API_KEY": "k"})
            sessions.append(await manager.create(client))
        runs = await asyncio.gather(*(drive(s, f"task {i}") for i, s in enumerate(sessions)))
        await store.aclose()
        return runs

    start = time.monotonic()
    runs = asyncio.run(main())
    elapsed = time.monotonic() - start
    for i, run in enumerate(runs):
        assert run.ended.reason == "complete"
        assert [m.text for m in run.of(ev.AgentMessage)] == [f"echo: task {i}"]
    assert len({r.session_id for r in runs}) == 8
    assert elapsed < 8 * 0.05 + 2  # they overlapped rather than queueing behind each other


def test_recall_fetches_and_searches_full_outputs_the_model_only_saw_summarised(project, server):
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "for i in $(seq 1 500); do echo row-$i; done"})]))

    def recall_by_id(body):
        shell_out = [m for m in body["messages"] if m["role"] == "tool"][-1]["content"]
        assert "row-1\n" not in shell_out and "row-500" in shell_out  # the model saw only the tail
        call_id = shell_out.split("call_id='")[1].split("'")[0]
        return Reply(tool_calls=[ToolCall("recall", {"call_id": call_id}), ToolCall("recall", {"query": "ROW-42"}),
                                 ToolCall("recall", {})])

    server.add(recall_by_id, Reply(text="found it"))
    run = run_session(project, server, "count")
    assert run.ended.reason == "complete" and not server.errors
    by_id, by_query, listing = [m["content"] for m in server.chat_requests[-1].body["messages"]
                                if m["role"] == "tool"][1:]
    assert "row-1\n" in by_id and "row-250\n" in by_id and "row-500" in by_id
    assert "line" in by_query and "row-42" in by_query and "row-420" in by_query
    assert "shell for i in" in listing


def test_database_location_follows_flag_and_environment(project, server, auger_home, tmp_path):
    from tests.support.harness import auger_cli

    server.add(Reply(text="a"), Reply(text="b"))
    flag_db, env_db = tmp_path / "flag.db", tmp_path / "env.db"
    assert auger_cli("exec", "--db", str(flag_db), "--base-url", server.base_url, "-m", "m", "x",
                     home=auger_home, cwd=project).returncode == 0
    assert auger_cli("exec", "--base-url", server.base_url, "-m", "m", "y", home=auger_home, cwd=project,
                     env={"AUGER_DB": str(env_db)}).returncode == 0
    assert flag_db.exists() and env_db.exists() and not (auger_home / "sessions.db").exists()
    listing = auger_cli("sessions", "--db", str(flag_db), home=auger_home).stdout
    assert "x" in listing and " y " not in listing
