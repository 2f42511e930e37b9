"""The sessions `auger serve` runs: opened once, leased, within the roots and the mode ceiling, followed
for the session list, and shut down together.

A client may see more than the server opens. Sessions within the roots are seen and opened; a fleet
task's session is seen and answered wherever its checkout is (on a worker's machine), but never opened,
forked or resumed here: whatever the server opens — a new session, a fork, a stored one resumed by an op
or by `/acp` — works inside its roots (`Hub.open_refusal`).

The Hub is the one place that knows which sessions this server has open, however they were opened: the
ACP agent on `/acp` opens its own through its SessionManager and tells the Hub of each (`adopt`), so they
are in the session list, its stream and the routes like any other.

A session is open at most once across processes: this server takes the store's lease before opening
one, so a session `auger exec` (or another server) runs is refused (409) rather than run twice, and
within the process `SessionManager.resume` refuses a second opening. Opening is serialised per
session, so two requests that race to open the same stored session open it once.

A session may also be handed over (`hand_over`): opened now if no process holds it, else adopted as soon
as the process that runs it lets it go — a terminal at its turn's end, told by a note in the store. While
it waits, its clients' ops are left in the store for that process (frontends/relay.py); what is still
there when the server opens it, the server applies.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from typing import TYPE_CHECKING, Any, AsyncGenerator, Callable

from auger.protocol import events as ev
from auger.protocol.ops import Interrupt, Shutdown
from auger.store.base import log_failure

if TYPE_CHECKING:
    from auger.config import Config
    from auger.engine.session.session import Session
    from auger.store.base import SessionRecord, Store

log = logging.getLogger("auger.serve")

MODE_ORDER = ("plan", "safe", "auto")  # from the strictest; the server's mode is the most a client may ask for
LIST_BUFFER = 256  # coarse events a list subscriber may have unread before it is dropped
ADOPT_POLL_S = 0.25  # how often a session being handed over is tried while another process holds it
DRAIN_S = 10.0  # how long shutdown waits for each session to record its interrupted turn


class Refused(Exception):
    """A request the server will not carry out: an HTTP status and a one-line reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Roots:
    """The directories sessions may work in (resolved, symlinks followed)."""

    def __init__(self, roots: list[str]) -> None:
        self.paths = [os.path.realpath(r) for r in roots]

    def contains(self, path: str) -> bool:
        real = os.path.realpath(path)
        return any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in self.paths)

    def project(self, cwd: Any) -> str:
        """A client's cwd as a project directory inside a root (403 outside, 400 when it is no directory)."""
        if not isinstance(cwd, str) or not cwd or "\x00" in cwd or not os.path.isabs(cwd) or len(cwd) > 4096 \
                or not _encodable(cwd):
            raise Refused(400, f"cwd must be an absolute path to a project directory, not {cwd!r:.200}")
        real = os.path.realpath(cwd)
        if not self.contains(real):
            raise Refused(403, f"cwd {cwd!r:.200} is outside the directories this server may work in")
        if not os.path.isdir(real):
            raise Refused(400, f"cwd {cwd!r:.200} is not an existing directory")
        return real


def _encodable(text: str) -> bool:
    """Whether a file name can hold `text` (a lone surrogate cannot be encoded)."""
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        return False
    return True


class Broadcast:
    """Coarse events to any number of followers, each with a bounded queue: one that falls behind is
    dropped (its stream ends), never slowing the others."""

    def __init__(self) -> None:
        self._queues: set[asyncio.Queue[dict[str, Any] | None]] = set()

    def publish(self, event: dict[str, Any]) -> None:
        for queue in list(self._queues):
            try:
                queue.put_nowait(event)
            except asyncio.QueueFull:
                self._queues.discard(queue)
                queue.get_nowait()
                queue.put_nowait(None)  # ends that follower

    async def subscribe(self) -> AsyncGenerator[dict[str, Any], None]:
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(LIST_BUFFER)
        self._queues.add(queue)
        try:
            while (event := await queue.get()) is not None:
                yield event
        finally:
            self._queues.discard(queue)


class Hub:
    """The open sessions, by id, and how they come to be open."""

    def __init__(self, store: Store, config_for: Callable[[str], Config], roots: Roots, mode: str) -> None:
        self.store = store
        self.config_for = config_for  # a project dir -> its effective config (the server's flags on top)
        self.roots = roots
        self.mode = mode  # the ceiling
        self.list_events = Broadcast()
        self._sessions: dict[str, Session] = {}
        self._opening: dict[str, asyncio.Lock] = {}
        self._opened: dict[str, asyncio.Event] = {}
        self._followers: set[asyncio.Task[None]] = set()
        self._adopting: dict[str, asyncio.Task[None]] = {}
        self.closing = False

    # -- reading ------------------------------------------------------------------------
    def live(self, session_id: str) -> Session | None:
        """The session if it is open here and has not shut down."""
        session = self._sessions.get(session_id)
        return session if session is not None and not session.shut_down else None

    async def wait_opened(self, session_id: str, timeout: float) -> None:
        """Return when the session is opened here, when the store says its events grew (a PostgreSQL
        store is told at once; SQLite is not), or after `timeout`."""
        opened = self._opened.setdefault(session_id, asyncio.Event())
        waits = {asyncio.ensure_future(opened.wait()), asyncio.ensure_future(self.store.wait_events(session_id,
                                                                                                  timeout))}
        try:
            await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()

    async def record(self, session_id: str) -> SessionRecord:
        """The stored session named exactly by `session_id`, within the roots (404 otherwise; a string no
        session id looks like never reaches the store)."""
        from auger.store.base import is_session_id

        record = await self.store.get_session(session_id) if is_session_id(session_id) else None
        if record is None or record.id != session_id or not await self.visible(record):
            raise Refused(404, f"no session has the id {session_id!r:.80}")
        return record

    async def visible(self, record: SessionRecord) -> bool:
        """Whether clients may see the session: it works within the roots, or it is a fleet task's (its
        checkout is on a worker's machine, beyond any root here; it is seen and answered, never opened)."""
        return self.roots.contains(record.cwd) or await self.runs_in_fleet(record.id)

    async def open_refusal(self, record: SessionRecord) -> str | None:
        """Why this server may not open, fork or resume the session (None: it may): its directory is outside
        the roots, or a fleet task owns it (its worker runs it, in a checkout no root here contains)."""
        if await self.runs_in_fleet(record.id):
            return (f"session {record.id} is a fleet task's: it is followed and answered here, never opened, "
                    "forked or resumed (its checkout is on a worker's machine)")
        if not self.roots.contains(record.cwd):
            return f"session {record.id} works in {record.cwd}, outside the directories this server may work in"
        return None

    async def _refuse_to_open(self, record: SessionRecord) -> None:
        why = await self.open_refusal(record)
        if why is not None:
            raise Refused(403, why)

    async def runs_in_fleet(self, session_id: str) -> bool:
        tasks = self._tasks()
        return tasks is not None and await tasks.owns_session(session_id)

    async def parked_task(self, session_id: str) -> str | None:
        """The id of the waiting task whose session this is (parked at an approval), or None."""
        tasks = self._tasks()
        waiting = await tasks.waiting_for(session_id) if tasks is not None else None
        return waiting.id if waiting is not None else None

    def _tasks(self) -> Any:
        """The fleet's tasks table, on a PostgreSQL store; None on SQLite."""
        from auger.store.postgres import PostgresStore

        if not isinstance(self.store, PostgresStore):
            return None
        from auger.fleet.tasks import Tasks

        return Tasks(self.store)

    def permitted(self, mode: Any) -> str:
        if mode not in MODE_ORDER:
            raise Refused(400, f"unknown mode {mode!r:.40}; auger's modes are {', '.join(MODE_ORDER)}")
        if MODE_ORDER.index(mode) > MODE_ORDER.index(self.mode):
            raise Refused(403, f"mode {mode!r} is more permissive than this server allows ({self.mode!r})")
        return str(mode)

    async def snapshot(self, record: SessionRecord) -> dict[str, Any]:
        """The session's record and its state now: what a client needs to draw it before following its
        events after `last_seq` (a reload shows the approvals still waiting)."""
        from auger.engine.session.sessions import recorded_backend

        session = self.live(record.id)
        pending = len(await self.store.load_pending(record.id))
        if session is not None:
            running = session.running_turn_id
            state = {"open": True, "last_seq": session.last_seq, "running_turn": running,
                     "pending_approvals": [e.to_json() for e in session.pending_approvals()],
                     "pending_changes": pending, "mode": session.mode, "model": session.client.model,
                     "provider": session.client.provider, "backend": session.backend}
        else:
            running = await self._stored_running_turn(record.id)
            state = {"open": False, "last_seq": await self.store.last_event_seq(record.id), "running_turn": running,
                     "pending_approvals": await self._stored_approvals(record.id) if running
                     else await self._parked_approvals(record.id),
                     "pending_changes": pending, "mode": record.mode, "model": record.model,
                     "provider": record.provider, "backend": await recorded_backend(self.store, record.id) or ""}
        state["turn_started_seq"] = await self._turn_started_seq(record.id, running)
        return {**describe(record), "cost": await self.cost(record), "state": state}

    async def cost(self, record: SessionRecord) -> float | None:
        """What the session's own model calls cost so far (USD), None when a price is unknown."""
        from auger.models.registry import stored_cost

        return await stored_cost(self.store, record.id, self.config_for(record.cwd))

    async def _turn_started_seq(self, session_id: str, turn_id: str | None) -> int | None:
        """The seq of the running turn's `turn_started`: a client that shows the items so far follows the
        events from just before it, so a reply streaming as it loads is drawn whole."""
        if turn_id is None:
            return None
        started = await self.store.last_event(session_id, "turn_started")
        if started is None or not isinstance(started.event, ev.TurnStarted) or started.event.turn_id != turn_id:
            return None
        return started.seq

    async def _stored_approvals(self, session_id: str) -> list[dict[str, Any]]:
        """The approval requests another process's session still waits on, as the store shows them."""
        waiting: dict[str, dict[str, Any]] = {}
        for envelope in await self.store.load_events(session_id):
            event = envelope.event
            if isinstance(event, ev.ApprovalRequest):
                waiting[event.request_id] = envelope.to_json()
            elif isinstance(event, (ev.ApprovalResolved,)):
                waiting.pop(event.request_id, None)
            elif isinstance(event, ev.TurnEnded) and envelope.parent_call_id is None:
                waiting.clear()
        return list(waiting.values())

    async def _parked_approvals(self, session_id: str) -> list[dict[str, Any]]:
        """The approval a waiting fleet task parked on: no process runs its session, yet it waits for an
        answer (relayed to the task: fleet_routes.answer_parked)."""
        tasks = self._tasks()
        waiting = await tasks.waiting_for(session_id) if tasks is not None else None
        return [waiting.parked["request"]] if waiting is not None and waiting.parked else []

    async def running_turn(self, session_id: str) -> str | None:
        """The id of the turn running in the session now — here, or in another process on the store — or None."""
        live = self.live(session_id)
        return live.running_turn_id if live is not None else await self._stored_running_turn(session_id)

    async def runs_elsewhere(self, session_id: str) -> bool:
        """Whether another process runs the session now (a turn the store shows started, not ended)."""
        return self.live(session_id) is None and await self._stored_running_turn(session_id) is not None

    async def _stored_running_turn(self, session_id: str) -> str | None:
        """A turn the store shows started and not ended (another process runs it), or None."""
        started = await self.store.last_event(session_id, "turn_started")
        if started is None or not isinstance(started.event, ev.TurnStarted):
            return None
        for kind in ("turn_ended", "shutdown_complete"):
            later = await self.store.last_event(session_id, kind)
            if later is not None and later.seq > started.seq:
                return None
        return started.event.turn_id

    def adopting(self, session_id: str) -> bool:
        """Whether the session is being handed over to this server: another process still runs it, and the
        ops its clients send are left in the store for that process."""
        return session_id in self._adopting

    # -- opening ------------------------------------------------------------------------
    async def hand_over(self, record: SessionRecord, url: str) -> bool:
        """Take the session over from whoever runs it: opened now when no process holds it (True), else
        adopted once the process holding it lets it go (False) — told so by a note in the store, which a
        terminal running it acts on at its turn's end. 403 for a session this server may not open."""
        from auger.frontends.relay import handoff_note

        await self._refuse_to_open(record)
        if self.live(record.id) is not None:
            return True
        if record.id in self._adopting:
            return False
        if await self.store.claim(record.id) is None:  # nobody runs it: open it here now
            try:
                await self.open(record.id)
            except Refused:
                await self.store.release(record.id)
                raise
            return True
        await self.store.post_op(record.id, handoff_note(url))
        task = asyncio.create_task(self._take_over(record.id), name=f"serve-adopt-{record.id}")
        self._adopting[record.id] = task
        return False

    async def _take_over(self, session_id: str) -> None:
        """Open the session here as soon as no live process holds its lease, then apply the ops its clients
        sent meanwhile that the process running it did not take."""
        from auger.frontends import relay

        try:
            while not self.closing:
                if await self.store.claim(session_id) is None:
                    break
                await asyncio.sleep(ADOPT_POLL_S)
            else:
                return
            try:
                session = await self.open(session_id)
            except Refused as exc:
                await self.store.release(session_id)
                log.warning("session %s was handed over but cannot be opened here: %s", session_id, exc.message)
                return
            for text in await self.store.take_ops(session_id):
                relayed = relay.read(text)
                problem = relay.apply(session, relayed) if relayed is not None else None
                if problem:
                    log.info("session %s: %s", session_id[:8], problem)
        except Exception as exc:
            log_failure(log, f"session {session_id}: taking it over", exc)
        finally:
            self._adopting.pop(session_id, None)

    async def create(self, cwd: Any, *, mode: Any = None, model: Any = None, provider: Any = None,
                     created_by: str = "") -> Session:
        from auger.models.registry import ProviderError, client_for

        root = self.roots.project(cwd)
        chosen = self.permitted(mode) if mode is not None else self.mode
        config = self._model_config(self.config_for(root), model, provider)
        try:
            client = client_for(config)
        except ProviderError as exc:
            raise Refused(400, str(exc)) from None
        session = await self._manager(root, config).create(client, mode=chosen, interactive=True,
                                                           created_by=created_by)
        await self.store.claim(session.id)
        self._adopt(session, "session_created")
        return session

    async def fork(self, source_id: str, *, mode: Any = None, before: Any = None,
                   before_seq: Any = None, created_by: str = "") -> Session:
        """A copy of a stored session's history — all of it, or what came before one of its user messages:
        the `before`th (1: the first), or the one stored under item seq `before_seq` (a client that paged only
        the newest items names an edited message so)."""
        from auger.engine.session.resume import ResumeRefused

        record = await self.record(source_id)
        await self._refuse_to_open(record)
        chosen = self.permitted(mode) if mode is not None else self._ceiling(record.mode)
        if before is not None and (not isinstance(before, int) or isinstance(before, bool) or before < 1):
            raise Refused(400, f"before must be a user message number >= 1, not {before!r:.40}")
        cut = await self._user_message_number(record.id, before_seq) if before_seq is not None else before
        try:
            session = await self._manager(record.cwd, self.config_for(record.cwd)).fork(
                record.id, mode=chosen, interactive=True, before_user_message=cut, created_by=created_by)
        except (ResumeRefused, ValueError) as exc:
            raise Refused(409, str(exc)) from None
        await self.store.claim(session.id)
        self._adopt(session, "session_created")
        return session

    async def _user_message_number(self, session_id: str, seq: Any) -> int:
        """Which user message (1-based) the item `seq` is; 400 when it is no user message of the session."""
        from auger.protocol.items import UserMessage

        if not isinstance(seq, int) or isinstance(seq, bool):
            raise Refused(400, f"before_seq must be the seq of a user message, not {seq!r:.40}")
        users = [s.seq for s in await self.store.load_items(session_id) if isinstance(s.item, UserMessage)]
        if seq not in users:
            raise Refused(400, f"item {seq} of session {session_id} is not a user message")
        return users.index(seq) + 1

    async def open(self, session_id: str) -> Session:
        """The session, resumed here if it is not open yet (its recorded mode capped at the server's)."""
        live = self.live(session_id)
        if live is not None:
            return live
        if self.closing:
            raise Refused(503, "the server is shutting down")
        lock = self._opening.setdefault(session_id, asyncio.Lock())
        async with lock:
            live = self.live(session_id)
            if live is not None:
                return live
            return await self._resume(await self.record(session_id))

    async def _resume(self, record: SessionRecord) -> Session:
        from auger.engine.session.resume import ResumeRefused
        from auger.engine.session.session import SessionAlreadyOpen

        await self._refuse_to_open(record)
        if not os.path.isdir(record.cwd):
            raise Refused(409, f"session {record.id} was recorded in {record.cwd}, which is no directory any more")
        holder = await self.store.claim(record.id)
        if holder is not None:
            raise Refused(409, f"session {record.id} is running in another auger process ({holder})")
        try:
            session = await self._manager(record.cwd, self.config_for(record.cwd)).resume(
                record.id, mode=self._ceiling(record.mode), interactive=True)
        except SessionAlreadyOpen:
            raise Refused(409, f"session {record.id} is being opened elsewhere in this server (over ACP)") from None
        except (ResumeRefused, ValueError) as exc:
            await self.store.release(record.id)
            raise Refused(409, str(exc)) from None
        self._adopt(session, "session_opened")
        return session

    def _ceiling(self, mode: str) -> str:
        return mode if mode in MODE_ORDER and MODE_ORDER.index(mode) <= MODE_ORDER.index(self.mode) else self.mode

    def check_model(self, root: str, model: str, provider: str | None) -> None:
        """A set_model op names a model and a configured provider (or none: the session's own); 400 otherwise."""
        self._model_config(self.config_for(root), model, provider)

    def _model_config(self, config: Config, model: Any, provider: Any) -> Config:
        """The config with the client's choice of model and provider — a configured provider only: a
        client names one, it never supplies where requests go or which key they carry."""
        from auger.models.registry import ProviderError, registry_for

        for name, value in (("model", model), ("provider", provider)):
            if value is not None and (not isinstance(value, str) or not value.strip() or len(value) > 200):
                raise Refused(400, f"{name} must be a non-empty name of at most 200 characters, not {value!r:.80}")
        if provider is not None:
            try:
                registry_for(config).get(provider)
            except ProviderError as exc:
                raise Refused(400, str(exc)) from None
            base_url = config.base_url if provider == config.provider else None
            config = dataclasses.replace(config, provider=provider, base_url=base_url,
                                         model=model if model is not None else None)
        elif model is not None:
            config = dataclasses.replace(config, model=model)
        return config

    def _manager(self, root: str, config: Config) -> Any:
        from auger.engine.session.sessions import SessionManager
        from auger.engine.workspace import Workspace

        # Approvals here come from the server's clients, not from the person whose rules.toml it is.
        return SessionManager(Workspace.open(root, dataclasses.replace(config, remote_approvals=True)), self.store)

    def share(self, session: Session, *, new: bool = False) -> None:
        """A session another front end of this server opened (an editor over `/acp`, under its lease; `new`:
        created or forked, else a stored one opened): from now on every client drives it, as one this hub
        opened."""
        self._adopt(session, "session_created" if new else "session_opened")

    def _adopt(self, session: Session, kind: str) -> None:
        self._sessions[session.id] = session
        self._opened.pop(session.id, asyncio.Event()).set()  # wake the store readers of this session
        task = asyncio.create_task(self._follow(session), name=f"serve-{session.id}")
        self._followers.add(task)
        task.add_done_callback(self._followers.discard)
        self.list_events.publish({"type": kind, "session_id": session.id, "cwd": str(session.workspace.root),
                                  "title": session.meta.title, "mode": session.mode, "model": session.client.model})

    async def _follow(self, session: Session) -> None:
        """Tell the session list what happens in the session; when it shuts down, let it go. A title set
        without an event of its own (the provisional one, from the first prompt) is told as it is noticed."""
        title = session.meta.title
        try:
            async for envelope in session.subscribe():
                coarse = _coarse(envelope.event)
                childs = envelope.parent_call_id is not None and not isinstance(
                    envelope.event, (ev.ApprovalRequest, ev.ApprovalResolved))  # a sub-agent's turns are not news
                if coarse is not None and not childs:
                    self.list_events.publish({**coarse, "session_id": session.id, "seq": envelope.seq})
                if isinstance(envelope.event, ev.SessionTitle):
                    title = envelope.event.title  # told just now
                if session.meta.title != title:
                    title = session.meta.title
                    self.list_events.publish({"type": "session_updated", "session_id": session.id, "title": title})
        except Exception as exc:
            log_failure(log, f"session {session.id}: following it for the session list", exc)
        finally:
            await session.wait_closed()
            if self._sessions.get(session.id) is session:
                del self._sessions[session.id]
            await self.store.release(session.id)
            self.list_events.publish({"type": "session_closed", "session_id": session.id})

    # -- ending -------------------------------------------------------------------------
    async def drain(self, reason: str = "the server is shutting down") -> None:
        """Interrupt every running turn (recorded as interrupted, with `reason`), shut every session down."""
        self.closing = True
        for adopting in list(self._adopting.values()):
            adopting.cancel()
        sessions = [s for s in self._sessions.values() if not s.shut_down]
        for session in sessions:
            try:
                session.submit(Interrupt(reason))
                session.submit(Shutdown())
            except RuntimeError:  # already shutting down
                pass
        if sessions:
            await asyncio.wait([asyncio.ensure_future(s.wait_closed()) for s in sessions], timeout=DRAIN_S)
        if self._followers:
            await asyncio.wait(list(self._followers), timeout=DRAIN_S)


def _coarse(event: ev.Event) -> dict[str, Any] | None:
    """What the session list needs to hear of an event, or None."""
    if isinstance(event, ev.TurnStarted):
        return {"type": "turn_started", "turn_id": event.turn_id}
    if isinstance(event, ev.TurnEnded):
        return {"type": "turn_ended", "turn_id": event.turn_id, "reason": str(event.reason)}
    if isinstance(event, ev.ApprovalRequest):
        return {"type": "approval_waiting", "request_id": event.request_id, "message": event.message}
    if isinstance(event, ev.ApprovalResolved):
        return {"type": "approval_resolved", "request_id": event.request_id,
                "decision": None if event.decision is None else str(event.decision), "by": event.by}
    if isinstance(event, ev.SessionTitle):
        return {"type": "session_updated", "title": event.title}
    if isinstance(event, ev.ModeChanged):
        return {"type": "session_updated", "mode": str(event.mode)}
    if isinstance(event, ev.ModelChanged):
        return {"type": "session_updated", "model": event.model, "provider": event.provider}
    return None


def describe(record: SessionRecord) -> dict[str, Any]:
    return {"id": record.id, "title": record.title, "cwd": record.cwd, "created": record.created,
            "updated": record.updated, "provider": record.provider, "model": record.model, "mode": record.mode,
            "items": record.items, "created_by": record.created_by}
