"""A Session: one conversation's mutable state, driven by ops, observed through events.

The session loop owns dispatch: a user turn starts a turn (or, while one runs, is
queued and injected before the next model call); an interrupt cancels the running
turn; an approval decision wakes whoever asked; shutdown ends everything. Turns never
see the Session: each gets a TurnContext built here and this session as its TurnHost
(engine/turn/host.py). A session is opened complete (`await Session.open(...)`): its
sandbox, rules, tool runtime and context window are set up before anyone can submit.

Each op gets a submission id; every event emitted while handling it (in the loop or in the
tasks it starts, which inherit the context) carries that id in its envelope. User input a
running turn takes (`take_input`) moves that turn's later events to the input's own id.
Numbering, storing and fanning out the envelopes is engine/session/stream.py's job.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import logging
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Coroutine

from auger.context.skills import SkillIndex
from auger.engine.turn.accounting import Budgets, ContextLimits, ContextMeter, UsageLedger
from auger.engine.session.code_intel import SessionCodeIntel, open_code_intel
from auger.engine.turn.history import History
from auger.engine.session.stream import EventStream
from auger.engine.turn.host import CONTEXT_TURN
from auger.engine.session.own_files import OwnFiles
from auger.engine.session.backend import SessionBackend
from auger.engine.session.goal_loop import SessionGoal
from auger.engine.session.models import SessionModels
from auger.engine.session.setup import (
    learn_model_window, open_plugins, open_secrets, open_web_tools, start_mcp_servers,
)
from auger.engine.session.shared import SessionMode, SessionShared
from auger.engine.session.pending_mode import (
    capture_pending, open_pending, pending_op, pending_warnings, share_repository, tell_pending_mode,
    unshare_repository_unless_confined,
)
from auger.engine.turn.changes import UNDO_TURN, ChangeTracker, UndoError, redo_turn, snapshot_opener, undo_turn
from auger.engine.turn.changes import auger_paths
from auger.engine.session.writable_roots import WritableRoots
from auger.engine.turn.tool_runtime import PlannedCall, Policy, ToolRuntime
from auger.ids import new_hex
from auger.lazy_dataclass import Deferred, dataclass
from auger.tools.router import ToolRouter
from auger.engine.turn.turn import Turn
from auger.engine.turn.turn_context import TurnContext
from auger.engine.session.turn_settings import SettingRefused, recorded_settings, settings_after, working_dir
from auger.engine.workspace import Workspace
from auger.models.base import ModelClient
from auger.models.registry import ModelInfo
from auger.models.retry import RetryPolicy
from auger.protocol.events import (
    ApprovalDetails, ApprovalRequest, ApprovalResolved, BackendChanged, ElicitationForm, Event, ModeChanged,
    ModelChanged, RateLimits, RolledBack, SecretRedacted, SessionConfigured, SessionTitle, ShutdownComplete,
    TurnContextChanged, TurnEnded, TurnStarted, Usage,
    WarningEvent,
)
from auger.protocol.envelope import Envelope
from auger.protocol import items as it
from auger.protocol.items import Item
from auger.protocol.ops import (
    AddMcpServer, ApprovalDecision, CancelAgents, Compact, Interrupt, Op, PendingApply, PendingDiscard, PendingRewind,
    Redo, RemoveMcpServer, Rollback, RunShell, SetBackend, SetMode, SetModel, SetTurnContext, Shutdown, Undo, UserTurn,
)
from auger.protocol.vocab import ApprovalOption, Mode, TurnEndReason
from auger.store.base import SessionRecord, Store, StoreError, log_failure
from auger.tools.base import ExecLimits, SessionToolState, Transcript
from auger.tools.mcp_servers import McpServers
from auger.tools.shell import end_processes

if TYPE_CHECKING:
    from auger.engine.turn.model_call import Reply
    from auger.models.context_window import LearnedWindow
    from auger.context.agents import AgentIndex
    from auger.engine.agents.subagents import AgentPool
    from auger.changes.overlay import PendingChanges
    from auger.engine.agents.backend_turn import BackendTurn

log = logging.getLogger("auger.session")


# The submission being handled: set by the session loop per op, inherited by the tasks it starts.
_SUBMISSION: contextvars.ContextVar[str | None] = contextvars.ContextVar("auger_submission", default=None)

# Stored sessions open (or being opened) in this process: two Session objects on one stored conversation
# would interleave their records (and a resume would close the live one's running calls as interrupted).
_LIVE: set[str] = set()
FOLLOWER_GRACE = 5.0  # seconds wait_closed gives the observers to finish (a telemetry flush, at most)


class SessionAlreadyOpen(ValueError):
    pass


def hold(session_id: str) -> None:
    """Mark a stored session as opening in this process; SessionAlreadyOpen if it already is."""
    if session_id in _LIVE:
        raise SessionAlreadyOpen(f"session {session_id[:8]} is already open in this process; use that Session")
    _LIVE.add(session_id)


def let_go(session_id: str) -> None:
    _LIVE.discard(session_id)


class Session:
    def __init__(self, workspace: Workspace, *, store: Store, client: ModelClient, meta: SessionRecord,
                 history: History, interactive: bool, ledger: UsageLedger, runtime: ToolRuntime,
                 confinement, window: LearnedWindow, warnings: list[str], mcp: McpServers) -> None:
        """Use `Session.open`: the parts passed here are set up asynchronously."""
        self.workspace = workspace
        self.store = store
        self.models = SessionModels(workspace.config, client, warnings)  # its own, the fallbacks, the small one
        self.meta = meta
        self.history = history
        self.interactive = interactive
        self.ledger = ledger
        self.meter = ContextMeter(history)
        self.runtime = runtime
        self.confinement = confinement  # auger.policy.confinement.Confinement, when a sandbox works here
        self.archive = runtime.archive
        self.mcp = mcp  # the session's MCP servers, in the router's registry
        self.skills = workspace.skills  # re-read by refresh_context, so skills added mid-session are offered
        self.pending_input: list[tuple[UserTurn, str | None]] = []  # user turns not yet taken, with submission ids
        self.compact_requested = False
        self.interrupt_reason = "interrupted by the user"  # what a cancelled turn says; set by Interrupt
        self.turn_purpose = "turn"  # what its turns' calls are charged as (a review session's: review)
        self._window = window  # what the model's server says of its window (models/context_window.py)
        self._startup_warnings = warnings
        self._ops: asyncio.Queue[tuple[Op | _Internal, str | None]] = asyncio.Queue()
        self._stream = EventStream(meta.id, store)
        self._pulled: AsyncIterator[Event] | None = None  # next_event's subscriber
        self._turn: asyncio.Task[None] | None = None
        self._turn_id = ""  # the running (or last) turn's id
        self._approvals: dict[str, _Waiting] = {}  # approval requests not answered yet, by request id
        self._answered: dict[str, str] = {}  # request id -> who answered it (the last few), to say so to a late one
        self._parked: str | None = None  # the request a parked turn waits for (`park`)
        self._answers: dict[str, ApprovalDecision] = {}  # call id -> the answer to a parked request (`continue_parked`)
        self._loop_task: asyncio.Task[None] | None = None
        self._closed = False
        self._title_task: asyncio.Task[None] | None = None
        self._followers: list[asyncio.Task[None]] = []  # observers of the envelopes (auger/observe)
        self.changes: ChangeTracker | None = None  # snapshots, per-turn diffs, undo (unless snapshots = false)
        self.agents: AgentPool | None = None  # sub-agents (engine/agents/subagents.py), once one was called for
        self.agent_index: AgentIndex | None = None  # the agent definitions the model is offered; set by `open`
        self.pending: PendingChanges | None = None  # pending mode: the queue and the copy the tools work on
        self.code_intel: SessionCodeIntel | None = None  # language servers, diagnostics, code_nav, repo_map
        self.backends = SessionBackend(meta.id, store, workspace.config)  # the agent that runs the turns
        self.rate_limits: RateLimits | None = None  # what the provider last said of its limits (for snapshots)
        self.settings = recorded_settings(history.items)  # effort, summary, working directory (set_turn_context)
        self.goal = SessionGoal(self)  # a goal run (`user_turn` with until/goal): engine/session/goal_loop.py
        runtime.cwd = working_dir(runtime.root, self.settings) if self.settings.cwd else None

    @classmethod
    async def open(cls, workspace: Workspace, *, store: Store, client: ModelClient, meta: SessionRecord,
                   history: History, interactive: bool = False, resumed: bool = False,
                   ledger: UsageLedger | None = None, plan: list[dict] | None = None,
                   pending: bool = False) -> Session:
        """Set up the session's policy (sandbox + egress proxy, exec-policy rules, command environment),
        learn its model's window, record the context the model is told, and start serving ops."""
        from auger.config import home_dirs
        from auger.policy.confinement import confine
        from auger.policy.env import command_env
        from auger.policy.rules import load_rules
        from auger.process import owned_temp_dir
        from auger.secrets.protected import protected_files

        config = workspace.config
        warnings: list[str] = []
        # private to this user (0700: Landlock's TMPDIR is inside it), and removed by the next process of
        # this user should this one be killed before it could remove it at the session's end
        state = SessionToolState(scratch_dir=owned_temp_dir("scratch"), plan=plan,
                                 exec_limits=ExecLimits(config.exec_sessions_max, config.exec_session_idle_timeout))
        dirs = home_dirs()
        window = learn_model_window(client, config, dirs["cache"])  # never waited for
        queue = await open_pending(store, meta.id, workspace.root, pending or config.pending, new=not resumed)
        tools_root = workspace.root if queue is None else queue.tree  # what the tools and commands work on
        if queue is not None:
            state.root_handle = queue.handle
        mode = SessionMode(meta.mode)
        state.protected = protected_files(config, tools_root)  # the file tools', the sandbox's, the snapshots'
        secret_roots = [state.protected]
        if queue is not None:  # commands can read the project itself too (through its absolute path)
            secret_roots.append(protected_files(config, workspace.root))
        confinement = await confine(config, tools_root, state.scratch_dir, share_repository(queue),
                                    warnings.append, mode=lambda: mode.now, dirs=dirs, secrets=secret_roots)
        unshare_repository_unless_confined(queue, confinement)
        if queue is not None:
            warnings.extend(pending_warnings(queue, confinement))
        user_rules = dirs["config"] / "rules.toml"
        rules, problems = load_rules(user_rules, workspace.root / ".auger" / "rules.toml",
                                     trust_project=config.trust_project_rules)
        warnings.extend(problems)
        env = command_env(os.environ, include=config.shell_env_include, exclude=config.shell_env_exclude,
                          set_values=config.shell_env_set)
        if queue is not None:  # git must not find a repository above the copy (it has none of its own)
            env["GIT_CEILING_DIRECTORIES"] = str(queue.tree.parent)
        policy = Policy(rules, sandboxed=confinement is not None and confinement.enforced,
                        approve_all=config.approve_all, interactive=interactive,
                        user_rules_path=None if config.remote_approvals else user_rules)
        from auger.context.instructions import model_family
        from auger.tools.toolset import for_model

        router = await ToolRouter.open(for_model(workspace.tools, model_family(client.model)))
        mcp = await start_mcp_servers(config, router, tools_root, confinement, warnings)  # pending: the copy
        mode.listen(lambda _new, _previous: mcp.reconfine())  # servers confined as the mode now says
        await open_web_tools(config, client, router, warnings)
        roots = _writable_roots(workspace.root, tools_root, auger_paths(dirs, store), confinement)
        shared = SessionShared(mode, await open_plugins(workspace, router, env, meta.id, warnings), roots,
                               open_secrets(config, os.environ, dirs["data"], history.items))
        runtime = ToolRuntime(router, policy, shared=shared, root=tools_root, state=state,
                              archive=_Archive(store, meta.id), env=env, sandbox=confinement,
                              skills=workspace.skills)
        runtime.transcript = Transcript(lambda: history.items, from_person=True, since=meta.created,
                                        root=workspace.root, archive=runtime.archive)
        session = cls(workspace, store=store, client=client, meta=meta, history=history, interactive=interactive,
                      ledger=ledger or UsageLedger(), runtime=runtime, confinement=confinement,
                      window=window, warnings=warnings, mcp=mcp)
        mcp.warn = lambda message: session.emit(WarningEvent(message))
        runtime.record = roots.record = session.record
        roots.warn = lambda turn_id, message: session.emit(WarningEvent(message, turn_id))
        warnings.extend(roots.restore(history.items))
        if confinement is not None:  # its sandbox starts with the first command: problems then are warnings
            confinement.warn = lambda message: session.emit(WarningEvent(message))
        if interactive:
            mcp.elicit = session._elicit
        own = OwnFiles(tools_root, state, session.record, history.items)
        runtime.before_mutation.append(own.before_mutation)
        runtime.after_mutation.append(own.after_mutation)
        runtime.deletes_own = own.deletes_only_own
        runtime.after_mutation.append(session.goal.note_change)
        snapshots = snapshot_opener(config, workspace.root, dirs["data"], auger_paths(dirs, store),
                                    protected=secret_roots[-1])
        if snapshots is not None:
            session.changes = ChangeTracker(snapshots, meta.id, session.record, session.emit)
            if queue is None:  # in pending mode only an apply changes the project
                runtime.before_mutation.append(session.changes.before_mutation)
            session.changes.start()
        session.code_intel = await open_code_intel(config, runtime, session.changes if queue is None else None,
                                                   state.scratch_dir)
        if session.code_intel is not None and config.repo_map == "auto" and not resumed and not len(history):
            session.code_intel.warm_map()
        await session._open_agents(resumed, warnings)
        if queue is not None:
            session.pending = queue
            runtime.after_mutation.append(session._capture_pending)
        await session._check_working_dir(warnings)
        # a new model is told to the model as an environment change, recorded
        await session._refresh(CONTEXT_TURN, warnings=warnings)
        await session._hook("session_start", {"resumed": resumed}, warnings.append)
        if queue is not None:
            await tell_pending_mode(queue, session.history.items, session.record)
        await session._start(resumed=resumed)
        return session

    # -- client side ----------------------------------------------------------------
    @property
    def id(self) -> str:
        return self.meta.id

    @property
    def client(self) -> ModelClient:
        """The session's model (a turn calls through its fallback chain: `models.for_turns`)."""
        return self.models.client

    @property
    def mode(self) -> str:
        return self.shared.mode.now

    @property
    def shared(self) -> SessionShared:
        """What every tool runtime of this session shares: hooks, and the mode now with its listeners
        (`shared.mode.listen`, for parts that must react to a switch)."""
        return self.runtime.shared

    def submit(self, op: Op, submission_id: str | None = None) -> str:
        """Queue an op; returns its submission id (the caller's, when it chose one), which the envelopes of
        the events it causes carry."""
        if self._closed:
            raise RuntimeError("session is shut down")
        submission_id = submission_id or new_hex(12)
        self._ops.put_nowait((op, submission_id))
        return submission_id

    def decide(self, op: ApprovalDecision, submission_id: str | None = None) -> str | None:
        """Answer a waiting approval request now: None when this answer settled it (`approval_resolved`
        says so to every follower), else why not — no such request waits (never asked, or already
        answered: the first valid answer wins), or the decision is not one of its options."""
        waiting = self._approvals.get(op.request_id)
        if waiting is None:
            by = self._answered.get(op.request_id)
            if by is None:
                return f"no approval request {op.request_id!r} is waiting; decision ignored"
            who = f" by {by}" if by else ""
            return f"approval request {op.request_id!r} was already answered{who}; decision ignored"
        if op.decision not in waiting.options:
            return f"decision {op.decision!r} is not one of {', '.join(waiting.options)}; still waiting"
        del self._approvals[op.request_id]
        self._answered[op.request_id] = op.by
        while len(self._answered) > _ANSWERS_KEPT:
            del self._answered[next(iter(self._answered))]
        waiting.future.set_result(op)
        token = _SUBMISSION.set(submission_id)
        try:
            self.emit_for(ApprovalResolved(op.request_id, ApprovalOption(op.decision), op.by),
                          waiting.request.parent_call_id)
        finally:
            _SUBMISSION.reset(token)
        return None

    def park(self, request_id: str) -> bool:
        """Stop the running turn to wait for a person without holding this process: its tool approval
        `request_id` stays unanswered — not withdrawn — and the turn's open calls stay open in the store,
        so the session can be resumed anywhere (`SessionManager.resume(parked=True)`) and continued with
        the answer (`continue_parked`). Only a tool call's approval of the session's own turn parks (not a
        sub-agent's, nor a loop guard's or an MCP server's question); False when this one cannot."""
        waiting = self._approvals.get(request_id)
        if waiting is None or not self.turn_running or waiting.request.parent_call_id is not None:
            return False
        request = waiting.request.event
        if not isinstance(request, ApprovalRequest) or request.kind != "tool" or request.details is None:
            return False
        self._ops.put_nowait((_Park(request_id), None))
        return True

    def continue_parked(self, answer: ApprovalDecision, call_id: str, submission_id: str | None = None) -> None:
        """Continue the turn a parked session stopped: the answer settles its request (`approval_resolved`
        is emitted, by whoever answered), the calls its reply left open run — the one that asked with this
        answer instead of asking again, each decided by the policy of now — and the model is called as
        after any reply."""
        self._answers[call_id] = answer
        self._ops.put_nowait((_Continue(answer), submission_id))

    def pending_approvals(self) -> list[Envelope]:
        """The approval requests waiting for an answer, as they were emitted (oldest first)."""
        return [waiting.request for waiting in self._approvals.values()]

    @property
    def running_turn_id(self) -> str | None:
        """The id of the turn running now, or None."""
        return self._turn_id if self.turn_running else None

    @property
    def accepts_ops(self) -> bool:
        """False once the session is shutting down: `submit` would refuse."""
        return not self._closed

    @property
    def shut_down(self) -> bool:
        """ShutdownComplete was emitted: the session takes no ops and emits nothing more."""
        return self._stream.ended

    @property
    def last_seq(self) -> int:
        """The number of the last event stored and handed to subscribers (or stored before this run): a
        client that loads a snapshot and follows from here misses nothing still being written."""
        return self._stream.delivered

    @property
    def emitted_seq(self) -> int:
        """The number of the last event emitted, stored yet or not: a follower that subscribes after it sees
        exactly what happens from now on (the library's runs start there)."""
        return self._stream.seq

    def subscribe(self, after_seq: int | None = None) -> AsyncIterator[Envelope]:
        """Follow the session's envelopes with seq > `after_seq` (default: all this process emitted for
        it), stored ones first, then live, through ShutdownComplete. Any number may follow at once."""
        return self._stream.subscribe(after_seq)

    def follow(self, follower: Callable[[AsyncIterator[Envelope]], Coroutine[Any, Any, None]]) -> None:
        """Run `follower` over the envelopes from this session's first one, as a task `wait_closed` waits
        for (a few seconds at most): an observer has handled shutdown_complete before the caller moves on.
        A stream the store could not keep ends it quietly (the session says why itself); an observer's bug
        is logged."""

        async def observe() -> None:
            try:
                await follower(self.subscribe())
            except StoreError:
                pass
            except Exception as exc:
                log_failure(log, f"an observer of session {self.id}", exc)

        self._followers.append(asyncio.create_task(observe(), name=f"follower-{self.id}"))

    async def next_event(self) -> Event:
        """The next event for a caller that pulls them one at a time (one subscriber from the start,
        shared by every call)."""
        if self._pulled is None:
            self._pulled = self.events()
        return await anext(self._pulled)

    async def events(self) -> AsyncIterator[Event]:
        """Every event until (and including) ShutdownComplete (a subscriber that drops the envelopes)."""
        async for envelope in self._stream.subscribe():
            if envelope.parent_call_id and isinstance(envelope.event, (TurnStarted, TurnEnded)):
                continue  # a sub-agent's turn: without the envelope it would read as this session's
            yield envelope.event

    @property
    def turn_running(self) -> bool:
        return self._turn is not None and not self._turn.done()

    # -- engine side ----------------------------------------------------------------
    def emit(self, event: Event) -> None:
        self.emit_for(event, None)

    def emit_for(self, event: Event, parent_call_id: str | None) -> None:
        """Emit a sub-agent's event: its envelope names the spawn call it came from."""
        if isinstance(event, RateLimits):
            self.rate_limits = event
        for shown in self._shown(event):
            self._stream.emit(shown, _SUBMISSION.get(), parent_call_id)

    def _shown(self, event: Event) -> list[Event]:
        """What is emitted for `event`: with its secret values redacted (auger/secrets/scrub.py)."""
        secrets = self.shared.secrets
        return secrets.event(event) if secrets is not None else [event]

    async def record(self, turn_id: str, item: Item, *, full_output: str | None = None,
                     tool_name: str = "", arguments: str = "") -> None:
        """Commit an item to the store, then to the in-memory history (store first: nothing is half-recorded).
        The events emitted before it are queued for writing first, so they are never lost while it is kept;
        once they could not be stored, nothing more is recorded (StoreError). What is kept has its secret
        values redacted (auger/secrets/scrub.py), and the marker numbers it uses are recorded before it."""
        self._stream.flush()
        if self._stream.failure is not None:
            raise self._stream.failure
        item, full_output, arguments, report = self.kept(turn_id, item, full_output, arguments)
        await self.keep_markers(turn_id)
        await self.store.append(self.id, turn_id, item, full_output=full_output, tool_name=tool_name,
                                arguments=arguments)
        self.history.append(item)
        if report is not None:
            self.emit(report)

    def kept(self, turn_id: str, item: Item, full_output: str | None, arguments: str
             ) -> tuple[Item, str | None, str, SecretRedacted | None]:
        """An item, its full output and its call's arguments as they may be stored (this session's or a
        sub-agent's), and the event saying what was redacted in them (None: nothing)."""
        secrets = self.shared.secrets
        if secrets is None:
            return item, full_output, arguments, None
        item, report = secrets.item(item, turn_id)
        if full_output is not None:
            full_output = secrets.text(full_output, outside=True)
        return item, full_output, secrets.text(arguments, outside=False) if arguments else arguments, report

    async def keep_markers(self, turn_id: str) -> None:
        """Record the marker numbers given since the last item (secrets/numbering.py): before the item that
        uses them, so a resumed session never gives a recorded number to another text."""
        secrets = self.shared.secrets
        for kind, number, digest in secrets.redactor.numbering.take_new() if secrets is not None else ():
            marker = it.SecretMarker(kind, number, digest)
            await self.store.append(self.id, turn_id, marker)
            self.history.append(marker)

    async def ask(self, *, turn_id: str, kind: str, message: str, options: list[str], headless_default: str,
                  details: dict | None = None, form: ElicitationForm | None = None,
                  parent_call_id: str | None = None) -> ApprovalDecision:
        """Ask the client to decide; with nobody to ask (headless), take `headless_default`. A sub-agent's
        question comes with `parent_call_id`, the spawn call its envelope names."""
        request_id = new_hex(12)
        answered = self._answers.pop(str((details or {}).get("call_id")), None) if kind == "tool" else None
        if answered is not None:  # asked before this session was parked, and answered since
            return answered
        if not self.interactive:
            return ApprovalDecision(request_id, ApprovalOption(headless_default))
        future: asyncio.Future[ApprovalDecision] = asyncio.get_running_loop().create_future()
        envelope = None
        for shown in self._shown(ApprovalRequest(turn_id, request_id, kind, message,
                                                 [ApprovalOption(o) for o in options],
                                                 ApprovalDetails(**details) if details else None, form)):
            emitted = self._stream.emit(shown, _SUBMISSION.get(), parent_call_id)
            if isinstance(shown, ApprovalRequest):
                envelope = emitted
        if envelope is None:  # the store failed: nobody can be asked, and the turn is ending
            return ApprovalDecision(request_id, ApprovalOption(headless_default))
        self._approvals[request_id] = _Waiting(future, options, envelope)
        try:
            return await future
        finally:
            if self._approvals.pop(request_id, None) is not None and request_id != self._parked:
                self.emit_for(ApprovalResolved(request_id), parent_call_id)  # its turn ended first: withdrawn

    async def set_title(self, text: str) -> None:
        """A provisional title from the first prompt, so `auger sessions` can tell sessions apart."""
        if self.meta.title:
            return
        title = " ".join(text.split())[:80]
        if self.shared.secrets is not None:
            title = self.shared.secrets.text(title, outside=False)
        self.meta.title = title
        await self.store.update_session(self.id, title=title)

    def take_input(self) -> UserTurn | None:
        """The oldest queued user turn. From here on the taking task's events (the turn's, and those of
        tasks it starts later) carry that input's submission id: what the turn does next is its answer to
        that input, and a client matches it to its own post."""
        if not self.pending_input:
            return None
        op, submission_id = self.pending_input.pop(0)
        _SUBMISSION.set(submission_id)
        return op

    def queue_input(self, op: UserTurn) -> None:
        """Queue user input for the running turn (before its next model call) or the next one, under the
        submission being handled."""
        self.pending_input.append((op, _SUBMISSION.get()))

    def has_input(self) -> bool:
        """Queued user input, or a background agent's result not yet told (both go in before the next call)."""
        return bool(self.pending_input) or (self.agents is not None and self.agents.root.has_results())

    def take_compact_request(self) -> bool:
        requested, self.compact_requested = self.compact_requested, False
        return requested

    async def charge(self, turn_id: str, model: str, usage: Usage, cost: float | None,
                     purpose: str = "turn") -> None:
        self.ledger.add(usage, cost)
        await self.store.record_usage(self.id, turn_id, model, usage, purpose)

    async def refresh_context(self, turn_id: str) -> SkillIndex:
        await self._refresh(turn_id)
        if self.workspace.config.repo_map == "auto" and self.code_intel is not None:
            await self._first_turn_map(turn_id)
        if self.agents is not None:
            await self.agents.root.deliver(turn_id, self.record)
        if self.pending is not None:  # the user's own edits since, into the tools' copy
            await self._capture_pending(None)
            await self.pending.follow_project()
        return self.skills

    # -- what a turn is told --------------------------------------------------------
    @property
    def model_info(self) -> ModelInfo:
        from auger.models.registry import model_info

        return model_info(self.client.model, self.workspace.config, self.client.provider)

    @property
    def limits(self) -> ContextLimits:
        """The model's window as known now: configured, else what its server said, else the registry's
        (provisional while the server's answer is awaited: a turn reads it again at each use)."""
        config = self.workspace.config
        learned = self._window.for_model(self.client.model)
        window = config.model_context_window or learned or self.model_info.context_window
        provisional = not (config.model_context_window or self._window.settled)
        return ContextLimits.of(window, config.model_auto_compact_token_limit, provisional=provisional)

    def instructions(self) -> str:
        """The system prompt: the model family's base instructions, or the user's `base_instructions`
        (deterministic; the rest is recorded)."""
        from auger.context.instructions import base_instructions

        return base_instructions(self.client.model, self.workspace.config.base_instructions)

    def context_estimate(self) -> int:
        """Tokens the next request would occupy, as the next turn would count them."""
        return self.meter.estimate(self.instructions(), self.runtime.router.schemas, self.limits)

    @property
    def budgets(self) -> Budgets:
        config = self.workspace.config
        return Budgets(config.session_token_budget or None, config.session_cost_budget)

    def turn_context(self, turn_id: str) -> TurnContext:
        """The frozen facts of one turn: model, skills and limits as they are now (the mode is read live)."""
        config = self.workspace.config
        small, problem = self.models.small()
        if problem is not None:
            self.emit(WarningEvent(problem, turn_id))
        return TurnContext(
            turn_id=turn_id, workspace=self.workspace, skills=self.skills, client=self.models.for_turns,
            small_client=small,
            model_info=self.model_info, instructions=self.instructions(), runtime=self.runtime,
            limits_now=lambda: self.limits,
            budgets=self.budgets,
            retry=RetryPolicy(config.model_max_attempts, config.model_retry_base_delay, config.model_retry_max_delay),
            max_model_calls=config.max_model_calls_per_turn, interactive=self.interactive,
            effort=self.settings.effort, summary=self.settings.summary, purpose=self.turn_purpose)

    async def _refresh(self, turn_id: str, *, warnings: list[str] | None = None) -> None:
        """Read the instructions, skills and environment again; record what changed since they were last
        told (for a new session: all of it). Runs when a session starts or resumes and at each user turn,
        so an edited AGENTS.md or a new skill is seen without restarting. Reading problems are reported
        (into `warnings`) only when asked, at start, not again every turn."""
        from auger.context.skills import discover_skills
        from auger.engine.session.context import instructions_item, read_instructions

        config = self.workspace.config
        self.skills = self.runtime.skills = discover_skills(self.workspace.root, self.workspace.config_dir)
        text = read_instructions(self.workspace.root, self.workspace.config_dir, self.skills, config, cwd=self.cwd,
                                 warnings=warnings if warnings is not None else [])
        item = instructions_item(text, self.history.items)
        if item is not None:
            await self.record(turn_id, item)
        await self.update_environment(turn_id)

    async def _first_turn_map(self, turn_id: str) -> None:
        """repo_map = "auto": the repository's map, once, before the first prompt of a session in an
        unfamiliar large project (engine/session/code_intel.py says when)."""
        from auger.engine.session.code_intel import REPO_MAP, map_told

        assert self.code_intel is not None
        if map_told(self.history.items):
            return
        earlier = [s for s in await self.store.list_sessions(2, cwd=self.meta.cwd) if s.id != self.id]
        text = await self.code_intel.first_turn_map(len(earlier))
        if text is not None:
            await self.record(turn_id, it.ContextMessage(text, REPO_MAP))

    async def _hook(self, event: str, data: dict, warn, turn_id: str = CONTEXT_TURN) -> None:
        """Run the hooks of a session-level event (engine/hooks.py); context they add is recorded for the
        model, problems go to `warn`."""
        hooks = self.runtime.hooks
        if hooks is None or not hooks.has(event):
            return
        result = await hooks.run(event, data)
        for message in result.warnings:
            warn(message)
        for text in result.context:
            await self.record(turn_id, it.ContextMessage(text, "hook"))

    async def update_environment(self, turn_id: str = CONTEXT_TURN) -> None:
        """Tell the model what changed in its environment (mode, model, date, branch…), if anything did."""
        from auger.context.instructions import EnvironmentContext
        from auger.engine.session.context import environment_item, last_environment

        env = EnvironmentContext.capture(self.cwd, self.mode, self.client.model)
        item = environment_item(env, last_environment(self.history.items))
        if item is not None:
            await self.record(turn_id, item)

    async def _start(self, *, resumed: bool) -> None:
        """Announce the session and start serving ops; its events are numbered after the last stored one."""
        await self._stream.open(new=not resumed)
        sandbox = self.confinement.kind if self.confinement is not None else "none"
        self.emit(SessionConfigured(self.id, self.client.model, self.client.provider, str(self.workspace.root),
                                    Mode(self.mode), resumed, len(self.history), sandbox))
        for message in self._startup_warnings:
            self.emit(WarningEvent(message))
        self._loop_task = asyncio.create_task(self._loop(), name=f"session-{self.id}")

    async def _loop(self) -> None:
        while True:
            op, submission_id = await self._ops.get()
            if isinstance(op, _TurnFinished) and self.pending_input:
                submission_id = self.pending_input[0][1]  # a turn it starts answers the oldest queued input
            token = _SUBMISSION.set(submission_id)
            try:
                if await self._dispatch(op):
                    return
            except Exception as exc:  # a store that cannot be written, or an engine bug: say so, keep serving
                self.emit(WarningEvent(_failure_message(exc, f"session {self.id} handling {type(op).__name__}")))
            finally:
                _SUBMISSION.reset(token)

    async def _dispatch(self, op: Op | _Internal) -> bool:
        """Handle one op; True when the session is finished."""
        if isinstance(op, _Park):
            if op.request_id in self._approvals and self._turn is not None:
                self._parked = op.request_id
                self.interrupt_reason = PARKED.format(request=op.request_id)
                self._turn.cancel()
        elif isinstance(op, _Continue):
            if self.turn_running:
                self.emit(WarningEvent("a parked turn cannot continue while another turn runs"))
            else:
                request_id = op.answer.request_id
                self.emit(ApprovalResolved(request_id, ApprovalOption(op.answer.decision), op.answer.by))
                self._parked = None
                self._start_turn(open_calls=True)
        elif isinstance(op, UserTurn):
            if (op.until is None and op.goal is None) or self.goal.begin(op):
                self.queue_input(op)
                if not self.turn_running:
                    self._start_turn()
        elif isinstance(op, _TurnFinished):
            if self._turn is op.task:
                self._turn = None
            if self.pending_input and not self.turn_running:  # input that arrived as a turn was ending
                self._start_turn()
        elif isinstance(op, Interrupt):  # the turn only: background agents belong to the session, not the turn
            if self.turn_running:
                self.interrupt_reason = op.reason or "interrupted by the user"
                assert self._turn is not None  # turn_running says so
                self._turn.cancel()
        elif isinstance(op, CancelAgents):
            problem = await self.agents.cancel(op.ids, "cancelled by the user") if self.agents is not None else None
            if problem:
                self.emit(WarningEvent(problem))
        elif isinstance(op, ApprovalDecision):
            self._decide(op)
        elif isinstance(op, SetMode):
            await self._set_mode(op.mode)
        elif isinstance(op, SetModel):
            await self._set_model(op.model, op.provider)
        elif isinstance(op, SetTurnContext):
            await self._set_turn_context(op)
        elif isinstance(op, Compact):
            if self.turn_running:
                self.compact_requested = True  # before the running turn's next model call
            else:
                self._start_turn(compact_only=True)
        elif isinstance(op, Rollback):
            await self._rollback(op.turns)
        elif isinstance(op, (AddMcpServer, RemoveMcpServer)):
            problem = (await self.mcp.add(op.name, op.config) if isinstance(op, AddMcpServer)
                       else await self.mcp.remove(op.name))
            if problem:
                self.emit(WarningEvent(problem))
        elif isinstance(op, (Undo, Redo)):
            await self._undo(op)
        elif isinstance(op, RunShell):
            if self.turn_running:
                self.emit(WarningEvent("shell command refused: a turn is running; run it after the turn ends"))
            else:
                self._start_user_shell(op.command)
        elif isinstance(op, (PendingApply, PendingDiscard, PendingRewind)):
            await self._pending_op(op)
        elif isinstance(op, SetBackend):
            await self.set_backend(op.name)
        elif isinstance(op, Shutdown):
            await self._shutdown()
            return True
        return False

    async def _set_model(self, model: str, provider: str | None) -> None:
        from auger.config import home_dirs
        from auger.models.registry import ProviderError, client_for

        if self.turn_running:
            self.emit(WarningEvent("model switch refused: a turn is running; switch between turns"))
            return
        config = self.workspace.config
        provider = provider or self.client.provider
        switched = dataclasses.replace(config, provider=provider, model=model)  # its own address and key
        try:
            client = client_for(switched)
        except ProviderError as exc:
            self.emit(WarningEvent(f"model switch refused: {exc}"))
            return
        warnings: list[str] = []
        previous = await self.models.switch(client, warnings)
        for message in warnings:
            self.emit(WarningEvent(message))
        self.meta.provider, self.meta.model = client.provider, client.model
        await self.store.update_session(self.id, provider=client.provider, model=client.model)
        await self.update_environment()  # the model field changed: told to the model, recorded
        self.meter.reset()
        await self._window.aclose()
        self._window = learn_model_window(client, config, home_dirs()["cache"])
        self.emit(ModelChanged(client.provider, client.model, previous.provider, previous.model))
        await previous.aclose()

    @property
    def cwd(self) -> Path:
        """The working directory the model is told and commands run in: the project root, or a directory in
        it chosen with set_turn_context."""
        return working_dir(self.workspace.root, self.settings)

    async def _set_turn_context(self, op: SetTurnContext) -> None:
        """Change the reasoning settings or the working directory for the next turns; recorded (so resume
        and fork send the same), the directory told to the model as an environment change."""
        from auger.models.registry import effort_problem

        if self.turn_running:
            self.emit(WarningEvent("turn settings refused: a turn is running; change them between turns"))
            return
        try:
            settings = settings_after(self.settings, op, self.workspace.root)
        except SettingRefused as exc:
            self.emit(WarningEvent(f"turn settings refused: {exc}"))
            return
        config = self.workspace.config
        if settings.effort is not None and settings.effort != self.settings.effort:
            problem = effort_problem(dataclasses.replace(config, provider=self.client.provider, model=self.client.model,
                                                         model_reasoning_effort=settings.effort))
            if problem:
                self.emit(WarningEvent(problem))
        if settings != self.settings:
            await self._apply_settings(settings)
        self.emit(TurnContextChanged(settings.effort or config.model_reasoning_effort,
                                     settings.summary or config.model_reasoning_summary or None, str(self.cwd)))

    async def _apply_settings(self, settings: it.TurnSettings) -> None:
        self.settings = settings
        self.runtime.cwd = working_dir(self.runtime.root, settings) if settings.cwd else None
        await self.record(CONTEXT_TURN, settings)
        await self.update_environment()  # a new directory: told to the model, recorded

    async def _check_working_dir(self, warnings: list[str]) -> None:
        """A resumed session whose recorded working directory is gone works in the root again (recorded)."""
        if self.settings.cwd and not self.cwd.is_dir():
            warnings.append(f"the working directory {self.cwd} no longer exists; working in {self.workspace.root}")
            await self._apply_settings(dataclasses.replace(self.settings, cwd=""))

    async def _rollback(self, turns: int) -> None:
        if self.turn_running:
            self.emit(WarningEvent("rollback refused: a turn is running; interrupt it first"))
            return
        available = self.history.user_turns()
        if turns < 1 or turns > available:
            self.emit(WarningEvent(f"rollback refused: can drop 1 to {available} user turns, not {turns}"))
            return
        await self.record("rollback", it.Rollback(turns))
        self.meter.reset()  # re-estimate from the new view
        self.emit(RolledBack(turns, available - turns))

    async def _undo(self, op: Undo | Redo) -> None:
        """Undo or redo a turn's changes to the files, and tell the model; or say why not (nothing changed)."""
        verb = "undo" if isinstance(op, Undo) else "redo"
        if self.changes is None:
            self.emit(WarningEvent(f"{verb} refused: snapshots are off in this session (snapshots = false)"))
            return
        if self.turn_running:
            self.emit(WarningEvent(f"{verb} refused: a turn is running; interrupt it or wait for it to end"))
            return
        try:
            if isinstance(op, Undo):
                note, event = await undo_turn(self.changes.snapshots, self.history.items, op.turn_id, op.force)
            else:
                note, event = await redo_turn(self.changes.snapshots, self.history.items, op.force)
        except UndoError as exc:
            self.emit(WarningEvent(f"{verb} refused: {exc}"))
            return
        if self.pending is not None:  # the files the undo put back, as the tools' copy shows them
            await self.pending.refresh(event.files)
        await self.record(UNDO_TURN, note)
        self.emit(event)

    # -- pending mode -----------------------------------------------------------------
    async def _capture_pending(self, call: PlannedCall | None) -> None:
        assert self.pending is not None
        await capture_pending(self.pending, call, self.emit)

    async def _pending_op(self, op: PendingApply | PendingDiscard | PendingRewind) -> None:
        verb = op.TYPE.removeprefix("pending_")
        if self.pending is None:
            self.emit(WarningEvent(f"pending {verb} refused: this session is not in pending mode"))
        elif self.turn_running:
            self.emit(WarningEvent(f"pending {verb} refused: a turn is running; interrupt it or wait for it to end"))
        else:
            await pending_op(self.pending, op, store=self.store, session_id=self.id, root=self.workspace.root,
                             changes=self.changes, record=self.record, emit=self.emit)

    async def _set_mode(self, mode: str) -> None:
        from auger.policy.trust import MODES

        if mode not in MODES:
            self.emit(WarningEvent(f"unknown trust mode {mode!r}; choose one of {', '.join(MODES)}"))
            return
        previous = self.mode
        if mode != previous:
            self.meta.mode = mode
            await self.shared.mode.change(mode)  # from here on, for every call: the running turn's, sub-agents'
            await self.store.update_session(self.id, mode=mode)
            await self.update_environment()
        self.emit(ModeChanged(Mode(mode), Mode(previous)))

    async def _elicit(self, server: str, message: str, schema: dict) -> tuple[str, str | None]:
        """An MCP server asks the user something mid-call: asked like an approval (headless: declined); an
        answer to its form (`schema` in the details) comes as a JSON object in the decision's feedback."""
        decision = await self.ask(turn_id=CONTEXT_TURN, kind="elicitation", message=f"MCP server {server!r} asks: "
                                  f"{message}", options=["accept", "decline", "cancel"], headless_default="decline",
                                  form=ElicitationForm(server, schema))
        return decision.decision, decision.feedback

    def _decide(self, op: ApprovalDecision) -> None:
        problem = self.decide(op, _SUBMISSION.get())
        if problem is not None:
            self.emit(WarningEvent(problem))

    # -- backends: another agent runs the turns ---------------------------------------
    @property
    def backend(self) -> str:
        """The agent that runs the turns (auger/backends); "" for auger's own loop."""
        return self.backends.name

    async def set_backend(self, name: str) -> None:
        """Run the next turns with the agent `name` ("" for auger's own loop); refused, with a warning,
        while a turn runs or when the agent is unknown, disabled or broken in the config."""
        if self.turn_running:
            self.emit(WarningEvent("backend switch refused: a turn is running; switch between turns"))
            return
        outcome = self.backends.switch(name)
        self.emit(outcome if isinstance(outcome, BackendChanged) else
                  WarningEvent(f"backend switch refused: {outcome}"))

    def _start_turn(self, *, compact_only: bool = False, open_calls: bool = False) -> None:
        turn: Turn | BackendTurn
        if self.backend and not compact_only and not open_calls:
            from auger.engine.agents.backend_turn import BackendTurn

            turn = BackendTurn(self.turn_context(new_hex(12)), self, self.backends.link(),
                               interrupt_reason=lambda: self.interrupt_reason)
        else:
            turn = Turn(self.turn_context(new_hex(12)), self, compact_only=compact_only,
                        interrupt_reason=lambda: self.interrupt_reason, parked=lambda: self._parked is not None,
                        open_calls=open_calls)
        self._launch(turn.id, turn.run if compact_only else self.goal.wrap(turn.id, turn.run), titled=True)

    def _start_user_shell(self, command: str) -> None:
        from auger.engine.session.user_shell import run_user_shell

        turn_id = new_hex(12)
        self._launch(turn_id, lambda: run_user_shell(self.runtime, self, turn_id=turn_id, command=command,
                                                     interrupt_reason=lambda: self.interrupt_reason))

    def _launch(self, turn_id: str, body: Callable[[], Awaitable[tuple[str, str | None]]], *,
                titled: bool = False) -> None:
        """Run `body` as the session's turn: one at a time, interruptible, its completion an op."""
        self._turn_id = turn_id
        self._turn = asyncio.create_task(self._run_turn(turn_id, body, titled), name=f"turn-{turn_id}")
        self._turn.add_done_callback(lambda task: self._ops.put_nowait((_TurnFinished(task), None)))

    async def _run_turn(self, turn_id: str, body: Callable[[], Awaitable[tuple[str, str | None]]],
                        titled: bool) -> None:
        """Run a turn's body, then its end (the turn's changes, the turn_end hooks): exactly one turn_ended
        whatever fails or is cancelled on the way. A store that cannot be written (a full disk) ends the
        turn as an error in its own words; anything else that escapes is an engine bug, logged."""
        self.emit(TurnStarted(turn_id))
        reason: str = "cancelled"  # unless the body returns
        message: str | None = self.interrupt_reason
        try:
            try:
                reason, message = await body()
            except Exception as exc:
                reason, message = "error", _failure_message(exc, f"turn {turn_id}")
            if self.changes is not None:
                await self.changes.end_turn(turn_id)
            await self._hook("turn_end", {"turn_id": turn_id, "reason": reason, "message": message},
                             lambda text: self.emit(WarningEvent(text, turn_id)), turn_id)
        except Exception as exc:  # the turn's end could not be recorded: it did not complete
            failure = _failure_message(exc, f"end of turn {turn_id}")
            if reason == "complete":
                reason, message = "error", failure
        finally:
            self.emit(TurnEnded(turn_id, TurnEndReason(reason), message))
        if titled and reason == "complete" and self._title_task is None and self.workspace.config.generate_titles:
            self._title_task = asyncio.create_task(self._generate_title(), name=f"title-{self.id}")

    async def _generate_title(self) -> None:
        """A short title from the first exchange, in the background, on the small model where one is set; a
        failure only leaves the provisional one. Its usage is the session's, charged to no turn."""
        from auger.engine.session.titles import generate_title

        small, _ = self.models.small()
        try:
            title, reply = await generate_title(small or self.client, self.history.items)
            if reply is not None:
                await self.charge_reply(CONTEXT_TURN, reply, "title")
        except Exception:  # never let a title affect the session
            log.debug("title generation failed", exc_info=True)
            return
        if title and self.shared.secrets is not None:
            title = self.shared.secrets.text(title, outside=False)
        if title:
            self.meta.title = title
            await self.store.update_session(self.id, title=title)
            self.emit(SessionTitle(title))

    async def charge_reply(self, turn_id: str, reply: Reply, purpose: str) -> None:
        """Charge a call made for a small job (a title, a goal check) with the model that made it, to the turn
        (`turn_id`) or to no turn (CONTEXT_TURN: a title, written after its turn), and say so in a token_usage
        event."""
        from auger.models.registry import model_info

        cost = model_info(reply.model, self.workspace.config, reply.provider).cost(reply.usage)
        self.ledger.add(reply.usage, cost, turn=turn_id != CONTEXT_TURN)
        await self.store.record_usage(self.id, turn_id, reply.model, reply.usage, purpose)
        self.emit(self.ledger.report(turn_id, reply.usage, self.context_estimate(), self.limits.window,
                                     model=reply.model, duration_ms=reply.duration_ms, purpose=purpose))

    async def _shutdown(self) -> None:
        """End everything the session holds, then say so. Each step runs even when one before it failed (a
        full disk while recording the worktree's changes must not leave a sandbox or a server running)."""
        self._closed = True
        try:
            for step in (self._stop_work, self._report_worktree, self.backends.aclose, self._close_code_intel,
                         self._close_changes, self.runtime.router.close, self._close_sandbox):
                try:
                    await step()
                except Exception as exc:
                    self.emit(WarningEvent(_failure_message(exc, f"shutdown of session {self.id}")))
        finally:
            let_go(self.id)
            self.emit(ShutdownComplete())

    async def _stop_work(self) -> None:
        """Stop what runs: the title, the turn, the sub-agents, background commands."""
        if self._title_task is not None and not self._title_task.done():
            self._title_task.cancel()
            await asyncio.gather(self._title_task, return_exceptions=True)
        if self._turn is not None and not self._turn.done():
            self._turn.cancel()
            await asyncio.gather(self._turn, return_exceptions=True)
        if self.agents is not None:
            await self.agents.cancel_all("the session ended")
        await end_processes(self.runtime.state)

    async def _close_code_intel(self) -> None:
        """Stop the language servers (before the sandbox they run in)."""
        if self.code_intel is not None:
            await self.code_intel.close()

    async def _close_changes(self) -> None:
        """Close the snapshots (and start the daily clean-up) and the pending copy."""
        if self.changes is not None:
            await self.changes.close()
            from auger.config import home_dirs
            from auger.engine.session.snapshot_gc import start_background_gc

            start_background_gc(home_dirs()["data"], self.workspace.config)  # at most once a day, detached
        if self.pending is not None:
            await self.pending.close()

    async def _close_sandbox(self) -> None:
        """Close the sandbox, remove the scratch dir, stop asking for the window, close the model client."""
        await self._window.aclose()
        if self.confinement is not None:
            await self.confinement.close()
        shutil.rmtree(self.runtime.state.scratch_dir, ignore_errors=True)
        try:
            await self.client.aclose()
            await self.models.aclose()
        except Exception:  # closing a broken connection must not block shutdown
            log.debug("client close failed", exc_info=True)

    async def _open_agents(self, resumed: bool, warnings: list[str]) -> None:
        """Offer the sub-agent tools; the pool that runs them (engine/agents/subagents.py) is made at their first
        call. On resume, tell the model which children died with the last process."""
        from auger.context.agents import discover_agents
        from auger.tools.agents import SOURCE, OnDemand, agent_toolset

        config = self.workspace.config
        self.agent_index = discover_agents(self.workspace.root, self.workspace.config_dir, base_mode=config.mode)
        warnings.extend(self.agent_index.warnings)
        tools = agent_toolset(lambda: self.agent_pool().root, self.agent_index.describe())
        await self.runtime.router.registry.add(
            SOURCE, OnDemand(tools, lambda: self.agents is not None and bool(self.agents.root.children)))
        if resumed:
            await self.agent_pool().report_interrupted(self.record)

    def agent_pool(self) -> AgentPool:
        """The session's sub-agents, made at the first agent tool call (or on resume)."""
        if self.agents is None:
            from auger.engine.agents.subagents import AgentPool

            self.agents = AgentPool(self, lambda session_id: _Archive(self.store, session_id), self.agent_index)
            self.runtime.after_mutation.append(self.agents.bump)
        return self.agents
    async def _report_worktree(self) -> None:
        """A session working in a kept worktree (`--worktree`, changes/worktree.py) says at its end what it
        changed there against the base, and records it, so the user can apply or discard it."""
        from auger.changes.worktree import WorktreeError, describe, open_worktree
        from auger.config import home_dirs

        worktree = open_worktree(self.workspace.root, home_dirs()["data"])
        if worktree is None or not worktree.persistent:  # not one, or a sub-agent's: its parent decides
            return
        try:
            found, text = await worktree.changes_async()
        except WorktreeError as exc:
            self.emit(WarningEvent(str(exc)))
            return
        if found:
            files = [it.ChangedFile(**dataclasses.asdict(change)) for change in found]
            await self.record(CONTEXT_TURN, it.WorktreeChanges(str(worktree.path), str(worktree.project),
                                                               worktree.base_commit, files, text))
        short = self.id[:8]
        self.emit(WarningEvent(describe(worktree, found) + (
            f"\napply it to {worktree.project} with `auger worktree apply {short}`, "
            f"or drop it with `auger worktree discard {short}`" if found else "")))

    async def wait_closed(self) -> None:
        if self._loop_task is not None:
            await self._loop_task
        await self._stream.saved()
        if self._followers:
            await asyncio.wait(self._followers, timeout=FOLLOWER_GRACE)


def _writable_roots(project: Path, tools_root: Path, own: tuple[Path, ...], confinement) -> WritableRoots:
    """The session's writable roots, none granted yet: judged against the project (and the copy the tools
    work on in pending mode), the user's homes and their credential paths, and auger's own files; bound
    in the session's sandbox when it has one."""
    from auger.policy.sandbox import default_hidden, user_homes

    homes = user_homes(os.environ)
    hidden = [path for home in homes for path in default_hidden(home)]
    return WritableRoots(projects=(project, tools_root), homes=homes, own=own, hidden=hidden,
                         bind=confinement.add_writable if confinement is not None else None)


def _failure_message(exc: Exception, where: str) -> str:
    """What a failure tells the client: a store that cannot be written (a full disk) in its own words;
    anything else is an engine bug, logged with its traceback and reported as an internal error."""
    if isinstance(exc, StoreError):
        log.debug("%s: %s", where, exc)
        return str(exc)
    log.error("%s failed", where, exc_info=exc)
    return f"internal error: {type(exc).__name__}: {exc}"


@dataclass
class _Waiting(Deferred):
    """An approval request waiting for its answer: what resolves it, what may answer it, how it was asked."""

    future: asyncio.Future[ApprovalDecision]
    options: list[str]
    request: Envelope


_ANSWERS_KEPT = 256  # answered request ids remembered, so a late answer hears who was first


class _TurnFinished:
    """Internal op: a turn task has ended."""

    def __init__(self, task: asyncio.Task[None]) -> None:
        self.task = task


@dataclass
class _Park(Deferred):
    """Internal op (`Session.park`): stop the turn to wait for the answer to `request_id`."""

    request_id: str


@dataclass
class _Continue(Deferred):
    """Internal op (`Session.continue_parked`): the answer a parked turn waited for has come."""

    answer: ApprovalDecision


_Internal = _TurnFinished | _Park | _Continue  # ops only the engine and its embedders' methods make, never a client
PARKED = "parked: waiting for an answer to approval {request}; the session waits holding no process"


class _Archive:
    """Gives `recall` this session's stored outputs, and nothing of other sessions."""

    def __init__(self, store: Store, session_id: str) -> None:
        self._store = store
        self._session_id = session_id

    async def get_output(self, call_id: str):
        return await self._store.get_output(self._session_id, call_id)

    async def list_outputs(self):
        return await self._store.list_outputs(self._session_id)

    async def search_messages(self, query: str) -> list[tuple[str, str]]:
        found = await self._store.search_messages(self._session_id, query)
        labels = {"user_message": "user", "assistant_message": "assistant", "compaction": "summary"}
        return [(f"{labels[item.TYPE]} message #{seq}",
                 str(getattr(item, "text", None) or getattr(item, "summary", ""))) for seq, item in found]
