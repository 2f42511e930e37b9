"""SessionManager: how sessions come to be — created, resumed, forked, listed — and `run_prompt`,
the one driver that submits a prompt, follows the events to the turn's end and shuts down.

Every front end (the CLI, the demo, tests, a future server) opens sessions here, so the resume
policy (engine/session/resume.py), the repair of a session that died mid-call and the observers the user
configured (auger/observe: the notify program, telemetry) are applied once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import AsyncIterator, Callable

from auger import start_gc
from auger.engine.turn.accounting import UsageLedger
from auger.engine.turn.history import INTERRUPTED_OUTPUT, History, latest_plan
from auger.engine.session.resume import check_client, resume_client, resume_config
from auger.engine.session.session import Session, hold, let_go
from auger.engine.workspace import Workspace
from auger.ids import new_uuid
from auger.models.base import ModelClient
from auger.models.registry import stored_usage
from auger.protocol.envelope import Envelope
from auger.protocol.events import (
    AgentMessage, BackendChanged, Event, GoalEnded, ModelChanged, TurnEnded, WarningEvent,
)
from auger.protocol.items import ToolOutput, UserMessage
from auger.protocol.ops import Shutdown, UserTurn
from auger.store.base import SessionRecord, Store, StoreError


class SessionNotFound(LookupError):
    pass


class SessionManager:
    """Opens the sessions of one workspace in one store; many sessions may run at once."""

    def __init__(self, workspace: Workspace, store: Store) -> None:
        self.workspace = workspace
        self.store = store
        start_gc.running_sessions()

    async def list(self, limit: int = 50) -> list[SessionRecord]:
        """This workspace's conversations, newest first."""
        return await self.store.list_sessions(limit, cwd=str(self.workspace.root))

    async def create(self, client: ModelClient, *, mode: str | None = None, interactive: bool = False,
                     pending: bool = False, backend: str | None = None, created_by: str = "") -> Session:
        """A new session; `pending` (or config `pending`) queues its file changes for review (changes/pending.py);
        `backend` names another agent to run its turns (backends/); `created_by` names who asked for it (a
        server's user), for the record."""
        now = time.time()
        record = SessionRecord(id=new_uuid(), created=now, updated=now, cwd=str(self.workspace.root),
                               provider=client.provider, model=client.model, mode=mode or self.workspace.config.mode,
                               created_by=created_by)
        await self.store.create_session(record)
        hold(record.id)
        try:
            session = await Session.open(self.workspace, store=self.store, client=client, meta=record,
                                         history=History(), interactive=interactive, pending=pending)
        except BaseException:
            let_go(record.id)
            raise
        self._observe(session)
        return await self._with_backend(session, backend)

    async def fork(self, source_id: str, *, client: ModelClient | None = None, switch: bool = False,
                   before_user_message: int | None = None, mode: str | None = None,
                   interactive: bool = False, pending: bool = False, backend: str | None = None,
                   created_by: str = "") -> Session:
        """A new session starting from a copy of another's history, optionally cut just before its
        Nth user message (1-based), with what that history had used and cost (inherited: shown apart from
        the fork's own, counted by its budgets). The source is left untouched. The model follows the
        resume policy (see `resume`): the source's, unless `switch` accepts another client's."""
        store = self.store
        source = await self._record(source_id)
        if client is None:
            client = resume_client(source, resume_config(source, self.workspace.config))
        check_client(source, client, switch=switch)
        cut = None
        if before_user_message is not None:
            seqs = [s.seq for s in await store.load_items(source.id) if isinstance(s.item, UserMessage)]
            if not 1 <= before_user_message <= len(seqs):
                raise ValueError(f"session {source.id[:8]} has {len(seqs)} user messages; "
                                 f"cannot cut before message {before_user_message}")
            cut = seqs[before_user_message - 1]
        now = time.time()
        record = SessionRecord(id=new_uuid(), created=now, updated=now, cwd=source.cwd,
                               provider=client.provider, model=client.model, mode=mode or source.mode,
                               title=f"fork of {source.title or source.id[:8]}"[:80], created_by=created_by)
        await store.create_session(record)
        await store.copy_history(source.id, record.id, cut)
        await _copy_pending(store, source.id, record.id, whole=cut is None)
        return await self.resume(record.id, client=client, mode=mode, interactive=interactive, pending=pending,
                                 backend=backend)

    async def resume(self, session_id: str, *, client: ModelClient | None = None, switch: bool = False,
                     mode: str | None = None, interactive: bool = False, pending: bool = False,
                     backend: str | None = None, parked: bool = False) -> Session:
        """Continue a stored session with its full history.

        The model is the one the session was recorded with (engine.resume): with no `client`, it is built
        from the record, and resuming is refused (ResumeRefused) if that provider cannot be used here. A
        `client` for another provider or model is accepted only with `switch=True`; the switch is then
        recorded. Calls that never got an output (the process died mid-call) are closed with an
        "interrupted" output, recorded, so the model knows and the API accepts it — unless the session was
        `parked` (Session.park): its open calls wait for `Session.continue_parked`. A session with queued
        pending changes resumes in pending mode whatever `pending` says.
        """
        record = await self._record(session_id)
        hold(record.id)  # before anything is written to it: refused if it is open in this process
        try:
            return await self._resume(record, client=client, switch=switch, mode=mode, interactive=interactive,
                                      pending=pending, backend=backend, parked=parked)
        except BaseException:
            let_go(record.id)
            raise

    async def _resume(self, record: SessionRecord, *, client: ModelClient | None, switch: bool, mode: str | None,
                      interactive: bool, pending: bool, backend: str | None, parked: bool) -> Session:
        store = self.store
        recorded = await recorded_backend(store, record.id)
        if client is None:
            config = resume_config(record, self.workspace.config)
            agent = backend if backend is not None else config.backend if config.backend is not None else recorded
            if agent:  # another agent runs the turns: auger's own model may be unset here (models/unconfigured)
                config = dataclasses.replace(config, backend=agent)
            client = resume_client(record, config)
        previous = (record.provider, record.model)
        switched = check_client(record, client, switch=switch)
        stored = await store.load_items(record.id)
        history = History(s.item for s in stored)
        last_turn = stored[-1].turn_id if stored else "resume"
        for call in [] if parked else history.unanswered_calls():
            output = ToolOutput(call.call_id, INTERRUPTED_OUTPUT, ok=False)
            await store.append(record.id, last_turn, output, tool_name=call.name, arguments=call.arguments)
            history.append(output)
        if mode:
            record.mode = mode
        if switched or mode:
            record.provider, record.model = client.provider, client.model
            await store.update_session(record.id, provider=record.provider, model=record.model, mode=record.mode)
        prices = self.workspace.config
        own, cost = await stored_usage(store, record.id, prices)
        inherited, inherited_cost = await stored_usage(store, record.id, prices, inherited=True)
        ledger = UsageLedger(own, cost, inherited=inherited, inherited_cost=inherited_cost)
        session = await Session.open(self.workspace, store=store, client=client, meta=record, history=history,
                                     interactive=interactive, resumed=True, ledger=ledger,
                                     plan=latest_plan(history.items), pending=pending)
        self._observe(session)
        if switched:
            session.emit(ModelChanged(client.provider, client.model, *previous))
        if backend is None:  # asked for (--backend, config), else the agent the session last handed its turns to
            configured = self.workspace.config.backend
            backend = configured if configured is not None else recorded
        if backend == "" and recorded:  # taken back from the agent: recorded, so later resumes know
            await session.set_backend("")
        return await self._with_backend(session, backend)

    def _observe(self, session: Session) -> None:
        """Attach the observers the user's config asks for (auger/observe); they follow the envelopes only."""
        from auger.observe import observers

        for follower in observers(self.workspace.config, lambda message: session.emit(WarningEvent(message))):
            session.follow(follower)

    async def _with_backend(self, session: Session, backend: str | None) -> Session:
        """Hand the session's turns to an agent (auger/backends): the one named, else the configured one."""
        name = self.workspace.config.backend if backend is None else backend
        if name:
            await session.set_backend(name)
        return session

    async def _record(self, session_id: str) -> SessionRecord:
        record = await self.store.get_session(session_id)
        if record is None:
            raise SessionNotFound(f"no stored session matches '{session_id}'; list them with `auger sessions`")
        return record


async def _copy_pending(store: Store, source_id: str, fork_id: str, *, whole: bool) -> None:
    """A fork of a session in pending mode gets its own copy of the queue, so the changes its copied history
    speaks of are there (and it resumes in pending mode). A fork cut short keeps only the changes of calls
    in the part it copied."""
    from auger.protocol.items import ToolCall

    entries = await store.load_pending(source_id)
    if not entries:
        return
    calls = None if whole else {s.item.call_id for s in await store.load_items(fork_id) if isinstance(s.item, ToolCall)}
    for entry in entries:
        if calls is None or entry.call_id in calls:
            await store.add_pending(fork_id, entry.path, entry.before_hash, entry.content, entry.mode,
                                    agent=entry.agent, call_id=entry.call_id, tool=entry.tool)


async def recorded_backend(store: Store, session_id: str) -> str | None:
    """The agent a stored session last handed its turns to ("" when it was taken back; None: never)."""
    last = await store.last_event(session_id, "backend_changed")
    return last.event.backend if last is not None and isinstance(last.event, BackendChanged) else None


async def run_prompt(session: Session, *prompts: UserTurn | str, turns: int | None = None,
                     on_event: Callable[[Session, Event], None] | None = None,
                     on_envelope: Callable[[Envelope], None] | None = None,
                     wait_for: type[Event] | None = None) -> list[TurnEnded]:
    """Drive a session to the end of its work, then shut it down and wait until it has.

    Each prompt is submitted once the previous turn ended (a goal run's, once its last turn ended). After
    `turns` turns (default: one per prompt; a goal run counts as one) — and, given `wait_for`, once such an
    event arrived too (a background title) — the session is shut down. Every event goes to `on_envelope`
    (in its envelope) and `on_event` first.
    Returns the TurnEnded events. When the store fails (a full disk), nothing more can be shown: the
    session is shut down all the same (its sandbox, servers and agents end) and the StoreError raised."""
    queue = [p if isinstance(p, UserTurn) else UserTurn(p) for p in prompts]
    wanted = len(queue) if turns is None else turns
    in_goal = False  # a goal run's prompt counts once its run ended (engine/session/goal_loop.py), not per turn

    def submit_next() -> None:
        nonlocal in_goal
        prompt = queue.pop(0)
        in_goal = prompt.until is not None or prompt.goal is not None
        session.submit(prompt)

    if queue:
        submit_next()
    ended: list[TurnEnded] = []
    counted = 0  # prompts done
    waited = wait_for is None
    stopping = False
    try:
        async for envelope in session.subscribe():
            event = envelope.event
            if on_envelope is not None:
                on_envelope(envelope)
            if on_event is not None:
                on_event(session, event)
            done = False
            if envelope.parent_call_id is not None:  # a sub-agent's turn is not one of these
                pass
            elif isinstance(event, GoalEnded) and in_goal:
                in_goal = False
                done = event.turn_id is None  # refused: no turn ran, and none will end
            elif isinstance(event, TurnEnded):
                ended.append(event)
                done = not in_goal
            if done:
                counted += 1
                if queue and counted < wanted:
                    submit_next()
            waited = waited or (wait_for is not None and isinstance(event, wait_for))
            if counted >= wanted and waited and not stopping:
                stopping = True
                session.submit(Shutdown())
    except StoreError:
        with contextlib.suppress(RuntimeError):  # already shutting down
            session.submit(Shutdown())
        await session.wait_closed()
        raise
    await session.wait_closed()  # stored, and its observers done with shutdown_complete
    return ended


class TurnIncomplete(Exception):
    """A turn `reply_of` drove ended without completing; the message says how, `reply` is the model's last
    words in it ("" for none)."""

    def __init__(self, message: str, reply: str) -> None:
        super().__init__(message)
        self.reply = reply


async def reply_of(session: Session, stream: AsyncIterator[Envelope], text: str,
                   on_envelope: Callable[[Envelope], None] | None = None) -> str:
    """Run one turn on `text` and return the text of its last reply, following `stream` (the session's
    subscription, kept by the caller across turns); TurnIncomplete when the turn did not complete. A
    sub-agent's messages and turn end (their envelopes name the spawn call) are not the turn's."""
    session.submit(UserTurn(text))
    reply = ""
    async for envelope in stream:
        if on_envelope is not None:
            on_envelope(envelope)
        event = envelope.event
        if envelope.parent_call_id is not None:
            continue
        if isinstance(event, AgentMessage):
            reply = event.text
        elif isinstance(event, TurnEnded):
            if event.reason != "complete":
                raise TurnIncomplete(f"turn ended ({event.reason}): {event.message or 'no reason given'}", reply)
            return reply
    raise TurnIncomplete("session ended before its turn did", reply)
