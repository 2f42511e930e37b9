"""Per-turn settings (set_turn_context: reasoning effort and summary, the working directory; with set_model
and set_mode) change the next requests, are recorded, and a resumed session and a fork send byte for byte
the request the original sent after the change."""

from __future__ import annotations

import asyncio
import json

import pytest

from auger.engine.session.sessions import SessionManager
from auger.engine.workspace import Workspace
from auger.protocol import events as ev
from auger.protocol.ops import SetModel, SetTurnContext, Shutdown, UserTurn
from auger.store.sqlite import SqliteStore
from tests.support.harness import Follow, follow_session, make_config
from tests.support.mock_openai import Reply as ChatReply
from tests.support.mock_openai import ToolCall
from tests.support.mock_responses import MockResponsesServer, Reply


@pytest.fixture
def responses(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with MockResponsesServer() as srv:
        yield srv


def responses_config(server):
    return make_config("provider=openai", f"base_url={server.base_url}", "model=mock-model")


def test_resume_and_fork_rebuild_the_request_after_a_change_of_effort_directory_and_model(project, responses):
    (project / "pkg").mkdir()
    (project / "AGENTS.md").write_text("Root rule: ROOT-RULE.\n")
    (project / "pkg" / "AGENTS.md").write_text("Package rule: PKG-RULE.\n")
    responses.add(*(Reply(text="the same answer") for _ in range(5)))
    config = responses_config(responses)
    db = project.parent / "s.db"

    async def turn(session, follow, text: str) -> None:
        session.submit(UserTurn(text))
        await follow.until(ev.TurnEnded)

    async def change(session, follow) -> None:
        session.submit(SetTurnContext(effort="high", summary="detailed", cwd="pkg"))
        changed = await follow.until(ev.TurnContextChanged)
        assert (changed.effort, changed.summary, changed.cwd) == ("high", "detailed", str(project / "pkg"))
        session.submit(SetModel("mock-model-2"))
        await follow.until(ev.ModelChanged)

    async def main() -> tuple[str, str]:
        store = SqliteStore(db)
        sessions = SessionManager(Workspace.open(project, config), store)
        try:
            from auger.models.registry import client_for

            original = await sessions.create(client_for(config))
            follow = Follow(original)
            await turn(original, follow, "one")
            await change(original, follow)
            await turn(original, follow, "two")  # the request after the change, as the original sends it
            original.submit(Shutdown())
            await original.wait_closed()

            paused = await sessions.create(client_for(config))
            follow = Follow(paused)
            await turn(paused, follow, "one")
            await change(paused, follow)
            paused.submit(Shutdown())
            await paused.wait_closed()
            resumed = await sessions.resume(paused.id)  # its recorded provider and model, its recorded settings
            await turn(resumed, Follow(resumed), "two")
            fork = await sessions.fork(original.id, before_user_message=2)
            await turn(fork, Follow(fork), "two")
            for session in (resumed, fork):
                session.submit(Shutdown())
                await session.wait_closed()
            return original.id, fork.id
        finally:
            await store.aclose()

    asyncio.run(main())
    sent = [r.raw for r in responses.responses_requests]
    assert len(sent) == 5
    after_change, resumed, forked = sent[1], sent[3], sent[4]
    assert resumed == after_change and forked == after_change  # byte for byte
    body = json.loads(after_change)
    assert body["model"] == "mock-model-2" and body["reasoning"] == {"effort": "high", "summary": "detailed"}
    text = json.dumps(body["input"])
    assert "PKG-RULE" in text and "ROOT-RULE" in text  # the docs from the root down to the directory
    assert f"<cwd>{project / 'pkg'}</cwd>" in text
    first = json.loads(sent[0])
    assert first["reasoning"] == {"summary": "auto"} and "PKG-RULE" not in json.dumps(first["input"])


def test_commands_run_in_the_working_directory_and_bad_directories_are_refused(project, server, tmp_path):
    (project / "sub").mkdir()
    (project / "file.txt").write_text("x")
    (tmp_path / "elsewhere").mkdir()
    (project / "out").symlink_to(tmp_path / "elsewhere")
    server.add(ChatReply(tool_calls=[ToolCall("shell", {"command": "pwd"})]), ChatReply(text="done"))

    async def steps(session, follow):
        for bad in ("../", "file.txt", "out", "missing"):
            session.submit(SetTurnContext(cwd=bad))
            await follow.until(ev.WarningEvent, where=lambda e: "turn settings refused" in e.message)
        session.submit(SetTurnContext(cwd=str(project / "sub")))
        await follow.until(ev.TurnContextChanged)
        session.submit(UserTurn("where am I"))
        await follow.until(ev.TurnEnded)

    events = follow_session(project, server, steps)
    refusals = [e.message for e in events if isinstance(e, ev.WarningEvent)]
    assert len(refusals) == 4 and "not a directory" in refusals[1] and "outside the project" in refusals[2]
    (ended,) = [e for e in events if isinstance(e, ev.ToolCallEnded)]
    assert str(project / "sub") in ended.output


def test_a_setting_is_refused_while_a_turn_runs_and_an_unknown_summary_is_refused(project, server):
    server.add(ChatReply(text="slow", delay=1.0))

    async def steps(session, follow):
        session.submit(UserTurn("hi"))
        await follow.until(ev.TurnStarted)
        session.submit(SetTurnContext(effort="low"))
        await follow.until(ev.WarningEvent)
        await follow.until(ev.TurnEnded)
        session.submit(SetTurnContext(summary="verbose"))
        await follow.until(ev.WarningEvent)
        session.submit(SetTurnContext(effort="hgih"))
        await follow.until(ev.TurnContextChanged)

    events = follow_session(project, server, steps)
    warnings = [e.message for e in events if isinstance(e, ev.WarningEvent)]
    assert "a turn is running" in warnings[0] and "'verbose' is not one of" in warnings[1]
    assert "'hgih' is not a known effort" in warnings[2]  # sent anyway, as the config key is
    (changed,) = [e for e in events if isinstance(e, ev.TurnContextChanged)]
    assert changed.effort == "hgih"
