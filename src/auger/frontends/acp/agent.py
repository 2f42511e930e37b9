"""`auger acp`: auger as an Agent Client Protocol agent, for editors (JSON-RPC over stdio).

`AugerAgent` implements the SDK's Agent interface over a SessionManager per project. Each ACP
session is one auger Session opened interactive: its envelopes are followed by one pump task that
turns them into `session/update` notifications (updates.py), puts approval requests to the editor
as `session/request_permission`, and answers the waiting `session/prompt` with the stop reason when
the turn ends. When the editor offers files and terminals, the session's tools use them
(client_tools.py) behind the same path guard and policy.

Anything a client sends is hostile until checked: a cwd must be an absolute, existing directory; a
session id must name a stored session exactly; a mode must be one of auger's. A turn that fails
ends its prompt with a JSON-RPC error; the process and the other sessions carry on.

Behind `auger serve` (`/acp`) the sessions are the server's (`SessionHost`): one this agent opens is
registered there, so browsers, terminals and scripts drive the same Session object; loading one the
server already runs joins it — its events from now on, the editor's prompts queued beside theirs —
and leaving it (the socket's end, `session/close`) leaves it running for them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from typing import Any, Awaitable, Callable, Protocol

from acp import PROTOCOL_VERSION, RequestError, helpers
from acp.schema import (
    AgentCapabilities, AllowedOutcome, CloseSessionResponse, ForkSessionResponse, Implementation, InitializeResponse,
    ListSessionsResponse, LoadSessionResponse, McpCapabilities, NewSessionResponse, PermissionOption,
    PromptCapabilities, PromptResponse, ResumeSessionResponse, SessionCapabilities, SessionCloseCapabilities,
    SessionConfigOptionSelect, SessionConfigSelectOption, SessionForkCapabilities, SessionInfo,
    SessionListCapabilities, SessionMode, SessionModeState, SessionResumeCapabilities, SetSessionConfigOptionResponse,
    SetSessionModeResponse, ToolCallUpdate,
)

from auger._version import __version__
from auger.frontends.acp.client_tools import EditorFiles, EditorTerminal
from auger.frontends.acp.updates import (
    CALL_CAP_ERROR, LIVE_INTERVAL, UpdateMapper, available_commands, plan_update, tool_kind,
)
from auger.protocol import events as ev
from auger.protocol.ops import ApprovalDecision, Interrupt, SetMode, SetModel, Shutdown, UserTurn
from auger.protocol.vocab import ApprovalOption, Mode
from auger.store.base import StoreError, log_failure

# A sub-agent's events the editor is not shown: its streamed text and answer (it is not the reply), its
# turn's start and end (they do not end this prompt), its usage and plan (the session's own report them).
_CHILDS_OWN = (ev.TurnStarted, ev.TurnEnded, ev.MessageDelta, ev.ReasoningDelta, ev.AgentMessage, ev.TokenUsage,
               ev.PlanUpdated)

log = logging.getLogger("auger.acp")

MODE_TEXT = {
    Mode.PLAN: ("Plan", "Read and search only; every change is refused."),
    Mode.SAFE: ("Safe", "Reads run; changes, remote actions and destructive commands ask first."),
    Mode.AUTO: ("Auto", "Changes inside the project run without asking (in the sandbox); the rest asks."),
}
# auger's approval answers as ACP permission options: (ACP kind, label). `reject_always` is not an
# auger answer: this front end keeps it, refusing the same request for the rest of the session.
OPTIONS = {
    ApprovalOption.APPROVE: ("allow_once", "Allow once"),
    ApprovalOption.APPROVE_SESSION: ("allow_always", "Allow for this session"),
    ApprovalOption.APPROVE_ALWAYS: ("allow_always", "Always allow this command (saves a rule)"),
    ApprovalOption.APPROVE_WRITABLE_ROOT: ("allow_always", "Allow, and writes beneath the directory for this session"),
    ApprovalOption.DENY: ("reject_once", "Reject"),
    ApprovalOption.ABORT: ("reject_once", "Reject and stop the turn"),
    ApprovalOption.CONTINUE: ("allow_once", "Continue"),
    ApprovalOption.STOP: ("reject_once", "Stop"),
    ApprovalOption.DECLINE: ("reject_once", "Decline"),
    ApprovalOption.CANCEL: ("reject_once", "Cancel"),
}
REJECT_ALWAYS = "reject_always"
MODEL_OPTION = "model"  # the one session config option: the model (ACP's stable successor of set_model)
MODEL_REFUSED = "model switch refused"  # how the session's warning begins when it cannot switch
STOP_REASONS = {"complete": "end_turn", "cancelled": "cancelled"}
LIST_PAGE = 50  # sessions per session/list answer


def option_name(option: ApprovalOption, details: ev.ApprovalDetails | None) -> str:
    """An answer's label in the editor; the writable root one names its directory."""
    if option == ApprovalOption.APPROVE_WRITABLE_ROOT and details is not None and details.writable_root:
        return f"Allow, and writes beneath {details.writable_root} for this session"
    return OPTIONS[option][1]


def refuse(message: str) -> RequestError:
    return RequestError.invalid_params({"message": message})


class SessionHost(Protocol):
    """Where a server keeps the sessions its clients share (server/sessions.py's Hub)."""

    def live(self, session_id: str) -> Any:
        """The session if it runs there now, else None."""
    def share(self, session: Any, *, new: bool = False) -> None:
        """Register a session this agent opened (`new`: created or forked), for the server's other clients."""


class AcpSession:
    """One editor session: the auger Session, its update mapping, the prompt waiting for its turn."""

    def __init__(self, agent: AugerAgent, session: Any, *, joined: bool = False) -> None:
        self.agent = agent
        self.session = session
        self.joined = joined  # the server ran it already: its events from now on; leaving it leaves it running
        self.mapper = UpdateMapper(session.workspace.root)
        self.waiting: asyncio.Future[tuple[str, str | None]] | None = None
        self.rejected: set[tuple[str, str]] = set()  # (tool, subject) refused for the rest of the session
        self.asking: dict[str, asyncio.Task[None]] = {}  # request id -> the permission request put to the editor
        self.pump: asyncio.Task[None] | None = None
        self.model_switch: asyncio.Future[str | None] | None = None  # None: switched; else why not
        self.sending = asyncio.Lock()  # updates leave in the order they were made: a held output never after its end
        self.flushing: asyncio.Task[None] | None = None  # shows held output once due (UpdateMapper.due)

    @property
    def id(self) -> str:
        return self.session.id

    async def send(self, update: Any) -> None:
        await self.agent.conn.session_update(session_id=self.id, update=update)

    async def follow(self) -> None:
        """The editor's slash commands, then every envelope this process emits for the session, until
        it shuts down, as updates."""
        workspace = self.session.workspace
        try:
            await self.send(available_commands(dict(workspace.prompts), list(self.session.skills.skills)))
            async for envelope in self.session.subscribe(self.session.last_seq if self.joined else None):
                if envelope.parent_call_id is None or not isinstance(envelope.event, _CHILDS_OWN):
                    await self.on_event(envelope.event)
        except Exception as exc:  # a broken connection or a mapping bug: the prompt waiting must not hang
            log_failure(log, f"session {self.id}: following its events", exc)
            self.finish("error", str(exc) if isinstance(exc, StoreError)
                        else "auger lost track of the session's events (see its log on stderr)")

    async def on_event(self, event: ev.Event) -> None:
        """One of the session's events — or a sub-agent's tool call or approval, shown as the editor's own
        (its text, turns and usage stay its own: they are not this prompt's reply or end)."""
        async with self.sending:
            for update in self.mapper.updates(event):
                await self.send(update)
        if self.mapper.held and (self.flushing is None or self.flushing.done()):
            self.flushing = asyncio.create_task(self.flush_held())
        if isinstance(event, ev.ApprovalRequest):
            task = asyncio.create_task(self.ask(event))  # the stream goes on while the editor asks
            self.asking[event.request_id] = task
            task.add_done_callback(lambda _: self.asking.pop(event.request_id, None))
        elif isinstance(event, ev.ApprovalResolved) and event.request_id in self.asking:
            self.asking[event.request_id].cancel()  # answered elsewhere (a server's web UI) or withdrawn
        elif isinstance(event, ev.TurnEnded):
            self.finish(str(event.reason), event.message)
        elif self.model_switch is not None and not self.model_switch.done():
            if isinstance(event, ev.ModelChanged):
                self.model_switch.set_result(None)
            elif isinstance(event, ev.WarningEvent) and event.message.startswith(MODEL_REFUSED):
                self.model_switch.set_result(event.message)

    async def flush_held(self) -> None:
        """Show running calls' held output once it is due, until none is held."""
        while self.mapper.held:
            await asyncio.sleep(LIVE_INTERVAL / 2)
            async with self.sending:
                for update in self.mapper.due():
                    await self.send(update)

    def finish(self, reason: str, message: str | None) -> None:
        if self.waiting is not None and not self.waiting.done():
            self.waiting.set_result((reason, message))

    async def ask(self, request: ev.ApprovalRequest) -> None:
        """Put an approval to the editor; its answer becomes the approval_decision op."""
        details = request.details
        key = (details.tool, details.subject) if details is not None else None
        if key is not None and key in self.rejected and ApprovalOption.DENY in request.options:
            self.session.submit(ApprovalDecision(request.request_id, ApprovalOption.DENY,
                                                 "the user rejected this for the rest of the session"))
            return
        options = [PermissionOption(option_id=str(o), kind=OPTIONS[o][0], name=option_name(o, details))  # type: ignore[arg-type]
                   for o in request.options if o in OPTIONS]
        if key is not None and ApprovalOption.DENY in request.options:
            options.append(PermissionOption(option_id=REJECT_ALWAYS, kind="reject_always",
                                            name="Reject for the rest of this session"))
        call = ToolCallUpdate(tool_call_id=details.call_id if details is not None else request.request_id,
                              title=request.message, status="pending",
                              kind=tool_kind(details.tool) if details is not None else "think")  # type: ignore[arg-type]
        if details is not None and details.diff and not self.mapper.has_diff(details.tool):
            call.content = [helpers.tool_content(helpers.text_block(details.diff))]  # e.g. a patch: as text
        fallback = ApprovalOption.ABORT if ApprovalOption.ABORT in request.options else request.options[-1]
        try:
            response = await self.agent.conn.request_permission(session_id=self.id, tool_call=call, options=options)
            outcome = response.outcome
            chosen = outcome.option_id if isinstance(outcome, AllowedOutcome) else None  # cancelled: the prompt was
        except Exception:
            log.exception("session %s: the permission request failed", self.id)
            chosen = None
        if chosen == REJECT_ALWAYS and key is not None:
            self.rejected.add(key)
            decision: ApprovalOption = ApprovalOption.DENY
        elif chosen in {str(o) for o in request.options}:
            decision = ApprovalOption(chosen)
        else:
            decision = fallback
        self.session.submit(ApprovalDecision(request.request_id, decision))

    async def close(self) -> None:
        for task in list(self.asking.values()):
            task.cancel()
        if self.joined:  # the server's other clients go on with it
            if self.pump is not None:
                self.pump.cancel()
                await asyncio.gather(self.pump, return_exceptions=True)
            return
        try:
            self.session.submit(Shutdown())
        except RuntimeError:
            pass  # already shut down
        await self.session.wait_closed()
        if self.pump is not None:
            await asyncio.gather(self.pump, return_exceptions=True)
        await self.session.store.release(self.id)


class AugerAgent:
    """The ACP Agent: sessions by id, the client's capabilities, one store for all of them."""

    def __init__(self, config_for: Callable[[str], Any], store: Any, *, editor_terminals: bool = True,
                 editor_files: bool = True, project_dir: Callable[[Any], str] | None = None,
                 max_mode: str | None = None,
                 open_refusal: Callable[[Any], Awaitable[str | None]] | None = None,
                 host: SessionHost | None = None) -> None:
        self.config_for = config_for  # project dir -> its effective Config
        self.store = store
        self.editor_terminals = editor_terminals  # False: commands stay in auger's sandbox whatever the client offers
        self.editor_files = editor_files  # False: the files are read here, not through the editor (a remote editor)
        self.project_dir = project_dir or _project_dir  # a client's cwd -> the project root it may work in
        self.max_mode = max_mode  # the most permissive mode a client may switch to (None: any)
        self.open_refusal = open_refusal  # a stored session's record -> why it may not be opened here (None: it may)
        self.host = host  # a server's sessions, shared with its other clients (None: this agent's own)
        self.conn: Any = None
        self.capabilities: Any = None
        self.sessions: dict[str, AcpSession] = {}
        self._opening: set[str] = set()  # stored sessions being loaded or resumed: not twice at once

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None,
                         **kwargs: Any) -> InitializeResponse:
        """auger speaks protocol version 1; a client asking for another gets 1 and decides."""
        self.capabilities = client_capabilities
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(image=True, audio=False, embedded_context=True),
                mcp_capabilities=McpCapabilities(http=True, sse=True),
                session_capabilities=SessionCapabilities(
                    list=SessionListCapabilities(), resume=SessionResumeCapabilities(),
                    fork=SessionForkCapabilities(), close=SessionCloseCapabilities())),
            auth_methods=[],
            agent_info=Implementation(name="auger", title="auger", version=__version__))

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        raise refuse("auger has no authentication methods; provider keys come from its configuration")

    async def new_session(self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any) -> NewSessionResponse:
        from auger.models.registry import ProviderError, client_for

        root = self.project_dir(cwd)
        manager = self._manager(root)
        try:
            client = client_for(manager.workspace.config)
        except ProviderError as exc:
            raise refuse(str(exc)) from None
        session = await manager.create(client, interactive=True)
        await self.store.claim(session.id)
        self._share(session, new=True)
        acp_session = await self._attach(session, mcp_servers or [])
        response = NewSessionResponse(session_id=session.id, modes=_modes(session.mode),
                                      config_options=_config_options(session))
        self._start(acp_session)
        return response

    async def load_session(self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None,
                           **kwargs: Any) -> LoadSessionResponse:
        """Replay the stored conversation as updates, then continue it (the recorded model)."""
        acp_session = await self._reopen(cwd, session_id, mcp_servers or [])
        session = acp_session.session
        for update in acp_session.mapper.replay(list(session.history.items)):
            await acp_session.send(update)
        if session.runtime.state.plan:
            await acp_session.send(plan_update(session.runtime.state.plan))
        self._start(acp_session)
        return LoadSessionResponse(modes=_modes(session.mode), config_options=_config_options(session))

    async def resume_session(self, session_id: str, cwd: str, mcp_servers: list[Any] | None = None,
                             **kwargs: Any) -> ResumeSessionResponse:
        """Continue a stored conversation without replaying it (the editor still shows it)."""
        acp_session = await self._reopen(cwd, session_id, mcp_servers or [])
        self._start(acp_session)
        return ResumeSessionResponse(modes=_modes(acp_session.session.mode),
                                     config_options=_config_options(acp_session.session))

    async def fork_session(self, session_id: str, cwd: str, mcp_servers: list[Any] | None = None,
                           **kwargs: Any) -> ForkSessionResponse:
        """A new session continuing from a copy of a stored one's conversation; the source is untouched
        (and may stay open, even mid-prompt: what it has recorded so far is copied)."""
        from auger.engine.session.resume import ResumeRefused
        from auger.engine.session.sessions import SessionNotFound

        root = self.project_dir(cwd)
        record = await self._stored(session_id, root)
        try:
            session = await self._manager(root).fork(record.id, interactive=True)
        except (ResumeRefused, SessionNotFound, ValueError) as exc:
            raise refuse(str(exc)) from None
        await self.store.claim(session.id)
        self._share(session, new=True)
        acp_session = await self._attach(session, mcp_servers or [])
        self._start(acp_session)
        return ForkSessionResponse(session_id=session.id, modes=_modes(session.mode),
                                   config_options=_config_options(session))

    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None,
                            **kwargs: Any) -> ListSessionsResponse:
        """The stored conversations, newest first (one project's when `cwd` is given), a page at a time;
        `next_cursor` continues after the page's last one."""
        import datetime

        from auger.store.base import page_cursor

        root = self.project_dir(cwd) if cwd is not None else None
        records = await self.store.list_sessions(LIST_PAGE + 1, cwd=root, before=_after(cursor))
        page = records[:LIST_PAGE]
        shown = [r for r in page  # where a server runs it: only what it may open
                 if self.open_refusal is None or await self.open_refusal(r) is None]
        sessions = [SessionInfo(session_id=r.id, cwd=r.cwd, title=r.title or None,
                                updated_at=datetime.datetime.fromtimestamp(r.updated, datetime.UTC).isoformat())
                    for r in shown]
        more = len(records) > LIST_PAGE
        return ListSessionsResponse(sessions=sessions,
                                    next_cursor=page_cursor(page[-1]) if more else None)

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        """Shut the session down (a running prompt ends cancelled) and let it go; it stays stored, so it
        can be loaded or resumed again."""
        acp_session = self._session(session_id)
        del self.sessions[acp_session.id]
        await acp_session.close()
        acp_session.finish("cancelled", None)
        return CloseSessionResponse()

    async def set_session_mode(self, mode_id: str, session_id: str, **kwargs: Any) -> SetSessionModeResponse:
        acp_session = self._session(session_id)
        if mode_id not in {str(m) for m in Mode}:
            raise refuse(f"unknown mode {mode_id!r}; auger's modes are {', '.join(Mode)}")
        order = [str(m) for m in (Mode.PLAN, Mode.SAFE, Mode.AUTO)]
        if self.max_mode is not None and order.index(mode_id) > order.index(self.max_mode):
            raise refuse(f"mode {mode_id!r} is more permissive than this agent allows ({self.max_mode!r})")
        acp_session.session.submit(SetMode(Mode(mode_id)))
        return SetSessionModeResponse()

    async def set_config_option(self, config_id: str, session_id: str, value: Any,
                                **kwargs: Any) -> SetSessionConfigOptionResponse:
        """Switch the session's model (between prompts): one of the models its provider describes."""
        acp_session = self._session(session_id)
        session = acp_session.session
        if config_id != MODEL_OPTION:
            raise refuse(f"unknown config option {config_id!r}; auger has {MODEL_OPTION!r}")
        models = [o.value for o in _config_options(session)[0].options]
        if value not in models:
            raise refuse(f"model {value!r} is not one of {', '.join(models)}")
        if acp_session.waiting is not None:
            raise refuse("a prompt is running; switch the model between prompts")
        if value != session.client.model:
            acp_session.model_switch = asyncio.get_running_loop().create_future()
            try:
                session.submit(SetModel(value))
                problem = await acp_session.model_switch
            finally:
                acp_session.model_switch = None
            if problem:
                raise refuse(problem)
        return SetSessionConfigOptionResponse(config_options=_config_options(session))

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        acp_session = self._session(session_id)
        if acp_session.waiting is not None:
            raise refuse("a prompt is already running in this session; cancel it or wait for it to end")
        if acp_session.pump is None or acp_session.pump.done():
            raise RequestError.internal_error({"message": "auger lost track of this session; load it again"})
        turn = user_turn(prompt, acp_session.session)
        acp_session.waiting = asyncio.get_running_loop().create_future()
        try:
            acp_session.session.submit(turn)
            reason, message = await acp_session.waiting
        finally:
            acp_session.waiting = None
        if reason == "error":
            if message and CALL_CAP_ERROR in message:
                return PromptResponse(stop_reason="max_turn_requests")
            raise RequestError.internal_error({"message": message or "the turn failed"})
        stop = STOP_REASONS.get(reason, "end_turn")
        if stop == "end_turn" and acp_session.mapper.stop_hint:
            stop = acp_session.mapper.stop_hint
        return PromptResponse(stop_reason=stop)  # type: ignore[arg-type]  # a StopReason literal

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        """Interrupt the running prompt's turn (and the sub-agents it waits for), as Esc does in the terminal
        UI: background sub-agents run on until they finish or the session closes."""
        acp_session = self.sessions.get(session_id)
        if acp_session is None:
            return  # a notification: nothing to answer, nothing to cancel
        for task in list(acp_session.asking.values()):
            task.cancel()
        acp_session.session.submit(Interrupt())

    async def close(self) -> None:
        """Shut every session down (the connection ended)."""
        await asyncio.gather(*(s.close() for s in self.sessions.values()), return_exceptions=True)
        self.sessions.clear()

    # -- helpers --------------------------------------------------------------------------
    async def _stored(self, session_id: Any, root: str) -> Any:
        """The stored session named exactly by `session_id`, which must belong to the project `root` (and be
        one this agent may open)."""
        from auger.store.base import is_session_id

        record = await self.store.get_session(session_id) if is_session_id(session_id) else None
        if record is None or record.id != session_id:
            raise refuse(f"no stored session has the id {session_id!r:.80}")
        if os.path.realpath(record.cwd) != root:
            raise refuse(f"session {session_id} belongs to the project {record.cwd}, not {root}")
        why = await self.open_refusal(record) if self.open_refusal is not None else None
        if why is not None:
            raise refuse(why)
        return record

    async def _reopen(self, cwd: Any, session_id: Any, mcp_servers: list[Any]) -> AcpSession:
        """A stored session of the project `cwd`, resumed in this process and attached (not yet followed)."""
        from auger.engine.session.resume import ResumeRefused
        from auger.engine.session.session import SessionAlreadyOpen
        from auger.engine.session.sessions import SessionNotFound

        root = self.project_dir(cwd)
        if isinstance(session_id, str) and (session_id in self.sessions or session_id in self._opening):
            raise refuse(f"session {session_id} is already open in this connection")
        record = await self._stored(session_id, root)
        if record.id in self._opening:  # asked again while this request awaited the store
            raise refuse(f"session {session_id} is already open in this connection")
        self._opening.add(record.id)
        try:
            running = self.host.live(record.id) if self.host is not None else None
            if running is not None:  # the server runs it for its other clients: join it
                return await self._attach(running, mcp_servers, joined=True)
            holder = await self.store.claim(record.id)
            if holder is not None:
                raise refuse(f"session {session_id} is running in another auger process ({holder})")
            try:
                session = await self._manager(root).resume(record.id, interactive=True)
            except SessionAlreadyOpen as exc:  # open in this process already (a server's HTTP side): its lease stays
                raise refuse(str(exc)) from None
            except (ResumeRefused, SessionNotFound, ValueError) as exc:
                await self.store.release(record.id)
                raise refuse(str(exc)) from None
            self._share(session)
            return await self._attach(session, mcp_servers)
        finally:
            self._opening.discard(record.id)

    def _manager(self, root: str) -> Any:
        from auger.engine.session.sessions import SessionManager
        from auger.engine.workspace import Workspace

        return SessionManager(Workspace.open(root, self.config_for(root)), self.store)

    def _session(self, session_id: str) -> AcpSession:
        found = self.sessions.get(session_id) if isinstance(session_id, str) else None
        if found is None:
            raise refuse(f"no open session has the id {session_id!r}; create or load it first")
        return found

    def _share(self, session: Any, *, new: bool = False) -> None:
        if self.host is not None:
            self.host.share(session, new=new)

    async def _attach(self, session: Any, mcp_servers: list[Any], *, joined: bool = False) -> AcpSession:
        """Give the session the editor's files and terminals (if offered) and the editor's MCP servers."""
        acp_session = AcpSession(self, session, joined=joined)
        self.sessions[session.id] = acp_session
        caps = self.capabilities
        fs = getattr(caps, "fs", None)
        state = session.runtime.state
        if self.editor_files and fs is not None and (fs.read_text_file or fs.write_text_file):
            state.client_files = EditorFiles(self.conn, session.id, reads=bool(fs.read_text_file),
                                             writes=bool(fs.write_text_file))
        if self.editor_terminals and getattr(caps, "terminal", False):
            async def show(call_id: str, terminal_id: str) -> None:
                acp_session.mapper.terminals[call_id] = terminal_id
                await acp_session.send(helpers.update_tool_call(call_id, status="in_progress",
                                                                content=[helpers.tool_terminal_ref(terminal_id)]))

            state.client_terminal = EditorTerminal(self.conn, session.id, show)
            # The editor's terminal is outside the sandbox: auto mode must ask as safe mode does.
            session.runtime.policy = dataclasses.replace(session.runtime.policy, sandboxed=False)
        for server in mcp_servers:
            name, table = mcp_table(server)
            problem = await session.mcp.add(name, table) if table is not None else name
            if problem:
                session.emit(ev.WarningEvent(f"MCP server from the editor not added: {problem}"))
        return acp_session

    def _start(self, acp_session: AcpSession) -> None:
        """Start following the session. Called last before the handler returns, with no await in between:
        the SDK queues the response before this task first runs, so the editor learns the session id before
        any update for it arrives."""
        acp_session.pump = asyncio.create_task(acp_session.follow(), name=f"acp-{acp_session.id}")


def _project_dir(cwd: Any) -> str:
    """The client's cwd as a project root: an absolute path to an existing directory, nothing else."""
    if not isinstance(cwd, str) or not cwd or "\x00" in cwd or not os.path.isabs(cwd):
        raise refuse(f"cwd must be an absolute path to a project directory, not {cwd!r}")
    root = os.path.realpath(cwd)
    if not os.path.isdir(root):
        raise refuse(f"cwd {cwd!r} is not an existing directory")
    return root


def _after(cursor: Any) -> tuple[float, str] | None:
    """A session/list cursor (`updated/id` of the last session listed) as the store's `before`."""
    from auger.store.base import parse_page_cursor

    if cursor is None:
        return None
    try:
        return parse_page_cursor(cursor)
    except ValueError:
        raise refuse(f"cursor {cursor!r} is not one this agent gave; list again without it") from None


def _modes(current: str) -> SessionModeState:
    return SessionModeState(current_mode_id=str(current), available_modes=[
        SessionMode(id=str(mode), name=name, description=text) for mode, (name, text) in MODE_TEXT.items()])


def _config_options(session: Any) -> list[Any]:
    """The model, as a select among the current one and those its provider describes (built-in or in
    the user's `[providers.NAME.models]` tables)."""
    from auger.models.registry import registry_for

    provider = registry_for(session.workspace.config).providers.get(session.client.provider)
    models = dict.fromkeys([session.client.model, *(provider.models if provider is not None else ())])
    return [SessionConfigOptionSelect(
        id=MODEL_OPTION, name="Model", category="model", type="select", current_value=session.client.model,
        options=[SessionConfigSelectOption(value=m, name=m) for m in models])]


def mcp_table(server: Any) -> tuple[str, dict | None]:
    """An ACP MCP server as a `[mcp_servers.NAME]` table (tools/mcp_config.py checks it); (why not, None)
    for a transport auger does not speak."""
    kind = getattr(server, "type", None)
    if kind in ("http", "sse"):
        return server.name, {"url": server.url, "headers": {h.name: h.value for h in server.headers},
                             "transport": "sse" if kind == "sse" else "streamable_http"}
    if getattr(server, "command", None):
        return server.name, {"command": server.command, "args": list(server.args),
                             "env": {e.name: e.value for e in server.env}}
    return f"{getattr(server, 'name', '?')}: auger cannot use an MCP server of type {kind!r}", None


def user_turn(blocks: list[Any], session: Any) -> UserTurn:
    """The prompt's content blocks as one user turn: text, images (as data URLs whose bytes must be an
    image of the type they name), embedded files (their text, tagged with the URI) and links. `/name`
    naming a skill (not a custom prompt, which the engine expands) injects that skill."""
    from auger.models.images import ImageError, checked_data_url

    texts: list[str] = []
    images: list[str] = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(block.text)
        elif kind == "image":
            try:
                images.append(checked_data_url(f"data:{block.mime_type};base64,{block.data}"))
            except ImageError as exc:
                raise refuse(f"image {len(images) + 1} of the prompt: {exc}") from None
        elif kind == "resource" and hasattr(block.resource, "text"):
            texts.append(f"<file uri={block.resource.uri!r}>\n{block.resource.text}\n</file>")
        elif kind == "resource_link":
            texts.append(f"[{block.name}]({block.uri})")
    text = "\n".join(texts)
    skills: list[str] = []
    head, _, rest = text.partition(" ")
    if head.startswith("/") and head[1:] not in session.workspace.prompts and session.skills.get(head[1:]):
        skills.append(head[1:])
        text = rest or f"Use the skill {head[1:]}."
    if not text.strip() and not images:
        raise refuse("the prompt is empty")
    return UserTurn(text, images, skills)
