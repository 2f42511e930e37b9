"""auger as an MCP server (`auger mcp-server`): another agent or an editor hands auger a task.

Two tools, over stdio or streamable HTTP on loopback:

    auger_run{prompt, cwd, mode?}          a new session in `cwd`, run to the end of its turn
    auger_continue{session_id, prompt}     one more turn of a stored session

Each runs through the engine's one driver (engine/sessions.py `run_prompt`), headless: what would
need an approval is refused unless the server was started with `--approve-all`/`-c approve_all=true`.
While it runs, every tool call and message is sent as a progress notification; the result is the
final answer and the session id (structured: session_id, answer, reason, message).
"""

import asyncio  # no `from __future__ import annotations`: the SDK reads the tools' annotations at run time,
# and `Context` is imported inside build_server (the SDK is loaded only when serving)
import os
from typing import Any, Callable, TypedDict


class RunResult(TypedDict):
    session_id: str
    answer: str  # the model's last message
    reason: str  # complete | error | cancelled
    message: str  # why, when not complete


def build_server(load_config: Callable[[str], Any]) -> Any:
    """The MCPServer; `load_config(project_dir)` gives the effective config for a run in that directory."""
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.types import ToolAnnotations

    server = MCPServer("auger", log_level="WARNING", instructions=(
        "auger is a coding agent: give it a task and a project directory with auger_run; continue the "
        "same conversation with auger_continue and the session_id it returned."))
    acts = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=True)

    @server.tool(annotations=acts)
    async def auger_run(prompt: str, cwd: str, ctx: Context, mode: str | None = None) -> RunResult:
        """Run a coding task with auger in the project directory `cwd` (an absolute path) until it is done.
        `mode`: plan (read-only), safe, or auto. Returns the final answer and the session id."""
        return await _run(ctx, load_config, prompt, cwd=cwd, mode=mode)

    @server.tool(annotations=acts)
    async def auger_continue(session_id: str, prompt: str, ctx: Context) -> RunResult:
        """Continue a session that auger_run started, with a new prompt. Returns the final answer."""
        return await _run(ctx, load_config, prompt, session_id=session_id)

    return server


class RunRefused(Exception):
    """A request the tool cannot run (bad directory, unknown session); shown to the caller as an error."""


async def _run(ctx: Any, load_config: Callable[[str], Any], prompt: str, *, cwd: str | None = None,
               mode: str | None = None, session_id: str | None = None) -> RunResult:
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        return await _run_session(ctx, load_config, prompt, cwd=cwd, mode=mode, session_id=session_id)
    except RunRefused as exc:
        raise ToolError(str(exc)) from None


async def _run_session(ctx: Any, load_config: Callable[[str], Any], prompt: str, *, cwd: str | None,
                       mode: str | None, session_id: str | None) -> RunResult:
    from pathlib import Path

    from auger.config import home_dirs
    from auger.engine.sessions import SessionManager, SessionNotFound, run_prompt
    from auger.engine.workspace import Workspace
    from auger.models.registry import ProviderError, client_for
    from auger.policy.trust import MODES
    from auger.protocol import events as ev
    from auger.store.sqlite import SqliteStore

    if mode is not None and mode not in MODES:
        raise RunRefused(f"mode must be one of {', '.join(MODES)}")
    probe_dir = cwd if cwd is not None else os.getcwd()
    config = load_config(probe_dir)
    store = SqliteStore(Path(config.db_path) if config.db_path else home_dirs()["data"] / "sessions.db")
    try:
        record = None
        if session_id is not None:
            record = await store.get_session(session_id)
            if record is None:
                raise RunRefused(f"no stored session has id {session_id!r}")
            cwd = record.cwd
            config = load_config(cwd)
        assert cwd is not None
        if not os.path.isabs(cwd) or not os.path.isdir(cwd):
            raise RunRefused(f"cwd must be an absolute path to an existing directory, not {cwd!r}")
        sessions = SessionManager(Workspace.open(cwd, config), store)
        try:
            session = (await sessions.resume(record.id) if record is not None
                       else await sessions.create(client_for(config), mode=mode))
        except (ProviderError, SessionNotFound, ValueError) as exc:
            raise RunRefused(str(exc)) from None
        progress: asyncio.Queue[str | None] = asyncio.Queue()
        answer = ""

        def on_event(_session: Any, event: Any) -> None:
            nonlocal answer
            if isinstance(event, ev.ToolCallEnded):
                progress.put_nowait(f"{event.name}: {'ok' if event.ok else 'failed'}")
            elif isinstance(event, ev.AgentMessage):
                answer = event.text
                progress.put_nowait(event.text[:500])
            elif isinstance(event, ev.WarningEvent):
                progress.put_nowait(f"warning: {event.message}")

        async def report() -> None:  # in order, and never blocking the session's events
            step = 0
            while (message := await progress.get()) is not None:
                step += 1
                await ctx.report_progress(step, None, message)

        reporter = asyncio.create_task(report())
        try:
            ended = (await run_prompt(session, prompt, on_event=on_event))[-1]
        finally:
            progress.put_nowait(None)
            await reporter
    finally:
        await store.aclose()
    return RunResult(session_id=session.id, answer=answer, reason=ended.reason, message=ended.message or "")


def serve(load_config: Callable[[str], Any], *, http_port: int | None = None) -> None:
    server = build_server(load_config)
    if http_port is None:
        server.run()
    else:
        server.run("streamable-http", host="127.0.0.1", port=http_port)
