"""The Store contract: sessions, their items (committed one by one), full tool outputs, usage.

Every method raises `StoreError` (never the database's own exceptions) when the store cannot do what
it was asked, so callers can tell a full disk from a bug."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Callable, Protocol

from auger.lazy_dataclass import Deferred, dataclass
from auger.lazy_regex import lazy_compile
from auger.protocol.envelope import Envelope
from auger.protocol.events import Usage
from auger.protocol.items import Item

if TYPE_CHECKING:
    import logging


class StoreError(Exception):
    """The store cannot be used: the file is unreadable, locked or of a newer schema, or a write failed (a
    full disk). The message names the file and the cause, in one line for the user."""


def log_failure(log: logging.Logger, what: str, exc: BaseException) -> None:
    """Log that `what` failed. A StoreError is an expected failure (a full disk, a database gone) and its
    message says it all: one line, never a traceback. Anything else is a bug, logged with its traceback."""
    if isinstance(exc, StoreError):
        log.error("%s: %s", what, exc)
    else:
        log.error("%s failed", what, exc_info=exc)


@dataclass
class SessionRecord(Deferred):
    id: str
    created: float
    updated: float
    cwd: str
    provider: str
    model: str
    mode: str
    title: str = ""
    items: int = 0
    created_by: str = ""  # who opened it through `auger serve` (a user's name); "" for a local process


_SESSION_ID = lazy_compile(r"[A-Za-z0-9-]{1,64}")
_CURSOR_TIME = lazy_compile(r"[0-9]{1,20}(\.[0-9]{1,20})?(e[+-]?[0-9]{1,3})?")  # what repr() of a time gives


def page_cursor(record: SessionRecord) -> str:
    """Where a listing continues after `record` (its `updated/id`), for `list_sessions(before=…)`."""
    return f"{record.updated!r}/{record.id}"


def listed_sessions_filter(cwd: object | None, before: tuple[float, str] | None,
                           placeholder: str) -> tuple[str, list[object]]:
    """The WHERE clause (and its parameters) of `Store.list_sessions` on either backend: sessions the model
    said something in that are no one's sub-agent, of `cwd` (already encoded for the backend) when given,
    after the `before` (updated, id) cursor when given. `placeholder`: the driver's ("?" or "%s")."""
    where = ["EXISTS (SELECT 1 FROM items r WHERE r.session_id = s.id AND r.type IN "
             "('assistant_message', 'tool_call', 'reasoning'))",
             "NOT EXISTS (SELECT 1 FROM session_links l WHERE l.child_id = s.id)"]
    params: list[object] = []
    if cwd is not None:
        where.append(f"s.cwd = {placeholder}")
        params.append(cwd)
    if before is not None:
        where.append(f"(s.updated < {placeholder} OR (s.updated = {placeholder} AND s.id < {placeholder}))")
        params += [before[0], before[0], before[1]]
    return " AND ".join(where), params


def is_session_id(text: object) -> bool:
    """Whether `text` could name a session (a UUID as auger makes them, or an id of that alphabet), so a
    client's NUL, `%` or megabyte of text never reaches a store's query."""
    return isinstance(text, str) and _SESSION_ID.fullmatch(text) is not None


def parse_page_cursor(cursor: object) -> tuple[float, str]:
    """A cursor `page_cursor` gave, as `list_sessions`' `before`; ValueError for anything else."""
    updated, _, session_id = cursor.partition("/") if isinstance(cursor, str) else ("", "", "")
    when = float(updated) if _CURSOR_TIME.fullmatch(updated) else float("nan")
    if not is_session_id(session_id) or when != when or when in (float("inf"), float("-inf")):
        raise ValueError(f"not a listing cursor: {cursor!r:.80}")
    return when, session_id


@dataclass
class StoredItem(Deferred):
    seq: int
    turn_id: str
    item: Item


@dataclass
class LinkRecord(Deferred):
    """A sub-agent's session and where it came from: its parent session and the parent's spawn call."""

    child_id: str
    parent_id: str
    parent_call_id: str
    agent: str
    status: str  # queued | running | completed | failed | cancelled | interrupted


@dataclass(frozen=True)
class PendingRecord(Deferred):
    """One queued change to one file (changes/pending.py): what the file becomes, and on what it was based."""

    seq: int  # per session, never reused (rewind names it)
    path: str  # relative to the project root
    before_hash: str  # sha256 of the file on disk when proposed, or "absent"
    content: bytes | None  # the new content; None: the file is deleted
    mode: int | None  # permission bits of the new content
    agent: str  # who proposed it: the agent ...
    call_id: str  # ... and its tool call
    tool: str
    created: float


class PendingStore(Protocol):
    """The queue of pending changes. Settled entries (applied, discarded, rewound) are kept, marked, so
    sequence numbers are never reused and the history of a review stays readable."""

    async def add_pending(self, session_id: str, path: str, before_hash: str, content: bytes | None,
                          mode: int | None, agent: str, call_id: str, tool: str) -> int:
        """Queue one change durably; returns its sequence number."""
    async def load_pending(self, session_id: str) -> list[PendingRecord]:
        """The session's unsettled entries, oldest first."""
    async def settle_pending(self, session_id: str, seqs: list[int], state: str) -> None:
        """Take entries out of the queue, marked `state` ("applied", "discarded", "rewound")."""


ROLES = ("viewer", "member", "approver", "admin")  # each may do what the one before it may, and more


class UserExists(ValueError):
    """A user of that name exists (or existed: a revoked name is not given again, so the audit stays clear)."""


@dataclass(frozen=True)
class UserRecord(Deferred):
    """A person who may use `auger serve`: a name, a role, a token kept only as its hash."""

    name: str
    role: str  # one of ROLES
    created: float
    created_by: str
    revoked: float | None = None


@dataclass(frozen=True)
class AuditRecord(Deferred):
    """One thing someone did (or tried) through `auger serve`: who, what, to what, and how it ended."""

    id: int
    time: float
    actor: str  # the user's name
    action: str  # e.g. session.create, op.user_turn, approval, task.submit, user.revoke
    target: str  # a session id, a task id, a user's name...
    detail: dict[str, object]
    status: int  # the HTTP status it was answered with


class TeamStore(Protocol):
    """The people of a server and the record of what they did. Tokens are never stored: only their
    SHA-256, looked up by it."""

    async def add_user(self, name: str, role: str, token_hash: str, created_by: str) -> UserRecord:
        """A new user; UserExists when the name is taken (revoked names included)."""
    async def user_by_token(self, token_hash: str) -> UserRecord | None:
        """The user whose token has this hash, unless revoked."""
    async def get_user(self, name: str) -> UserRecord | None: ...
    async def list_users(self) -> list[UserRecord]: ...
    async def revoke_user(self, name: str) -> UserRecord | None:
        """Revoke the user's token at once (the record stays, marked); None when no such active user."""
    async def users_changed(self) -> float:
        """When a user was last added or revoked (a cache of tokens reads this to know it is stale)."""
    async def record_audit(self, actor: str, action: str, target: str, detail: dict[str, object],
                           status: int) -> None: ...
    async def load_audit(self, *, before: int | None = None, limit: int = 100, actor: str | None = None,
                         action: str | None = None, target: str | None = None) -> list[AuditRecord]:
        """Entries newest first, with id < `before` when given; `action` matches a whole action or its
        prefix before a dot (`op` finds `op.user_turn`)."""


def audit_filter(before: int | None, actor: str | None, action: str | None, target: str | None,
                 placeholder: str) -> tuple[str, list[object]]:
    """The WHERE clause (and parameters) of `TeamStore.load_audit` on either backend."""
    where: list[str] = []
    params: list[object] = []
    if before is not None:
        where.append(f"id < {placeholder}")
        params.append(before)
    if actor is not None:
        where.append(f"actor = {placeholder}")
        params.append(actor)
    if action is not None:
        where.append(f"(action = {placeholder} OR action LIKE {placeholder})")
        params += [action, action.replace("%", "").replace("_", "") + ".%"]
    if target is not None:
        where.append(f"target = {placeholder}")
        params.append(target)
    return (" AND ".join(where) or "1=1"), params


@dataclass(frozen=True)
class ShareRecord(Deferred):
    """A read-only link to one session: who made it, until when it works, whether it was revoked. Its token
    is never kept: only its hash, looked up by it."""

    id: str
    session_id: str
    created: float
    created_by: str
    expires: float
    revoked: float | None = None

    def live(self, now: float) -> bool:
        return self.revoked is None and now < self.expires


class ShareStore(Protocol):
    """Read-only links to sessions (`auger share`)."""

    async def add_share(self, share_id: str, session_id: str, token_hash: str, created_by: str,
                        expires: float) -> ShareRecord: ...
    async def share_by_token(self, token_hash: str) -> ShareRecord | None:
        """The share whose token has this hash — expired or revoked ones too (the caller says which)."""
    async def get_share(self, share_id: str) -> ShareRecord | None: ...
    async def list_shares(self, session_id: str | None = None) -> list[ShareRecord]:
        """Every share (of one session, when given), newest first."""
    async def revoke_share(self, share_id: str) -> ShareRecord | None:
        """Revoke a share at once (the record stays, marked); None when there is no such unrevoked share."""
    async def shares_changed(self) -> float:
        """When a share was last made or revoked (an open viewer's watch reads this)."""



# The columns of the schedule and intake tables, in the order of their records' fields: both backends select
# and insert them by these lists, so a record built from a row (`ScheduleRecord(*row)`) fits either.
SCHEDULE_COLUMNS = ("id, cadence, tz, missed, spec, queue, priority, max_attempts, paused, next_run, created, "
                    "created_by, last_run, last_target, runs, skipped")
RUN_COLUMNS = "schedule_id, due, state, fired, late, missed, claimed_by, task_id, session_id, error"
DELIVERY_COLUMNS = "intake, delivery_id, received, event, outcome, task_id, session_id, detail"


@dataclass
class ScheduleRecord(Deferred):
    """A schedule as stored: when it is due (`cadence` in `tz`; `next_run` is the next due time), what each run
    is (`spec`: a task's spec as JSON, checked by fleet/policy.py wherever it is read), what a missed run
    becomes (`missed`: skip or once), and what it did so far."""

    id: str
    cadence: str
    tz: str
    missed: str  # skip | once
    spec: str
    queue: str
    priority: int
    max_attempts: int
    paused: bool
    next_run: float
    created: float
    created_by: str = ""
    last_run: float | None = None
    last_target: str | None = None  # the last run's task (PostgreSQL) or session (SQLite)
    runs: int = 0
    skipped: int = 0


@dataclass
class ScheduleRun(Deferred):
    """One due time of a schedule: claimed once (its key is the schedule and the due time), then started —
    as a task, or as a session of `auger serve` — or failed; or skipped, by the missed-run policy."""

    schedule_id: str
    due: float
    state: str  # claimed | started | failed | skipped
    fired: float
    late: bool = False  # fired after its due time had passed (missed runs, policy "once")
    missed: int = 0  # due times that passed unfired before this one was fired or skipped
    claimed_by: str = ""
    task_id: str | None = None
    session_id: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class RunPlan(Deferred):
    """What becomes of a schedule found due (fleet/schedules.py decides): a run for `due` (None: skipped, the
    missed-run policy being skip), whether it is late, how many due times passed unfired, and the next due
    time."""

    due: float | None
    next_run: float
    late: bool = False
    missed: int = 0


class ScheduleStore(Protocol):
    """Schedules and their runs. A run is claimed in the transaction that moves its schedule's `next_run`
    on, under the row's lock, and its (schedule, due) key is unique: however many processes look, each due
    time is claimed once."""

    async def add_schedule(self, record: ScheduleRecord) -> None: ...
    async def get_schedule(self, id_or_prefix: str) -> ScheduleRecord | None:
        """The schedule with this id, or the one whose id starts with it (None: none, or several)."""
    async def list_schedules(self) -> list[ScheduleRecord]: ...
    async def update_schedule(self, schedule_id: str, *, paused: bool, next_run: float) -> ScheduleRecord | None: ...
    async def remove_schedule(self, schedule_id: str) -> bool:
        """Delete the schedule and its runs' records (the tasks they started stay); whether it existed."""
    async def claim_runs(self, now: float, plan: Callable[[ScheduleRecord, float], RunPlan],
                         limit: int = 100) -> list[ScheduleRun]:
        """In one transaction: the schedules due at `now` (not paused), each locked (another process skips
        it), planned by `plan`, its run recorded (claimed, or skipped) and its next due time stored. The
        runs claimed, for the caller to start (and then `finish_run`)."""
    async def stale_runs(self, now: float, older_than_s: float) -> list[ScheduleRun]:
        """Runs claimed more than `older_than_s` ago and never started (their claimer died between the two),
        taken over by this store: each returned once, to whoever calls first."""
    async def finish_run(self, schedule_id: str, due: float, state: str, *, task_id: str | None = None,
                         session_id: str | None = None, error: str | None = None) -> None: ...
    async def list_runs(self, schedule_id: str, limit: int = 20) -> list[ScheduleRun]:
        """A schedule's latest runs, newest first."""
    async def next_due(self) -> float | None:
        """The earliest due time of the schedules not paused (None: none)."""
    async def wait_schedules(self, timeout: float) -> None:
        """Return when a schedule may have changed (PostgreSQL: a NOTIFY), or after `timeout`."""


@dataclass
class DeliveryRecord(Deferred):
    """One delivery to a webhook intake, by the id its sender gave it (or its body's hash): what it was
    and what became of it."""

    intake: str
    delivery_id: str
    received: float
    event: str
    outcome: str  # received | queued | started | sent | ignored | failed
    task_id: str | None = None
    session_id: str | None = None
    detail: str | None = None


class IntakeStore(Protocol):
    """The deliveries webhook intakes received: a delivery id is acted on once."""

    async def record_delivery(self, intake: str, delivery_id: str, event: str, now: float,
                              retry_after_s: float) -> tuple[bool, DeliveryRecord]:
        """Record a delivery as received: (True, it) when it is new — or when an earlier receipt of it never
        got past `received` and is older than `retry_after_s` (its receiver died: this one takes it over);
        else (False, the delivery as first recorded): a replay."""
    async def settle_delivery(self, intake: str, delivery_id: str, outcome: str, *, task_id: str | None = None,
                              session_id: str | None = None, detail: str | None = None) -> None: ...
    async def list_deliveries(self, intake: str | None = None, limit: int = 50) -> list[DeliveryRecord]:
        """The latest deliveries (to one intake, when given), newest first."""


class Store(PendingStore, TeamStore, ShareStore, ScheduleStore, IntakeStore, Protocol):
    holder: str  # who this store's leases name: one process (SQLite), one store instance (PostgreSQL)

    async def ping(self) -> None:
        """One round trip to the database, for a health check; StoreError when it cannot be reached."""

    async def create_session(self, record: SessionRecord) -> None: ...
    async def update_session(self, session_id: str, **fields: object) -> None: ...
    async def get_session(self, id_or_prefix: str) -> SessionRecord | None: ...
    async def find_sessions(self, id_or_prefix: str, limit: int = 10) -> list[SessionRecord]:
        """Exact id, else every session whose id starts with the prefix (several: ambiguous)."""
    async def list_sessions(self, limit: int = 50, *, cwd: str | None = None,
                            before: tuple[float, str] | None = None) -> list[SessionRecord]:
        """Top-level conversations, newest first; only those of project `cwd` when given, and only those
        listed after (updated, id) `before` when paging."""
    async def append(self, session_id: str, turn_id: str, item: Item, *,
                     full_output: str | None = None, tool_name: str = "", arguments: str = "") -> int:
        """Commit one item durably before returning its sequence number."""
    def append_events(self, session_id: str, envelopes: list[Envelope]) -> asyncio.Future[None]:
        """Queue envelopes for writing now, in order with every other write; await to know they are durable.
        A batch that does not continue the session's stored numbering is refused (StoreError), so the
        stored numbers never have a gap."""
    async def last_event_seq(self, session_id: str) -> int: ...
    async def load_events(self, session_id: str, after_seq: int = 0, upto_seq: int | None = None) -> list[Envelope]:
        """Stored envelopes with after_seq < seq <= upto_seq, oldest first."""
    async def last_event(self, session_id: str, event_type: str) -> Envelope | None:
        """The latest stored envelope of one event type, or None."""
    async def submission(self, session_id: str, submission_id: str) -> str | None:
        """The op (its JSON) a client-chosen submission id was used for, or None: a retried request finds
        its first answer here, also after a restart, and starts nothing twice."""
    async def record_submission(self, session_id: str, submission_id: str, op: str, actor: str = "") -> None:
        """Keep a submission id as used for `op` (sent by `actor`), durably; a second use of the same id is
        an error."""
    async def post_op(self, session_id: str, op: str) -> None:
        """Leave an op (its JSON) for whichever process runs the session — on another machine too: an
        approval answered from `auger serve` for a session a fleet worker runs."""
    async def take_ops(self, session_id: str) -> list[str]:
        """The ops left for the session, oldest first, each taken once."""
    async def wait_ops(self, session_id: str, timeout: float) -> None:
        """Return when an op may have been left for the session, or after `timeout`."""
    async def wait_events(self, session_id: str, timeout: float) -> None:
        """Return when the session's stored events may have grown, or after `timeout` (a follower of a
        session another process runs reads `load_events` again after it)."""
    async def claim(self, session_id: str) -> str | None:
        """Take the session's lease for this store (its `holder`); None on success, else who holds it."""
    async def release(self, session_id: str) -> None: ...
    async def load_items(self, session_id: str) -> list[StoredItem]: ...
    async def get_output(self, session_id: str, call_id: str) -> tuple[str, str, str] | None: ...
    async def list_outputs(self, session_id: str) -> list[tuple[str, str, str, str]]: ...
    async def copy_history(self, source_id: str, target_id: str, before_seq: int | None = None) -> int:
        """A fork's start: the items before `before_seq` (all without it), their outputs, and the usage
        recorded before the first item left out, as the target's inherited usage."""
    async def search_messages(self, session_id: str, query: str, limit: int = 200) -> list[tuple[int, Item]]: ...
    async def get_backend_session(self, session_id: str, backend: str) -> str | None: ...
    async def set_backend_session(self, session_id: str, backend: str, agent_session_id: str) -> None: ...
    async def record_usage(self, session_id: str, turn_id: str, model: str, usage: Usage,
                           purpose: str = "turn") -> None:
        """One model call's usage; `purpose` is its token_usage event's (turn, title, compaction, goal_check…)."""
    async def usage_total(self, session_id: str, *, inherited: bool = False) -> Usage:
        """The session's own usage, or (`inherited`) what it took over from the session it was forked from."""
    async def usage_breakdown(self, session_id: str, *, inherited: bool = False) -> list[tuple[str, str, Usage]]:
        """The usage summed per (model, purpose), as `usage_total` selects it."""
    async def link_child(self, link: LinkRecord) -> None: ...
    async def set_link_status(self, child_id: str, status: str) -> None: ...
    async def list_links(self, parent_id: str | None = None) -> list[LinkRecord]:
        """The links of one parent's children (all links with None), oldest first."""
    async def aclose(self) -> None: ...
