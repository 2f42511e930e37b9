"""Other agents as backends of a session, against a real ACP agent process (tests/support/acp_agent.py,
written with the SDK's agent side): streamed text, tool calls, permission each way, file reads and writes
through the path guard, a killed agent, switching between auger and an agent, the pool's reaping."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from auger.backends.base import BackendSpec
from auger.backends.pool import BackendPool
from auger.engine.session.sessions import SessionManager
from auger.engine.workspace import Workspace
from auger.models.registry import client_for
from auger.protocol import events as ev
from auger.protocol import items as it
from auger.protocol.ops import ApprovalDecision, Interrupt, SetBackend, Shutdown, UserTurn
from auger.store.sqlite import SqliteStore
from tests.support.harness import Run, dies_soon, drive, make_config, process_alive
from tests.support.mock_openai import Reply

AGENT = Path(__file__).parent / "support" / "acp_agent.py"


def agent_table(log: Path, *args: str) -> dict:
    return {"command": sys.executable, "args": [str(AGENT), *args], "env": {"ACP_TEST_AGENT_LOG": str(log)}}


def script(*steps: dict) -> str:
    return json.dumps(list(steps))


async def open_with_backend(project: Path, server, db: Path, log: Path, *overrides: str, backend: str | None = "scripted",
                            interactive: bool = False, resume: str | None = None, tables: dict | None = None):
    config = make_config("provider=openai-compatible", f"base_url={server.base_url}", "model=mock-model",
                         "sandbox=off", "snapshots=false", *overrides)
    config.tables["backends"] = {"scripted": agent_table(log)}
    config.tables.update(tables or {})
    client = client_for(config, env={"OPENAI_API_KEY": "sk-test"})
    store = SqliteStore(db)
    sessions = SessionManager(Workspace.open(project, config), store)
    if resume:
        session = await sessions.resume(resume, client=client, interactive=interactive, backend=backend)
    else:
        session = await sessions.create(client, interactive=interactive, backend=backend)
    return session, store


def run_backend(project: Path, server, *prompts: str, overrides: tuple[str, ...] = (), on_event=None,
                interactive: bool = False, backend: str | None = "scripted", resume: str | None = None,
                tables: dict | None = None) -> Run:
    """Prompts to a session whose turns the scripted agent runs; `tables` are extra config tables ([hooks])."""
    log = project.parent / "agent.log"

    async def main() -> Run:
        session, store = await open_with_backend(project, server, project.parent / "sessions.db", log, *overrides,
                                                 backend=backend, interactive=interactive, resume=resume,
                                                 tables=tables)
        try:
            return await asyncio.wait_for(drive(session, *prompts, on_event=on_event), 60)
        finally:
            await store.aclose()

    return asyncio.run(main())


def stored_items(project: Path, session_id: str) -> list[it.Item]:
    async def load():
        store = SqliteStore(project.parent / "sessions.db")
        try:
            return [s.item for s in await store.load_items(session_id)]
        finally:
            await store.aclose()

    return asyncio.run(load())


def agent_log(project: Path) -> list[str]:
    path = project.parent / "agent.log"
    return path.read_text().splitlines() if path.exists() else []


def answering(*answers: str):
    asked: list[ev.ApprovalRequest] = []
    queue = list(answers)

    def on_event(session, event):
        if isinstance(event, ev.ApprovalRequest):
            asked.append(event)
            session.submit(ApprovalDecision(event.request_id, queue.pop(0) if queue else "deny"))

    return on_event, asked


def agent_text(run: Run) -> str:
    return "".join(e.text for e in run.of(ev.AgentMessage))


def test_a_turn_run_by_an_agent_streams_records_and_asks_like_a_native_one(project, server):
    (project / "a.txt").write_text("old\n")
    target = str(project / "a.txt")
    on_event, asked = answering("approve")
    run = run_backend(project, server, script(
        {"say": "Looking. "}, {"think": "the file is small"},
        {"tool": "t1", "title": "Edit a.txt", "kind": "edit", "input": {"path": target}},
        {"permission": "t1"}, {"read": target}, {"write": target, "content": "new\n"},
        {"done": "t1", "output": "edited a.txt"},
        {"plan": [["edit a.txt", "completed"], ["report", "in_progress"]]},
        {"usage": [120, 30]}, {"say": "Done."}), overrides=("mode=safe",), interactive=True, on_event=on_event)

    assert run.ended.reason == "complete", run.ended.message
    assert (project / "a.txt").read_text() == "new\n"
    assert len(asked) == 1, "a write the agent got permission for is not asked again"
    request = asked[0]
    assert request.kind == "tool" and request.details.tool == "agent_edit" and request.details.subject == target
    text = agent_text(run)
    assert "permission: yes" in text and "read: old" in text and "wrote" in text and text.endswith("Done.")
    assert "".join(e.delta for e in run.of(ev.MessageDelta)) == text
    assert [e.delta for e in run.of(ev.ReasoningDelta)] == ["the file is small"]
    messages = [m for m in run.of(ev.AgentMessage)]  # the text before the tool call and after it: two items
    assert len(messages) >= 2 and len({m.item_id for m in messages}) == len(messages) and all(m.item_id for m in messages)
    for message in messages:
        assert "".join(d.delta for d in run.of(ev.MessageDelta) if d.item_id == message.item_id) == message.text
    ended_ids = {e.item_id for e in run.of(ev.ItemEnded)}
    assert {e.item_id for e in run.of(ev.ItemStarted)} == ended_ids >= {m.item_id for m in messages}
    started, ended = run.of(ev.ToolCallStarted), run.of(ev.ToolCallEnded)
    assert [(e.call_id, e.name) for e in started] == [("t1", "agent_edit")]
    assert started[0].arguments == {"title": "Edit a.txt", "input": {"path": target}}
    assert [(e.call_id, e.ok, e.output) for e in ended] == [("t1", True, "edited a.txt")]
    plan = run.of(ev.PlanUpdated)[-1].plan
    assert [(s.step, s.status) for s in plan] == [("edit a.txt", "completed"), ("report", "in_progress")]
    usage = run.of(ev.TokenUsage)[-1]
    assert (usage.last.input_tokens, usage.last.output_tokens, usage.session.input_tokens) == (120, 30, 120)

    items = [i for i in stored_items(project, run.session_id) if not isinstance(i, it.ContextMessage)]
    kinds = [type(i).__name__ for i in items]
    # text said while a call runs is committed after its output: a call and its output stay together
    assert kinds == ["UserMessage", "AssistantMessage", "Reasoning", "ToolCall", "ToolOutput", "AssistantMessage"], kinds
    assert items[1].text == "Looking. " and items[2].text == "the file is small"
    assert items[3].call_id == "t1" and json.loads(items[3].arguments)["title"] == "Edit a.txt"
    assert items[4].output == "edited a.txt" and items[4].ok
    assert "read: old" in items[5].text and items[5].text.endswith("Done.")
    log = agent_log(project)
    assert log[0] == "initialize fs_read=True fs_write=True terminal=False"


def test_permission_for_one_file_does_not_cover_a_write_to_another(project, server):
    on_event, asked = answering("approve", "deny")
    run = run_backend(project, server, script(
        {"tool": "t1", "title": "Edit a.txt", "kind": "edit", "input": {"path": str(project / "a.txt")}},
        {"permission": "t1"}, {"write": str(project / "b.txt"), "content": "sneaky\n"},
        {"write": str(project / "a.txt"), "content": "fine\n"}, {"done": "t1"}),
        overrides=("mode=safe",), interactive=True, on_event=on_event)
    assert [a.details.tool for a in asked] == ["agent_edit", "write_file"]
    assert asked[1].details.subject == "b.txt"
    assert "write error: the user did not allow writing b.txt" in agent_text(run)
    assert not (project / "b.txt").exists() and (project / "a.txt").read_text() == "fine\n"


def test_a_file_the_agent_was_allowed_to_create_is_the_sessions_own_also_when_it_made_it_first(project, server):
    # opencode, once allowed, sends fs/write_text_file and writes the file with its own tool too, not waiting:
    # its own write may land before auger answers the request
    (project / "old.txt").write_text("before\n")
    new, old = str(project / "new.txt"), str(project / "old.txt")
    on_event, asked = answering("approve")
    run = run_backend(project, server, script(
        {"tool": "t1", "title": "Write two files", "kind": "edit", "input": {"path": new}},
        {"permission": "t1", "locations": [new, old]},
        {"touch": new, "content": "made\n"}, {"touch": old, "content": "changed\n"},
        {"write": new, "content": "made\n"}, {"write": old, "content": "changed\n"}, {"done": "t1"}),
        overrides=("mode=safe",), interactive=True, on_event=on_event)
    assert run.ended.reason == "complete", run.ended.message
    assert len(asked) == 1 and agent_text(run).count("wrote") == 2
    created = [i.path for i in stored_items(project, run.session_id) if isinstance(i, it.CreatedFile)]
    assert created == ["new.txt"], "the file that did not exist when allowed is the session's; the other is not"


def test_a_turn_diff_covers_changes_the_agent_made_itself(project, server):
    import subprocess

    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    (project / "kept.txt").write_text("before\n")
    run = run_backend(project, server, script(
        {"tool": "t1", "title": "edit", "kind": "edit", "input": {}},
        {"touch": str(project / "kept.txt"), "content": "after\n"}, {"done": "t1"}),
        overrides=("snapshots=true",))
    diff = run.of(ev.TurnDiff)
    assert diff and [f.path for f in diff[0].files] == ["kept.txt"] and "+after" in diff[0].diff


def test_permission_denied_by_the_user_and_by_a_headless_run(project, server):
    on_event, asked = answering("deny")
    steps = script({"tool": "t1", "title": "rm build", "kind": "execute", "input": {"command": "rm -rf build"}},
                   {"permission": "t1"}, {"done": "t1", "output": "skipped"})
    run = run_backend(project, server, steps, overrides=("mode=safe",), interactive=True, on_event=on_event)
    assert len(asked) == 1 and asked[0].details.effect == "destructive", "rm -rf is classified like shell's"
    assert "permission: no" in agent_text(run)

    run = run_backend(project, server, steps, overrides=("mode=safe",))
    assert "permission: no" in agent_text(run) and not run.of(ev.ApprovalRequest)
    assert run.ended.reason == "complete"

    run = run_backend(project, server, script({"tool": "t2", "title": "list", "kind": "read", "input": {}},
                                              {"permission": "t2"}), overrides=("mode=safe",))
    assert "permission: yes" in agent_text(run), "a read is allowed without asking, as natively"

    run = run_backend(project, server, steps, overrides=("mode=safe", "approve_all=true"))
    assert "permission: yes" in agent_text(run), "approve_all approves a headless run's asks, as natively"


def test_hostile_paths_from_the_agent_are_refused(project, server, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    (project / "link").symlink_to(secret)
    (project / ".git").mkdir()
    run = run_backend(project, server, script(
        {"tool": "../../x:y/" + "z" * 80, "title": "odd id", "kind": "read", "input": {}},
        {"done": "../../x:y/" + "z" * 80, "output": "ok"},
        {"read": str(secret)}, {"read": str(project / ".." / "secret.txt")}, {"read": str(project / "link")},
        {"write": str(tmp_path / "planted.txt"), "content": "x"},
        {"write": str(project / ".git" / "config"), "content": "[core]\n\tfsmonitor = evil\n"},
        {"write": str(project / "link"), "content": "overwritten"},
        {"read": "relative/but/missing.txt"}), overrides=("mode=auto", "approve_all=true"))
    text = agent_text(run)
    assert "top secret" not in text
    assert text.count("read error:") == 4 and text.count("write error:") == 2, text
    assert "git directory" in text
    assert not (tmp_path / "planted.txt").exists() and not (project / ".git" / "config").exists()
    assert secret.read_text() == "top secret"
    assert run.ended.reason == "complete"
    [call] = run.of(ev.ToolCallStarted)
    assert call.call_id == "______x_y_" + "z" * 38, "a call id the agent chose is made safe for model APIs"


def test_a_killed_agent_ends_the_turn_with_an_error_and_the_next_prompt_restarts_it(project, server):
    killed: list[int] = []

    def kill_it(session, event):
        if isinstance(event, ev.MessageDelta) and event.delta.startswith("pid: "):
            pid = int(event.delta.split()[1])
            killed.append(pid)
            os.kill(pid, signal.SIGKILL)

    run = run_backend(project, server, script({"tool": "t1", "title": "slow", "kind": "execute", "input": {}},
                                              {"pid": True}, {"sleep": 30}), "hello again", on_event=kill_it)
    first, second = run.of(ev.TurnEnded)
    assert first.reason == "error" and "killed (SIGKILL)" in first.message and "starts it again" in first.message
    assert second.reason == "complete" and agent_text(run).endswith("Hello from the agent.")
    assert [e.output for e in run.of(ev.ToolCallEnded)][0].startswith("not finished: backend 'scripted'")
    log = agent_log(project)
    assert sum(line.startswith("initialize") for line in log) == 2
    first_id = next(line.split()[1] for line in log if line.startswith("new_session"))
    assert f"load_session {first_id}" in log, "the restarted agent loads the session it had"
    assert not process_alive(killed[0])


def test_switching_between_auger_and_an_agent_between_turns(project, server):
    server.add(Reply(text="native answer"), Reply(text="native again"))
    log = project.parent / "agent.log"

    async def main() -> Run:
        session, store = await open_with_backend(project, server, project.parent / "sessions.db", log, backend=None)
        run = Run(session_id=session.id)
        follow = asyncio.create_task(_collect(session, run))
        try:
            turns = 0
            agent_turn = "now you\n\n" + script({"tool": "c1", "title": "ls", "kind": "execute",
                                                    "input": {"command": "ls"}}, {"done": "c1", "output": "a.txt"},
                                                   {"say": "Listed."})
            for op in (UserTurn("first, natively"), SetBackend("scripted"), UserTurn(agent_turn), SetBackend("nope"),
                       SetBackend(""), UserTurn("back to auger")):
                session.submit(op)
                if isinstance(op, UserTurn):
                    turns += 1
                    await _until(lambda: len(run.of(ev.TurnEnded)) == turns)
            session.submit(Shutdown())
            await asyncio.wait_for(follow, 30)
            return run
        finally:
            await store.aclose()

    run = asyncio.run(asyncio.wait_for(main(), 60))
    assert [e.reason for e in run.of(ev.TurnEnded)] == ["complete"] * 3
    changes = run.of(ev.BackendChanged)
    assert [(c.backend, c.previous) for c in changes] == [("scripted", ""), ("", "scripted")]
    assert any("backend switch refused: 'nope'" in w.message for w in run.of(ev.WarningEvent))
    assert [m.text for m in run.of(ev.AgentMessage)] == ["native answer", "Listed.", "native again"]
    prompt = next(line for line in agent_log(project) if line.startswith("prompt"))
    assert "native answer" in prompt and "now you" in prompt, "a newly started agent is told the conversation"
    messages = server.chat_requests[-1].body["messages"]
    calls = [c for m in messages for c in m.get("tool_calls") or []]
    assert [(c["id"], c["function"]["name"]) for c in calls] == [("c1", "agent_execute")]
    assert {"role": "tool", "tool_call_id": "c1", "content": "a.txt"} in messages
    assert "Listed." in json.dumps(messages), "auger's model sees what the agent said and did"


async def _collect(session, run: Run) -> None:
    async for envelope in session.subscribe():
        run.events.append(envelope.event)


async def _until(done, timeout: float = 30) -> None:
    async def wait():
        while not done():
            await asyncio.sleep(0.02)

    await asyncio.wait_for(wait(), timeout)


def test_interrupt_cancels_the_agents_prompt(project, server):
    def interrupt(session, event):
        if isinstance(event, ev.MessageDelta) and event.delta == "working":
            session.submit(Interrupt())

    run = run_backend(project, server, script({"say": "working"}, {"sleep": 30}, {"say": "never"}),
                      on_event=interrupt)
    assert run.ended.reason == "cancelled"
    assert "never" not in agent_text(run)
    assert any(line.startswith("cancel ") for line in agent_log(project))
    assert isinstance(stored_items(project, run.session_id)[-1], it.TurnAborted)


def test_shutdown_disposes_the_agent_and_what_it_started(project, server):
    run = run_backend(project, server, script({"pid": True}, {"spawn": True}))
    text = agent_text(run)
    pids = [int(line.split()[1]) for line in text.splitlines() if line.split()[:1] in (["pid:"], ["child:"])]
    assert len(pids) == 2
    assert all(dies_soon(pid, 5) for pid in pids), "no agent process or child outlives the session"


def test_the_pool_keeps_an_agent_warm_then_reaps_it_when_idle(tmp_path):
    log = tmp_path / "agent.log"
    table = agent_table(log)
    spec = BackendSpec("scripted", table["command"], tuple(table["args"]), table["env"])

    async def main() -> tuple[int, int, int, bool]:
        pool = BackendPool({"scripted": spec}, idle_timeout=0.5)
        first = await pool.acquire("scripted", str(tmp_path), None)
        pid = first.health().pid
        again = await pool.acquire("scripted", str(tmp_path), None)
        warm = again.health().pid
        await asyncio.sleep(2.0)
        reaped = "scripted" not in pool.running()
        third = await pool.acquire("scripted", str(tmp_path), None)
        new_pid = third.health().pid
        await pool.aclose()
        return pid, warm, new_pid, reaped

    pid, warm, new_pid, reaped = asyncio.run(main())
    assert pid == warm, "a second acquire reuses the running agent"
    assert reaped and not process_alive(pid), "an idle agent is reaped"
    assert new_pid != pid and dies_soon(new_pid, 5), "aclose disposes the rest"


def test_a_broken_or_missing_agent_is_a_clear_error(project, server):
    log = project.parent / "agent.log"

    async def main():
        config = make_config("provider=openai-compatible", f"base_url={server.base_url}", "model=mock-model",
                             "sandbox=off", "snapshots=false")
        config.tables["backends"] = {"broken": agent_table(log, "--broken"),
                                     "ghost": {"command": "no-such-agent-here-xyz"}}
        store = SqliteStore(project.parent / "sessions.db")
        sessions = SessionManager(Workspace.open(project, config), store)
        try:
            runs = []
            for name in ("broken", "ghost"):
                session = await sessions.create(client_for(config, env={"OPENAI_API_KEY": "k"}), backend=name)
                runs.append(await asyncio.wait_for(drive(session, "hi"), 60))
            return runs
        finally:
            await store.aclose()

    server.add(Reply(text="auger answered"))
    broken, ghost = asyncio.run(main())
    assert broken.ended.reason == "error"
    assert "exited with code 3" in broken.ended.message and "no model configured" in broken.ended.message
    assert not ghost.of(ev.BackendChanged), "an agent that is not installed is not switched to"
    assert any("backend switch refused: 'ghost' is not installed" in w.message for w in ghost.of(ev.WarningEvent))
    assert ghost.ended.reason == "complete" and ghost.of(ev.AgentMessage)[-1].text == "auger answered"


@pytest.mark.parametrize("table, why", [({"command": 5}, "'command' must be a non-empty string"),
                                        ({"command": "x", "colour": "red"}, "unknown key(s) colour")])
def test_a_broken_backend_table_is_reported_not_raised(table, why):
    from auger.backends.config import load_backends

    catalog = load_backends({"backends": {"bad": table, "ok": {"command": "ok-agent"}}})
    assert why in catalog.errors["bad"] and "bad" not in catalog.specs
    assert catalog.specs["ok"].command == "ok-agent" and "opencode" in catalog.specs


def test_auger_acp_itself_as_a_backend_writes_through_the_outer_sessions_guard(project, server, tmp_path):
    """auger driving `auger acp` over ACP: the inner auger's model (the mock server) writes a file; the write
    reaches the outer session as an fs request and is made there, beneath the project root."""
    from tests.support.mock_openai import ToolCall

    inner_home = tmp_path / "inner-home"
    inner_home.mkdir()
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "from-inner.txt", "content": "made inside\n"})]),
               Reply(text="the inner auger is done"))
    config = make_config("provider=openai-compatible", f"base_url={server.base_url}", "model=mock-model",
                         "sandbox=off", "snapshots=false", "mode=auto")
    config.tables["backends"] = {"auger": {
        "command": sys.executable,
        "args": ["-m", "auger", "acp", "--base-url", server.base_url, "-m", "mock-model", "--mode", "auto",
                 "-c", "generate_titles=false", "-c", "sandbox=off", "-c", "snapshots=false"],
        "env": {"AUGER_HOME": str(inner_home), "OPENAI_API_KEY": "sk-test",
                "PYTHONPATH": str(Path(__file__).resolve().parents[1])}}}

    on_event, asked = answering("approve")

    async def main() -> Run:
        client = client_for(config, env={"OPENAI_API_KEY": "sk-test"})
        store = SqliteStore(project.parent / "sessions.db")
        try:
            session = await SessionManager(Workspace.open(project, config), store).create(
                client, backend="auger", interactive=True)
            return await asyncio.wait_for(drive(session, "write the file", on_event=on_event), 90)
        finally:
            await store.aclose()

    run = asyncio.run(main())
    assert run.ended.reason == "complete", run.ended.message
    assert len(asked) == 1 and "from-inner.txt" in asked[0].message, asked
    assert (project / "from-inner.txt").read_text() == "made inside\n"
    assert agent_text(run).endswith("the inner auger is done")
    assert any("from-inner.txt" in json.dumps(e.arguments) for e in run.of(ev.ToolCallStarted))
    assert len(server.chat_requests) == 2, "only the inner auger called the model"


def test_a_resumed_session_keeps_the_agent_it_last_handed_its_turns_to(project, server):
    first = run_backend(project, server, "hello")
    assert agent_text(first) == "Hello from the agent."
    resumed = run_backend(project, server, "hello again", backend=None, resume=first.session_id)
    assert resumed.ended.reason == "complete", resumed.ended.message
    assert agent_text(resumed) == "Hello from the agent."
    assert server.chat_requests == [], "the recorded agent ran the resumed turn, not auger's model"
    server.add(Reply(text="auger again"))
    back = run_backend(project, server, "x", backend="", resume=first.session_id)  # an explicit switch back
    assert agent_text(back) == "auger again"
    server.add(Reply(text="auger still"))
    later = run_backend(project, server, "y", backend=None, resume=first.session_id)
    assert agent_text(later) == "auger still", "after switching back, a resume stays with auger's own loop"


def test_an_agent_that_can_resume_is_resumed_rather_than_made_to_replay(project, server, monkeypatch):
    monkeypatch.setenv("ACP_TEST_AGENT_RESUME", "1")  # the scripted agent then offers session/resume
    first = run_backend(project, server, "hello")
    again = run_backend(project, server, "hello again", backend=None, resume=first.session_id)
    assert again.ended.reason == "complete", again.ended.message
    log = agent_log(project)
    first_id = next(line.split()[1] for line in log if line.startswith("new_session"))
    assert f"resume_session {first_id}" in log, log
    assert not any(line.startswith("load_session") for line in log)
    assert sum(line.startswith("new_session") for line in log) == 1  # the agent's conversation went on


def test_a_session_resumed_for_its_agent_opens_without_a_model_of_augers(project, monkeypatch):
    from auger.engine.session.resume import ResumeRefused
    from auger.engine.session.sessions import SessionManager
    from auger.models.unconfigured import UnconfiguredClient

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    log = project.parent / "agent.log"

    def manager(store: SqliteStore, backend: str | None) -> SessionManager:
        config = make_config("provider=openai", "model=gpt-none", "sandbox=off", "snapshots=false")
        config.tables["backends"] = {"scripted": agent_table(log)}
        config.backend = backend
        return SessionManager(Workspace.open(project, config), store)

    async def main() -> tuple[Run, Run, str]:
        store = SqliteStore(project.parent / "sessions.db")
        try:
            first = manager(store, "scripted")
            session = await first.create(client_for(first.workspace.config))
            assert isinstance(session.client, UnconfiguredClient)
            created = await drive(session, "hello")
            resumed = await manager(store, None).resume(session.id)  # the recorded agent: no model needed
            again = await drive(resumed, "hello again")
            with pytest.raises(ResumeRefused, match="OPENAI_API_KEY is not set"):  # auger's loop needs the model
                await manager(store, None).resume(session.id, backend="")
            switched = await manager(store, None).resume(session.id)
            await switched.set_backend("")  # taken back mid-session: the turn says what is missing
            mine = await drive(switched, "and you?")
            return created, again, mine
        finally:
            await store.aclose()

    created, again, mine = asyncio.run(asyncio.wait_for(main(), 60))
    assert agent_text(created) == agent_text(again) == "Hello from the agent."
    assert mine.ended.reason == "error" and "auger's own model is not set up" in mine.ended.message
    assert "OPENAI_API_KEY is not set" in mine.ended.message
