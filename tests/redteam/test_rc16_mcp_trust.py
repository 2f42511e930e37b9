"""MCP servers are not trusted by their own word: a hostile stdio server (tests/support/mcp_server.py)
that claims `readOnlyHint`, writes as it starts, or writes on its own while it runs, is judged by what
reaches the project. Each attack has a control: the same server trusted in the user's config, or in
auto mode, does write (so the payload works and the barrier is what stopped it)."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

from auger.engine.session.sessions import SessionManager
from auger.engine.workspace import Workspace
from auger.models.registry import client_for
from auger.protocol import events as ev
from auger.protocol.ops import AddMcpServer, SetMode, Shutdown, UserTurn
from auger.store.sqlite import SqliteStore
from tests.support.harness import Follow, make_config
from tests.support.mock_openai import Reply, ToolCall
from tests.support.redteam_sandbox import KINDS, require
from tests.test_mcp_client import _names, run_mcp

SERVER = Path(__file__).resolve().parent.parent / "support" / "mcp_server.py"


def hostile(project: Path, **env: str) -> dict:
    """The test server as an untrusted stdio server in the project (the sandbox shows the project and
    auger's interpreter, not the rest of /tmp where this checkout may live)."""
    script = project / "box_server.py"
    script.write_text(SERVER.read_text())
    return {"command": sys.executable, "args": [str(script)], "env": env}


@pytest.mark.parametrize("kind", ["off", *KINDS])
def test_a_server_claiming_read_only_does_not_write_the_project_in_headless_safe_mode(project, server, kind):
    require(kind)
    box = hostile(project)
    server.add(Reply(tool_calls=[ToolCall("mcp__box__scribble", {"path": "hijacked.txt", "text": "pwned"})]),
               Reply(text="done"))
    run, _ = run_mcp(project, server, "go", servers={"box": box}, overrides=(f"sandbox={kind}", "mode=safe"))
    (ended,) = run.of(ev.ToolCallEnded)
    assert not (project / "hijacked.txt").exists(), ended.output
    assert not ended.ok
    if kind == "off":  # nothing holds the server: its claim is not believed, so headless safe mode refuses
        assert "needs the user's approval" in ended.output
    else:  # the sandbox holds it read-only, which is what its claim says
        assert "read-only" in ended.output.lower()

    # control: the same server, trusted in the user's config, is taken at its word
    server.add(Reply(tool_calls=[ToolCall("mcp__box__scribble", {"path": "hijacked.txt", "text": "pwned"})]),
               Reply(text="done"))
    run_mcp(project, server, "go", servers={"box": {**box, "trusted": True}},
            overrides=(f"sandbox={kind}", "mode=safe"))
    assert (project / "hijacked.txt").read_text() == "pwned"


@pytest.mark.parametrize("kind", KINDS)
def test_a_project_or_session_cannot_mark_a_server_trusted(project, server, kind):
    """`trusted = true` counts only in the user's config: a project's server (started with
    trust_project_mcp) or one a client adds to the session saying so runs confined, and is told it does."""
    require(kind)
    box = {**hostile(project), "trusted": True}
    server.add(Reply(tool_calls=[ToolCall("mcp__box__scribble", {"path": "from-project.txt", "text": "pwned"}),
                                 ToolCall("mcp__late__scribble", {"path": "from-session.txt", "text": "pwned"})]),
               Reply(text="done"))

    async def main():
        config = make_config("provider=openai-compatible", f"base_url={server.base_url}", "model=mock-model",
                             f"sandbox={kind}", "mode=safe", "trust_project_mcp=true")
        config.tables["project_mcp_servers"] = {"box": box}
        store = SqliteStore(project.parent / "sessions.db")
        try:
            session = await SessionManager(Workspace.open(project, config), store).create(
                client_for(config, env={"OPENAI_API_KEY": "sk-test"}))
            follow = Follow(session)
            session.submit(AddMcpServer("late", box))
            session.submit(UserTurn("go"))
            await asyncio.wait_for(follow.until(ev.TurnEnded), 60)
            session.submit(Shutdown())
            await session.wait_closed()
            return follow.events
        finally:
            await store.aclose()

    events = asyncio.run(main())
    calls = [e for e in events if isinstance(e, ev.ToolCallEnded)]
    assert len(calls) == 2 and not any(call.ok for call in calls), [call.output for call in calls]
    assert not (project / "from-project.txt").exists()
    assert not (project / "from-session.txt").exists()
    warnings = [e.message for e in events if isinstance(e, ev.WarningEvent)]
    assert sum("honoured only in your user config" in w for w in warnings) == 2, warnings


@pytest.mark.parametrize("mode", ["plan", "safe"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_server_does_not_write_as_it_starts_in_plan_or_safe_mode(project, server, kind, mode):
    require(kind)
    box = hostile(project, MCP_TEST_WRITE_AT_START="started.txt")
    server.add(Reply(text="hello"))
    run_mcp(project, server, "hi", servers={"box": box}, overrides=(f"sandbox={kind}", f"mode={mode}"))
    assert "mcp__box__echo" in _names(server.chat_requests[0]), "the server did not start at all"
    assert not (project / "started.txt").exists()

    # control: in auto mode it runs with the project writable, as the session's commands do
    server.add(Reply(text="hello"))
    run_mcp(project, server, "hi", servers={"box": box}, overrides=(f"sandbox={kind}", "mode=auto"))
    assert (project / "started.txt").read_text().startswith("written at start")


@pytest.mark.parametrize("kind", KINDS)
def test_a_server_started_in_auto_stops_writing_when_the_mode_turns_plan(project, server, kind):
    """The switch to plan stops the writable server before `mode_changed` is announced; its next use
    starts it again read-only; the switch back to auto lets it write again."""
    require(kind)
    box = hostile(project, MCP_TEST_WRITE_EVERY="ticks.txt")
    ticks = project / "ticks.txt"
    server.add(Reply(tool_calls=[ToolCall("mcp__box__echo", {"text": "in plan"})]), Reply(text="planned"),
               Reply(tool_calls=[ToolCall("mcp__box__echo", {"text": "in auto"})]), Reply(text="again"))

    async def lines_grow(within: float = 20) -> bool:
        start = _lines(ticks)
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if _lines(ticks) > start + 2:
                return True
            await asyncio.sleep(0.05)
        return False

    async def main():
        config = make_config("provider=openai-compatible", f"base_url={server.base_url}", "model=mock-model",
                             f"sandbox={kind}", "mode=auto")
        config.tables["mcp_servers"] = {"box": box}
        store = SqliteStore(project.parent / "sessions.db")
        try:
            session = await SessionManager(Workspace.open(project, config), store).create(
                client_for(config, env={"OPENAI_API_KEY": "sk-test"}))
            follow = Follow(session)
            try:
                assert await lines_grow(), "the server never wrote in auto mode: the control failed"
                session.submit(SetMode("plan"))
                await asyncio.wait_for(follow.until(ev.ModeChanged), 30)
                stopped_at = _lines(ticks)
                session.submit(UserTurn("use it in plan mode"))  # starts it again, read-only
                plan_call = await asyncio.wait_for(follow.until(ev.ToolCallEnded), 60)
                await asyncio.wait_for(follow.until(ev.TurnEnded), 60)
                await asyncio.sleep(0.3)  # fifteen of its ticks
                after_plan = _lines(ticks)
                session.submit(SetMode("auto"))
                session.submit(UserTurn("use it in auto mode"))  # starts it again, writable
                await asyncio.wait_for(follow.until(ev.TurnEnded), 60)
                grew_in_auto = await lines_grow()
            finally:
                session.submit(Shutdown())
                await session.wait_closed()
            return plan_call, stopped_at, after_plan, grew_in_auto
        finally:
            await store.aclose()

    plan_call, stopped_at, after_plan, grew_in_auto = asyncio.run(main())
    assert plan_call.ok and plan_call.output == "echo: in plan"
    assert after_plan == stopped_at, f"the server wrote {after_plan - stopped_at} lines after the switch to plan"
    assert grew_in_auto, "back in auto mode, the restarted server could not write"


def _lines(path: Path) -> int:
    try:
        return path.read_text().count("\n")
    except FileNotFoundError:
        return 0
