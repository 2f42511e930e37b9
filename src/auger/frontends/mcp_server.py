"""auger as an MCP server (`auger mcp-server`): another agent or an editor hands auger a task.

Two tools, over stdio or streamable HTTP:

    auger_run{prompt, cwd, mode?}          a new session in `cwd`, run to the end of its turn
    auger_continue{session_id, prompt}     one more turn of a stored session

Each runs through the engine's one driver (engine/session/sessions.py `run_prompt`), headless: what would
need an approval is refused unless the server was started with `--approve-all`/`-c approve_all=true`.
While it runs, every tool call and message is sent as a progress notification; the result is the
final answer and the session id (structured: session_id, answer, reason, message, mode). A run that
did not complete (an error, a cancellation, a budget) is a tool error (`isError`) saying why.

A caller never gets more than the server was started with (`Limits`): the server's mode is a ceiling
for every run (a wider `mode`, or a stored session recorded in a wider one, runs in the server's),
and a session's directory must lie beneath the directory the server started in, or beneath one of
its `--root`s. Over HTTP, frontends/http_guard.py checks every request (Host, Origin, token) and the
port is announced as auger's own (policy/listening.py), so no session's sandbox can reach it.
"""

import asyncio  # no `from __future__ import annotations`: the SDK reads the tools' annotations at run time,
# and `Context` is imported inside build_server (the SDK is loaded only when serving)
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Callable, TypedDict


class RunResult(TypedDict):
    session_id: str
    answer: str  # the model's last message
    reason: str  # complete | error | cancelled
    message: str  # why, when not complete
    mode: str  # the trust mode the run had


@dataclass(frozen=True)
class Limits:
    """What the server allows every caller, whatever it asks: a mode ceiling and the session roots."""

    mode: str  # the server's configured mode: no run is wider
    roots: tuple[Path, ...]  # resolved; a session's directory lies beneath one of them

    def within(self, mode: str) -> str:
        from auger.context.agents import stricter

        return stricter(mode, self.mode)

    def refusal(self, cwd: str) -> str | None:
        """Why a session may not run in `cwd`; None when it may."""
        from auger.policy.paths import is_inside

        if not os.path.isabs(cwd) or not os.path.isdir(cwd):
            return f"cwd must be an absolute path to an existing directory, not {cwd!r}"
        real = Path(os.path.realpath(cwd))
        if any(is_inside(real, root) for root in self.roots):
            return None
        return (f"{cwd} is outside the directories this server serves ({', '.join(map(str, self.roots))}); "
                "start `auger mcp-server` there, or give it --root")


def build_server(load_config: Callable[[str], Any], limits: Limits) -> Any:
    """The MCPServer; `load_config(project_dir)` gives the effective config for a run in that directory."""
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.types import CallToolResult, ToolAnnotations

    server = MCPServer("auger", log_level="WARNING", instructions=(
        "auger is a coding agent: give it a task and a project directory with auger_run; continue the "
        "same conversation with auger_continue and the session_id it returned."))
    acts = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=True)

    @server.tool(annotations=acts)
    async def auger_run(prompt: str, cwd: str, ctx: Context,
                        mode: str | None = None) -> Annotated[CallToolResult, RunResult]:
        """Run a coding task with auger in the project directory `cwd` (an absolute path) until it is done.
        `mode`: plan (read-only), safe, or auto; never wider than the mode the server was started with.
        Returns the final answer and the session id."""
        return await _run(ctx, load_config, limits, prompt, cwd=cwd, mode=mode)

    @server.tool(annotations=acts)
    async def auger_continue(session_id: str, prompt: str, ctx: Context) -> Annotated[CallToolResult, RunResult]:
        """Continue a session that auger_run started, with a new prompt. Returns the final answer."""
        return await _run(ctx, load_config, limits, prompt, session_id=session_id)

    return server


class RunRefused(Exception):
    """A request the tool cannot run (bad directory, unknown session); shown to the caller as an error."""


async def _run(ctx: Any, load_config: Callable[[str], Any], limits: Limits, prompt: str, *,
               cwd: str | None = None, mode: str | None = None, session_id: str | None = None) -> Any:
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        result = await _run_session(ctx, load_config, limits, prompt, cwd=cwd, mode=mode, session_id=session_id)
    except RunRefused as exc:
        raise ToolError(str(exc)) from None
    return _tool_result(result)


def _tool_result(result: RunResult) -> Any:
    """The run as a tool result: a run that did not complete is an error (`isError`), its reason first."""
    from mcp.types import CallToolResult, TextContent

    text = json.dumps(result, ensure_ascii=False)
    failed = result["reason"] != "complete"
    if failed:
        text = f"the run did not complete ({result['reason']}): {result['message'] or 'no reason given'}\n{text}"
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=dict(result),
                          is_error=failed)


async def _run_session(ctx: Any, load_config: Callable[[str], Any], limits: Limits, prompt: str, *,
                       cwd: str | None, mode: str | None, session_id: str | None) -> RunResult:
    from auger.engine.session.sessions import SessionManager, SessionNotFound, run_prompt
    from auger.engine.workspace import Workspace
    from auger.models.registry import ProviderError, client_for
    from auger.policy.trust import MODES
    from auger.protocol import events as ev
    from auger.store.factory import open_store

    if mode is not None and mode not in MODES:
        raise RunRefused(f"mode must be one of {', '.join(MODES)}")
    probe_dir = cwd if cwd is not None else os.getcwd()
    config = load_config(probe_dir)
    store = open_store(config.db_path)
    try:
        record = None
        if session_id is not None:
            record = await store.get_session(session_id)
            if record is None:
                raise RunRefused(f"no stored session has id {session_id!r}")
            cwd = record.cwd
            config = load_config(cwd)
        assert cwd is not None
        refusal = limits.refusal(cwd)
        if refusal:
            raise RunRefused(refusal)
        sessions = SessionManager(Workspace.open(cwd, config), store)
        try:
            if record is not None:
                narrowed = limits.within(record.mode)
                session = await sessions.resume(record.id, mode=narrowed if narrowed != record.mode else None)
            else:
                session = await sessions.create(client_for(config), mode=limits.within(mode or config.mode))
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
    return RunResult(session_id=session.id, answer=answer, reason=ended.reason, message=ended.message or "",
                     mode=session.mode)


@dataclass(frozen=True)
class Http:
    """Where `--http` listens: loopback unless told otherwise; port 0 picks a free one."""

    port: int
    host: str = "127.0.0.1"


class CannotServe(Exception):
    """The server cannot listen where it was told to; the message says why, in one line."""


def serve(load_config: Callable[[str], Any], limits: Limits, *, http: Http | None = None) -> None:
    """Serve over stdio, or over HTTP where `http` says; CannotServe says why the port cannot be used."""
    server = build_server(load_config, limits)
    if http is None:
        server.run()
        return
    import socket

    family = socket.AF_INET6 if ":" in http.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    with sock:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            _check_port(http.port)
            sock.bind((http.host, http.port))
            _check_port(sock.getsockname()[1])  # the one port 0 picked
            sock.listen(128)  # before the address is printed: a client that reads it can connect at once
        except OSError as exc:
            raise CannotServe(f"cannot listen on {http.host}:{http.port}: {exc.strerror or exc}") from None
        asyncio.run(_serve_http(server, sock))


def _check_port(port: int) -> None:
    from auger.policy.listening import DevPort, refuse_dev_port

    try:
        refuse_dev_port(port)
    except DevPort as exc:
        raise CannotServe(str(exc)) from None


async def _serve_http(server: Any, sock: Any) -> None:
    """Streamable HTTP behind the request guard, on a socket bound beforehand (so port 0 can be told), its
    port announced as auger's own while it listens."""
    import uvicorn

    from auger.config import home_dirs
    from auger.frontends.http_guard import Guard, Keys, TokenError, exposure, load_token, token_whereabouts
    from auger.policy.listening import announced

    host, port = sock.getsockname()[:2]
    try:
        token, source = load_token(os.environ, home_dirs()["data"])
    except TokenError as exc:
        raise CannotServe(str(exc)) from None
    app = Guard(server.streamable_http_app(host=host), Keys(token), exposure(host, port, tls=False))
    with announced(port):
        authority = f"[{host}]" if ":" in host else host
        print(f"auger mcp-server: serving http://{authority}:{port}/mcp; clients send `Authorization: Bearer "
              f"<token>`, the token is in {token_whereabouts(source)}", file=sys.stderr, flush=True)
        await uvicorn.Server(uvicorn.Config(app, log_level="warning")).serve(sockets=[sock])
