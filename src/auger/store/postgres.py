"""The PostgreSQL store: the same contract as SQLite's, shared by processes on many machines.

psycopg 3 with a connection pool (the `postgres` extra), imported only when a `postgresql://` URL is
opened; without the extra, making a store (or migrating) is MissingExtra, one line naming it. Every write
is one transaction, and most are one statement: the pool's connections are in autocommit, so a statement
that is a transaction of its own costs no BEGIN and no COMMIT (a session's item, a batch of its events,
a usage row, a lease). What must hold across machines is held by the database, never by a process's
memory:

- **Sequence numbers.** An item's number is computed inside the statement that inserts it (the session's
  largest number plus one), and (session_id, seq) is the primary key of items, events and pending changes:
  two writers that computed the same number cannot both commit it — the second waits for the first, gets
  a unique violation and computes again (an item, a pending change) or is refused (an events batch, which
  carries its numbers and is inserted only if the stored numbering ends right before it, checked in the
  same statement). So concurrent writers — threads, processes, machines — never collide nor leave a gap,
  and no lock is taken per write.
- **Order.** A session's writes run in the order they were queued (a chain per session), as SQLite's
  single writer thread gives: a batch of events queued before an item commits before it.
- **The lease.** A session is open once: the lease row names its holder (this store instance), a
  generation and a heartbeat in the database's clock. The holder renews its leases every `heartbeat_s`;
  a lease not renewed for `lease_timeout_s` is stale and the next claimant takes it over, bumping the
  generation — a holder that was paused past the timeout finds its lease gone and `fenced` writes fail.
- **A lost connection** (a database restart, a killed backend) is retried with backoff for a while when
  nothing could have been committed yet: no connection could be had, or a transaction had not reached its
  COMMIT; a read, or a write that changes nothing when made twice, is retried whenever. A commit whose
  answer was lost — a COMMIT, or a write that is its own transaction, sent and unanswered — is an error,
  never replayed.

New events and ops are announced with NOTIFY (triggers in migration 0009); `wait_events` and
`wait_ops` wake on them, with a polling fallback, so a follower on another machine sees a session live.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable, TypeVar

from auger.extras import require
from auger.ids import new_hex
from auger.protocol.envelope import Envelope
from auger.protocol.events import Usage
from auger.protocol.items import Item, ToolOutput
from auger.protocol.jsontext import dumps as json_dumps
from auger.store.base import (
    DELIVERY_COLUMNS, RUN_COLUMNS, SCHEDULE_COLUMNS, AuditRecord, DeliveryRecord, LinkRecord, PendingRecord, RunPlan,
    ScheduleRecord, ScheduleRun, SessionRecord, ShareRecord, StoredItem, StoreError, UserExists, UserRecord,
    audit_filter, listed_sessions_filter,
)
from auger.store.migrations import Migration, migrations, newer_schema

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

T = TypeVar("T")
log = logging.getLogger("auger.store")

LEASE_TIMEOUT_S = float(os.environ.get("AUGER_LEASE_TIMEOUT", "30"))  # unrenewed this long: stale
HEARTBEAT_S = float(os.environ.get("AUGER_LEASE_HEARTBEAT", "0")) or LEASE_TIMEOUT_S / 4
RECONNECT_S = 30.0  # how long a transaction is retried while the database cannot be reached
POLL_S = 2.0  # the fallback when a notification is missed (the listening connection was lost)
LISTEN_LINGER_S = 60.0  # the listening connection outlives its last waiter this long (a worker's next task)
_MIGRATION_LOCK = 0x61756765  # pg_advisory_xact_lock key: one migrator at a time


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    scheme, sep, rest = url.partition("://")
    creds, at, host = rest.rpartition("@")
    if not at or ":" not in creds:
        return url
    return f"{scheme}{sep}{creds.split(':', 1)[0]}:***@{host}"


def b(text: str) -> bytes:
    """Text for a BYTEA column: UTF-8 with lone surrogates kept."""
    return text.encode("utf-8", "surrogatepass")


def t(value: Any) -> str:
    """The text `b` stored."""
    return bytes(value).decode("utf-8", "surrogatepass") if value is not None else ""


class PostgresStore:
    def __init__(self, url: str, *, max_connections: int = 8, lease_timeout_s: float | None = None,
                 heartbeat_s: float | None = None) -> None:
        require("postgres", "a PostgreSQL session database")
        self.url = url
        self.where = redact(url)
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{new_hex(8)}"
        self.lease_timeout_s = lease_timeout_s if lease_timeout_s is not None else LEASE_TIMEOUT_S
        self.heartbeat_s = heartbeat_s if heartbeat_s is not None else min(HEARTBEAT_S, self.lease_timeout_s / 3)
        self._max = max_connections
        self._pool: AsyncConnectionPool | None = None
        self._opening = asyncio.Lock()
        self._tails: dict[str, asyncio.Future[Any]] = {}
        self._held: dict[str, int] = {}  # session id -> lease generation held
        self._renewer: asyncio.Task[None] | None = None
        self._listener: asyncio.Task[None] | None = None
        self._wakers: dict[tuple[str, str], set[asyncio.Event]] = {}  # (channel, session id) -> waiters
        self._listen_until = 0.0  # monotonic time the listening connection may close at, with no waiter
        self.round_trips = 0  # transactions run (the fleet benchmark's count)

    # -- plumbing -----------------------------------------------------------------------
    async def _ensure(self) -> AsyncConnectionPool:
        async with self._opening:
            if self._pool is None:
                self._pool = await self._open()
        return self._pool

    async def _open(self) -> AsyncConnectionPool:
        import psycopg
        from psycopg_pool import AsyncConnectionPool

        try:
            await migrate(self.url)
            pool = AsyncConnectionPool(self.url, min_size=1, max_size=self._max, open=False, timeout=RECONNECT_S,
                                       check=AsyncConnectionPool.check_connection, name="auger",
                                       kwargs={"autocommit": True})
            await pool.open(wait=True, timeout=RECONNECT_S)
            return pool
        except (psycopg.Error, OSError) as exc:
            raise StoreError(f"cannot open session database {self.where}: {_cause(exc)}") from exc
        except Exception as exc:  # the pool's own timeout
            if type(exc).__module__.startswith("psycopg_pool"):
                raise StoreError(f"cannot open session database {self.where}: {exc}") from exc
            raise

    async def transaction(self, fn: Callable[[AsyncConnection], Awaitable[T]], verb: str = "write") -> T:
        """Run `fn`'s statements in one transaction (BEGIN … COMMIT): for writes that must see and change
        several rows at once. A connection lost before the COMMIT is retried; see `_run`."""
        return await self._run(fn, verb, atomic=True, repeatable=False)

    async def autocommit(self, fn: Callable[[AsyncConnection], Awaitable[T]], verb: str = "write", *,
                         repeatable: bool = False) -> T:
        """Run `fn`, each of whose statements is a transaction of its own (no BEGIN, no COMMIT): a read, or
        a write that is one statement. `repeatable`: running `fn` twice changes nothing more than once (a
        read, a lease renewed, a row set to a value), so a connection lost under it is retried; otherwise a
        lost answer is an error, as a lost COMMIT is."""
        return await self._run(fn, verb, atomic=False, repeatable=repeatable)

    async def _run(self, fn: Callable[[AsyncConnection], Awaitable[T]], verb: str, *, atomic: bool,
                   repeatable: bool) -> T:
        """Run `fn` on a pooled connection (autocommit), in BEGIN … COMMIT when `atomic`. A connection lost
        (the server restarting, the backend killed) while nothing can have been committed — none could be
        had, an atomic `fn` before its COMMIT, a `repeatable` one anywhere — is retried with backoff for up
        to RECONNECT_S; any other failure, and an answer lost once a commit was asked for, is a
        StoreError."""
        import psycopg

        pool = await self._ensure()
        deadline = time.monotonic() + RECONNECT_S
        delay = 0.05
        while True:
            committing = False
            try:
                async with pool.connection() as conn:
                    self.round_trips += 1
                    committing = not atomic and not repeatable
                    if atomic:
                        await conn.execute("BEGIN")
                    try:
                        result = await fn(conn)
                    except BaseException:
                        if atomic and not conn.closed:
                            await asyncio.shield(conn.rollback())
                        raise
                    if atomic:
                        committing = True
                        await conn.commit()
                    return result
            except psycopg.OperationalError as exc:
                if committing or time.monotonic() > deadline or not _connection_lost(exc):
                    raise StoreError(f"cannot {verb} the session store {self.where}: {_cause(exc)}") from exc
                log.debug("store connection lost, retrying: %s", exc)
            except psycopg.Error as exc:
                raise StoreError(f"cannot {verb} the session store {self.where}: {_cause(exc)}") from exc
            except Exception as exc:
                if type(exc).__module__.startswith("psycopg_pool") and time.monotonic() <= deadline:
                    log.debug("no store connection yet, retrying: %s", exc)
                else:
                    raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """The rows of one SELECT."""
        async def select(conn: AsyncConnection) -> list[tuple[Any, ...]]:
            return await (await conn.execute(sql, params)).fetchall()

        return await self.autocommit(select, "read", repeatable=True)

    async def _returning(self, sql: str, params: tuple[Any, ...] = (), *, repeatable: bool = False
                         ) -> list[tuple[Any, ...]]:
        """The rows of one write … RETURNING, its own transaction (`repeatable`: see `autocommit`)."""
        async def write(conn: AsyncConnection) -> list[tuple[Any, ...]]:
            return await (await conn.execute(sql, params)).fetchall()

        return await self.autocommit(write, repeatable=repeatable)

    async def _exec(self, sql: str, params: tuple[Any, ...] = (), *, repeatable: bool = False) -> None:
        """One statement, its own transaction."""
        async def run(conn: AsyncConnection) -> None:
            await conn.execute(sql, params)

        await self.autocommit(run, repeatable=repeatable)

    def _in_order(self, session_id: str, fn: Callable[[AsyncConnection], Awaitable[T]], *, atomic: bool = False,
                  repeatable: bool = False) -> asyncio.Future[T]:
        """Queue a write of one session now, to run after every write queued for it before (`fn` in one
        transaction when `atomic`, else each of its statements on its own: see `autocommit`)."""
        previous = self._tails.get(session_id)

        async def chained() -> T:
            if previous is not None:
                await asyncio.wait([previous])
            return await self._run(fn, "write", atomic=atomic, repeatable=repeatable)

        future: asyncio.Future[T] = asyncio.ensure_future(chained())
        self._tails[session_id] = future

        def forget(done: asyncio.Future[T]) -> None:
            if self._tails.get(session_id) is done:
                del self._tails[session_id]
            if not done.cancelled():
                done.exception()  # retrieved: a caller that did not await it is told nothing twice

        future.add_done_callback(forget)
        return future

    async def aclose(self) -> None:
        for task in (self._renewer, self._listener):
            if task is not None:
                task.cancel()
        if self._tails:
            await asyncio.wait(list(self._tails.values()), timeout=10)
        if self._held and self._pool is not None:
            try:
                await self._exec("DELETE FROM leases WHERE holder = %s AND session_id = ANY(%s)",
                                 (self.holder, list(self._held)), repeatable=True)
            except StoreError as exc:
                log.debug("leases left to expire: %s", exc)
            self._held.clear()
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    # -- sessions -----------------------------------------------------------------------
    async def ping(self) -> None:
        await self._read("SELECT 1")

    async def create_session(self, record: SessionRecord) -> None:
        await self._exec("INSERT INTO sessions (id, created, updated, cwd, provider, model, mode, title, created_by) "
                         "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                         (record.id, record.created, record.updated, b(record.cwd), record.provider, record.model,
                          record.mode, b(record.title), record.created_by))

    async def update_session(self, session_id: str, **fields: object) -> None:
        allowed = {"title", "provider", "model", "mode", "cwd"}
        bad = set(fields) - allowed
        if bad:
            raise ValueError(f"cannot update session fields {bad}")
        values = [b(v) if k in ("title", "cwd") and isinstance(v, str) else v for k, v in fields.items()]
        assignments = ", ".join(f"{k} = %s" for k in fields)

        async def update(conn: AsyncConnection) -> None:
            await conn.execute(f"UPDATE sessions SET {assignments}, updated = %s WHERE id = %s",
                               (*values, time.time(), session_id))

        await self._in_order(session_id, update, repeatable=True)

    async def get_session(self, id_or_prefix: str) -> SessionRecord | None:
        found = await self.find_sessions(id_or_prefix, limit=2)
        return found[0] if len(found) == 1 else None

    async def find_sessions(self, id_or_prefix: str, limit: int = 10) -> list[SessionRecord]:
        async def find(conn: AsyncConnection) -> list[tuple[Any, ...]]:
            rows = await (await conn.execute(_SESSION_SELECT + " WHERE s.id = %s", (id_or_prefix,))).fetchall()
            if not rows and len(id_or_prefix) >= 4:
                prefix = id_or_prefix.replace("%", "").replace("_", "").replace("\\", "").replace("\x00", "")
                rows = await (await conn.execute(
                    _SESSION_SELECT + " WHERE s.id LIKE %s ORDER BY s.updated DESC LIMIT %s",
                    (prefix + "%", limit))).fetchall()
            return rows

        if "\x00" in id_or_prefix:
            return []
        return [_session(r) for r in await self.autocommit(find, "read", repeatable=True)]

    async def list_sessions(self, limit: int = 50, *, cwd: str | None = None,
                            before: tuple[float, str] | None = None) -> list[SessionRecord]:
        where, params = listed_sessions_filter(None if cwd is None else b(cwd), before, "%s")
        rows = await self._read(f"{_SESSION_SELECT} WHERE {where} "
                                "ORDER BY s.updated DESC, s.id DESC LIMIT %s", (*params, limit))
        return [_session(r) for r in rows]

    # -- users and the audit ----------------------------------------------------------------
    async def add_user(self, name: str, role: str, token_hash: str, created_by: str) -> UserRecord:
        import psycopg

        record = UserRecord(name, role, time.time(), created_by)
        try:
            await self._exec("INSERT INTO users (name, role, token_hash, created, created_by) VALUES (%s,%s,%s,%s,%s)",
                             (name, role, token_hash, record.created, created_by))
        except StoreError as exc:
            if isinstance(exc.__cause__, psycopg.errors.UniqueViolation):
                raise UserExists(f"a user named {name!r} exists (or was revoked: a name is not given twice)") \
                    from None
            raise
        return record

    async def user_by_token(self, token_hash: str) -> UserRecord | None:
        rows = await self._read(f"SELECT {_USER_COLUMNS} FROM users WHERE token_hash = %s AND revoked IS NULL",
                                (token_hash,))
        return UserRecord(*rows[0]) if rows else None

    async def get_user(self, name: str) -> UserRecord | None:
        rows = await self._read(f"SELECT {_USER_COLUMNS} FROM users WHERE name = %s", (name,))
        return UserRecord(*rows[0]) if rows else None

    async def list_users(self) -> list[UserRecord]:
        return [UserRecord(*r) for r in await self._read(f"SELECT {_USER_COLUMNS} FROM users ORDER BY created")]

    async def revoke_user(self, name: str) -> UserRecord | None:
        rows = await self._returning(f"UPDATE users SET revoked = %s WHERE name = %s AND revoked IS NULL "
                                f"RETURNING {_USER_COLUMNS}", (time.time(), name))
        return UserRecord(*rows[0]) if rows else None

    async def users_changed(self) -> float:
        rows = await self._read("SELECT GREATEST(MAX(created), COALESCE(MAX(revoked), 0)) FROM users")
        return float(rows[0][0] or 0.0)

    # -- shares ---------------------------------------------------------------------------------
    async def add_share(self, share_id: str, session_id: str, token_hash: str, created_by: str,
                        expires: float) -> ShareRecord:
        record = ShareRecord(share_id, session_id, time.time(), created_by, expires)
        await self._exec("INSERT INTO shares (id, session_id, token_hash, created, created_by, expires) "
                         "VALUES (%s,%s,%s,%s,%s,%s)", (share_id, session_id, token_hash, record.created, created_by,
                                                        expires))
        return record

    async def share_by_token(self, token_hash: str) -> ShareRecord | None:
        rows = await self._read(f"SELECT {_SHARE_COLUMNS} FROM shares WHERE token_hash = %s", (token_hash,))
        return ShareRecord(*rows[0]) if rows else None

    async def get_share(self, share_id: str) -> ShareRecord | None:
        rows = await self._read(f"SELECT {_SHARE_COLUMNS} FROM shares WHERE id = %s", (share_id,))
        return ShareRecord(*rows[0]) if rows else None

    async def list_shares(self, session_id: str | None = None) -> list[ShareRecord]:
        where, params = ("WHERE session_id = %s", (session_id,)) if session_id is not None else ("", ())
        rows = await self._read(f"SELECT {_SHARE_COLUMNS} FROM shares {where} ORDER BY created DESC", params)
        return [ShareRecord(*r) for r in rows]

    async def revoke_share(self, share_id: str) -> ShareRecord | None:
        rows = await self._returning(f"UPDATE shares SET revoked = %s WHERE id = %s AND revoked IS NULL "
                                f"RETURNING {_SHARE_COLUMNS}", (time.time(), share_id))
        return ShareRecord(*rows[0]) if rows else None

    async def shares_changed(self) -> float:
        rows = await self._read("SELECT GREATEST(MAX(created), COALESCE(MAX(revoked), 0)) FROM shares")
        return float(rows[0][0] or 0.0)

    async def record_audit(self, actor: str, action: str, target: str, detail: dict[str, object],
                           status: int) -> None:
        await self._exec("INSERT INTO audit (time, actor, action, target, detail, status) VALUES (%s,%s,%s,%s,%s,%s)",
                         (time.time(), actor, action, target, json_dumps(detail), status))

    async def load_audit(self, *, before: int | None = None, limit: int = 100, actor: str | None = None,
                         action: str | None = None, target: str | None = None) -> list[AuditRecord]:
        where, params = audit_filter(before, actor, action, target, "%s")
        rows = await self._read(f"SELECT id, time, actor, action, target, detail, status FROM audit WHERE {where} "
                                "ORDER BY id DESC LIMIT %s", (*params, limit))
        return [AuditRecord(int(r[0]), r[1], r[2], r[3], r[4], json.loads(r[5]), r[6]) for r in rows]

    # -- schedules and intake deliveries -----------------------------------------------------
    async def add_schedule(self, record: ScheduleRecord) -> None:
        await self._exec(f"INSERT INTO schedules ({SCHEDULE_COLUMNS}) VALUES ({', '.join(['%s'] * 16)})",
                         _schedule_values(record))

    async def get_schedule(self, id_or_prefix: str) -> ScheduleRecord | None:
        rows = await self._read(f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE id = %s", (id_or_prefix,))
        if not rows and len(id_or_prefix) >= 4 and id_or_prefix.isalnum():
            rows = await self._read(f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE id LIKE %s LIMIT 2",
                                    (id_or_prefix + "%",))
        return ScheduleRecord(*rows[0]) if len(rows) == 1 else None

    async def list_schedules(self) -> list[ScheduleRecord]:
        return [ScheduleRecord(*r) for r in await self._read(f"SELECT {SCHEDULE_COLUMNS} FROM schedules "
                                                             "ORDER BY created")]

    async def update_schedule(self, schedule_id: str, *, paused: bool, next_run: float) -> ScheduleRecord | None:
        rows = await self._returning(f"UPDATE schedules SET paused = %s, next_run = %s WHERE id = %s "
                                     f"RETURNING {SCHEDULE_COLUMNS}", (paused, next_run, schedule_id), repeatable=True)
        return ScheduleRecord(*rows[0]) if rows else None

    async def remove_schedule(self, schedule_id: str) -> bool:
        async def delete(conn: AsyncConnection) -> bool:
            await conn.execute("DELETE FROM schedule_runs WHERE schedule_id = %s", (schedule_id,))
            return (await conn.execute("DELETE FROM schedules WHERE id = %s", (schedule_id,))).rowcount > 0

        return await self.transaction(delete)

    async def claim_runs(self, now: float, plan: Callable[[ScheduleRecord, float], RunPlan],
                         limit: int = 100) -> list[ScheduleRun]:
        holder = self.holder

        async def claim(conn: AsyncConnection) -> list[ScheduleRun]:
            rows = await (await conn.execute(
                f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE NOT paused AND next_run <= %s ORDER BY next_run "
                "LIMIT %s FOR UPDATE SKIP LOCKED", (now, limit))).fetchall()
            claimed: list[ScheduleRun] = []
            for row in rows:
                record = ScheduleRecord(*row)
                planned = plan(record, now)
                run = ScheduleRun(record.id, planned.due if planned.due is not None else record.next_run,
                                  "claimed" if planned.due is not None else "skipped", now, planned.late,
                                  planned.missed, holder)
                inserted = (await conn.execute(
                    "INSERT INTO schedule_runs (schedule_id, due, state, fired, late, missed, claimed_by) "
                    "VALUES (%s,%s,%s,%s,%s,%s,%s) ON CONFLICT DO NOTHING",
                    (run.schedule_id, run.due, run.state, now, run.late, run.missed, holder))).rowcount
                ran = planned.due is not None and inserted > 0
                await conn.execute(
                    "UPDATE schedules SET next_run = %s, runs = runs + %s, skipped = skipped + %s, "
                    "last_run = CASE WHEN %s THEN %s ELSE last_run END WHERE id = %s",
                    (planned.next_run, int(ran), planned.missed + (planned.due is None), ran, now, record.id))
                if ran:
                    claimed.append(run)
            return claimed

        return await self.transaction(claim)

    async def stale_runs(self, now: float, older_than_s: float) -> list[ScheduleRun]:
        rows = await self._returning(
            f"UPDATE schedule_runs SET claimed_by = %s, fired = %s WHERE (schedule_id, due) IN ("
            "SELECT schedule_id, due FROM schedule_runs WHERE state = 'claimed' AND fired < %s "
            f"FOR UPDATE SKIP LOCKED) RETURNING {RUN_COLUMNS}", (self.holder, now, now - older_than_s))
        return [ScheduleRun(*r) for r in rows]

    async def finish_run(self, schedule_id: str, due: float, state: str, *, task_id: str | None = None,
                         session_id: str | None = None, error: str | None = None) -> None:
        async def update(conn: AsyncConnection) -> None:
            await conn.execute("UPDATE schedule_runs SET state = %s, task_id = %s, session_id = %s, error = %s "
                               "WHERE schedule_id = %s AND due = %s",
                               (state, task_id, session_id, _text(error), schedule_id, due))
            if task_id or session_id:
                await conn.execute("UPDATE schedules SET last_target = %s WHERE id = %s",
                                   (task_id or session_id, schedule_id))

        await self.transaction(update)

    async def list_runs(self, schedule_id: str, limit: int = 20) -> list[ScheduleRun]:
        rows = await self._read(f"SELECT {RUN_COLUMNS} FROM schedule_runs WHERE schedule_id = %s "
                                "ORDER BY due DESC LIMIT %s", (schedule_id, limit))
        return [ScheduleRun(*r) for r in rows]

    async def next_due(self) -> float | None:
        rows = await self._read("SELECT MIN(next_run) FROM schedules WHERE NOT paused")
        return None if not rows or rows[0][0] is None else float(rows[0][0])

    async def wait_schedules(self, timeout: float) -> None:
        await self._wait("auger_schedules", "", timeout)

    async def now(self) -> float:
        """The database's clock (seconds since the epoch): what every machine's scheduler fires by."""
        rows = await self._read("SELECT extract(epoch FROM clock_timestamp())")
        return float(rows[0][0])

    async def record_delivery(self, intake: str, delivery_id: str, event: str, now: float,
                              retry_after_s: float) -> tuple[bool, DeliveryRecord]:
        async def insert(conn: AsyncConnection) -> tuple[bool, DeliveryRecord]:
            row = await (await conn.execute(
                "INSERT INTO intake_deliveries AS d (intake, delivery_id, received, event, outcome) "
                "VALUES (%s,%s,%s,%s,'received') ON CONFLICT (intake, delivery_id) DO UPDATE "
                "SET received = EXCLUDED.received WHERE d.outcome = 'received' AND d.received < %s "
                f"RETURNING {DELIVERY_COLUMNS}", (intake, delivery_id, now, _text(event), now - retry_after_s))
            ).fetchone()
            if row is not None:
                return True, DeliveryRecord(*row)
            first = await (await conn.execute(f"SELECT {DELIVERY_COLUMNS} FROM intake_deliveries WHERE intake = %s "
                                              "AND delivery_id = %s", (intake, delivery_id))).fetchone()
            assert first is not None, "the conflicting row exists"
            return False, DeliveryRecord(*first)

        return await self.transaction(insert)

    async def settle_delivery(self, intake: str, delivery_id: str, outcome: str, *, task_id: str | None = None,
                              session_id: str | None = None, detail: str | None = None) -> None:
        await self._exec("UPDATE intake_deliveries SET outcome = %s, task_id = %s, session_id = %s, detail = %s "
                         "WHERE intake = %s AND delivery_id = %s",
                         (outcome, task_id, session_id, _text(detail), intake, delivery_id))

    async def list_deliveries(self, intake: str | None = None, limit: int = 50) -> list[DeliveryRecord]:
        where, params = ("WHERE intake = %s", (intake,)) if intake is not None else ("", ())
        rows = await self._read(f"SELECT {DELIVERY_COLUMNS} FROM intake_deliveries {where} "
                                "ORDER BY received DESC LIMIT %s", (*params, limit))
        return [DeliveryRecord(*r) for r in rows]

    # -- sub-agent links ----------------------------------------------------------------
    async def link_child(self, link: LinkRecord) -> None:
        await self._exec(
            "INSERT INTO session_links (child_id, parent_id, parent_call_id, agent, status, created) "
            "VALUES (%s,%s,%s,%s,%s,%s) ON CONFLICT (child_id) DO UPDATE SET parent_id = EXCLUDED.parent_id, "
            "parent_call_id = EXCLUDED.parent_call_id, agent = EXCLUDED.agent, status = EXCLUDED.status, "
            "created = EXCLUDED.created",
            (link.child_id, link.parent_id, b(link.parent_call_id), b(link.agent), link.status, time.time()))

    async def set_link_status(self, child_id: str, status: str) -> None:
        await self._exec("UPDATE session_links SET status = %s WHERE child_id = %s", (status, child_id))

    async def list_links(self, parent_id: str | None = None) -> list[LinkRecord]:
        query = "SELECT child_id, parent_id, parent_call_id, agent, status FROM session_links"
        rows = await (self._read(query + " WHERE parent_id = %s ORDER BY created", (parent_id,)) if parent_id
                      else self._read(query + " ORDER BY created"))
        return [LinkRecord(r[0], r[1], t(r[2]), t(r[3]), r[4]) for r in rows]

    # -- items --------------------------------------------------------------------------
    async def append(self, session_id: str, turn_id: str, item: Item, *,
                     full_output: str | None = None, tool_name: str = "", arguments: str = "") -> int:
        data = json_dumps(item.to_json())

        now = time.time()
        sql, params = _APPEND_ITEM, [session_id, turn_id, item.TYPE, data, now, session_id]
        if isinstance(item, ToolOutput):
            sql, params = _APPEND_OUTPUT, [*params, session_id, item.call_id, b(tool_name), b(arguments),
                                           b(full_output if full_output is not None else item.output)]

        async def insert(conn: AsyncConnection) -> int:
            row = await _numbered(conn, sql, (*params, now, session_id))
            return int(row[0])

        return await self._in_order(session_id, insert)

    async def load_items(self, session_id: str) -> list[StoredItem]:
        rows = await self._read("SELECT seq, turn_id, data FROM items WHERE session_id = %s ORDER BY seq",
                                (session_id,))
        return [StoredItem(seq, turn_id, Item.from_json(json.loads(data))) for seq, turn_id, data in rows]

    async def get_output(self, session_id: str, call_id: str) -> tuple[str, str, str] | None:
        rows = await self._read("SELECT tool, arguments, full_output FROM tool_outputs "
                                "WHERE session_id = %s AND call_id = %s", (session_id, call_id))
        return (t(rows[0][0]), t(rows[0][1]), t(rows[0][2])) if rows else None

    async def list_outputs(self, session_id: str) -> list[tuple[str, str, str, str]]:
        rows = await self._read("SELECT call_id, tool, arguments, full_output FROM tool_outputs "
                                "WHERE session_id = %s ORDER BY seq", (session_id,))
        return [(r[0], t(r[1]), t(r[2]), t(r[3])) for r in rows]

    async def copy_history(self, source_id: str, target_id: str, before_seq: int | None = None) -> int:
        limit = before_seq if before_seq is not None else 1 << 62

        async def copy(conn: AsyncConnection) -> int:
            cut = await (await conn.execute("SELECT created FROM items WHERE session_id = %s AND seq = %s",
                                            (source_id, limit))).fetchone()
            cur = await conn.execute(
                "INSERT INTO items (session_id, seq, turn_id, type, data, created) "
                "SELECT %s, seq, turn_id, type, data, created FROM items WHERE session_id = %s AND seq < %s",
                (target_id, source_id, limit))
            copied = cur.rowcount
            await conn.execute(
                "INSERT INTO tool_outputs (session_id, call_id, seq, tool, arguments, full_output) "
                "SELECT %s, call_id, seq, tool, arguments, full_output FROM tool_outputs "
                "WHERE session_id = %s AND seq < %s", (target_id, source_id, limit))
            await conn.execute(
                "INSERT INTO usage (session_id, turn_id, model, input, cached, output, reasoning, created, inherited, "
                "purpose) SELECT %s, turn_id, model, input, cached, output, reasoning, created, 1, purpose FROM usage "
                "WHERE session_id = %s AND created < %s", (target_id, source_id, cut[0] if cut else 1e300))
            return copied

        return await self._in_order(target_id, copy, atomic=True)

    async def search_messages(self, session_id: str, query: str, limit: int = 200) -> list[tuple[int, Item]]:
        needle = json_dumps(query)[1:-1]
        pattern = "%" + needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        if "\x00" in pattern:
            return []
        rows = await self._read(
            "SELECT seq, data FROM items WHERE session_id = %s AND type IN "
            "('user_message', 'assistant_message', 'compaction') AND data LIKE %s ESCAPE '\\' "
            "ORDER BY seq LIMIT %s", (session_id, pattern, limit))
        return [(seq, Item.from_json(json.loads(data))) for seq, data in rows]

    # -- events -------------------------------------------------------------------------
    def append_events(self, session_id: str, envelopes: list[Envelope]) -> asyncio.Future[None]:
        rows = [(session_id, e.seq, e.event.TYPE, e.text()) for e in envelopes]
        first = envelopes[0].seq if envelopes else 1

        async def insert(conn: AsyncConnection) -> None:
            import psycopg

            try:
                stored = (await conn.execute(
                    "INSERT INTO events (session_id, seq, type, data) "
                    "SELECT %s, e.seq, e.type, e.data "
                    "FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS e(seq, type, data) "
                    "WHERE (SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = %s) = %s",
                    (session_id, [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows], session_id,
                     first - 1))).rowcount
            except psycopg.errors.UniqueViolation:  # another writer's numbers, committed meanwhile
                stored = 0
            if stored != len(rows):
                raise StoreError(f"events {first}… of session {session_id[:8]} do not follow the stored "
                                 f"numbering: not stored")

        return self._in_order(session_id, insert)

    async def last_event_seq(self, session_id: str) -> int:
        rows = await self._read("SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = %s", (session_id,))
        return int(rows[0][0])

    async def load_events(self, session_id: str, after_seq: int = 0, upto_seq: int | None = None) -> list[Envelope]:
        upto = upto_seq if upto_seq is not None else 1 << 62
        rows = await self._read("SELECT data FROM events WHERE session_id = %s AND seq > %s AND seq <= %s "
                                "ORDER BY seq", (session_id, after_seq, upto))
        return [Envelope.from_json(json.loads(data)) for (data,) in rows]

    async def last_event(self, session_id: str, event_type: str) -> Envelope | None:
        rows = await self._read("SELECT data FROM events WHERE session_id = %s AND type = %s "
                                "ORDER BY seq DESC LIMIT 1", (session_id, event_type))
        return Envelope.from_json(json.loads(rows[0][0])) if rows else None

    async def wait_events(self, session_id: str, timeout: float) -> None:
        """Return when the session's events may have grown (a NOTIFY from the writer), or after `timeout`."""
        await self._wait("auger_events", session_id, timeout)

    # -- submissions and ops from other processes ------------------------------------------
    async def submission(self, session_id: str, submission_id: str) -> str | None:
        rows = await self._read("SELECT op FROM submissions WHERE session_id = %s AND submission_id = %s",
                                (session_id, b(submission_id)))
        return t(rows[0][0]) if rows else None

    async def record_submission(self, session_id: str, submission_id: str, op: str, actor: str = "") -> None:
        await self._exec("INSERT INTO submissions (session_id, submission_id, op, created, actor) "
                         "VALUES (%s,%s,%s,%s,%s)", (session_id, b(submission_id), b(op), time.time(), actor))

    async def post_op(self, session_id: str, op: str) -> None:
        await self._exec("INSERT INTO session_ops (session_id, op, created) VALUES (%s,%s,%s)",
                         (session_id, b(op), time.time()))

    async def take_ops(self, session_id: str) -> list[str]:
        rows = await self._returning("DELETE FROM session_ops WHERE session_id = %s RETURNING id, op", (session_id,))
        return [t(op) for _, op in sorted(rows)]

    async def wait_ops(self, session_id: str, timeout: float) -> None:
        await self._wait("auger_ops", session_id, timeout)

    # -- leases ---------------------------------------------------------------------------
    async def claim(self, session_id: str) -> str | None:
        """Take the session's lease: None when taken (or already ours), else who holds it. A lease whose
        heartbeat is older than the timeout is taken over, its generation bumped."""
        stale = self.lease_timeout_s

        async def take(conn: AsyncConnection) -> tuple[bool, str, int]:
            row = await (await conn.execute(
                "INSERT INTO leases AS l (session_id, pid, host, heartbeat, holder, generation) "
                "VALUES (%s, %s, %s, extract(epoch FROM clock_timestamp()), %s, 1) "
                "ON CONFLICT (session_id) DO UPDATE SET pid = EXCLUDED.pid, host = EXCLUDED.host, "
                "heartbeat = EXCLUDED.heartbeat, holder = EXCLUDED.holder, "
                "generation = l.generation + CASE WHEN l.holder = EXCLUDED.holder THEN 0 ELSE 1 END "
                "WHERE l.holder = EXCLUDED.holder OR l.heartbeat < extract(epoch FROM clock_timestamp()) - %s "
                "RETURNING generation", (session_id, os.getpid(), socket.gethostname(), self.holder, stale))
            ).fetchone()
            if row is not None:
                return True, "", int(row[0])
            held = await (await conn.execute("SELECT pid, host FROM leases WHERE session_id = %s",
                                             (session_id,))).fetchone()
            return False, f"pid {held[0]} on {held[1]}" if held else "another process", 0

        taken, holder, generation = await self.autocommit(take, repeatable=True)  # ours again: the same generation
        if not taken:
            return holder
        self._held[session_id] = generation
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.ensure_future(self._renew())
        return None

    def generation(self, session_id: str) -> int | None:
        """The generation of the lease this store holds on the session (None: not held, or lost)."""
        return self._held.get(session_id)

    async def release(self, session_id: str) -> None:
        self._held.pop(session_id, None)
        try:
            await self._exec("DELETE FROM leases WHERE session_id = %s AND holder = %s", (session_id, self.holder),
                             repeatable=True)
        except StoreError as exc:
            log.debug("lease of session %s left to expire: %s", session_id, exc)

    async def _renew(self) -> None:
        """Renew every lease held, each heartbeat; a lease found taken over is dropped from those held."""
        while self._held:
            await asyncio.sleep(self.heartbeat_s)
            held = dict(self._held)
            if not held:
                return
            try:
                rows = await self._returning(
                    "UPDATE leases SET heartbeat = extract(epoch FROM clock_timestamp()) "
                    "WHERE holder = %s AND session_id = ANY(%s) RETURNING session_id, generation",
                    (self.holder, list(held)), repeatable=True)
            except StoreError as exc:
                log.warning("cannot renew leases: %s", exc)
                continue
            kept = {sid: gen for sid, gen in rows}
            for session_id, generation in held.items():
                if kept.get(session_id) != generation and self._held.get(session_id) == generation:
                    log.warning("lease of session %s was taken over", session_id[:8])
                    del self._held[session_id]

    # -- notifications --------------------------------------------------------------------
    async def _wait(self, channel: str, session_id: str, timeout: float) -> None:
        event = asyncio.Event()
        key = (channel, session_id)
        self._wakers.setdefault(key, set()).add(event)
        self._listen_until = time.monotonic() + LISTEN_LINGER_S
        if self._listener is None or self._listener.done():
            self._listener = asyncio.ensure_future(self._listen())
        try:
            await asyncio.wait_for(event.wait(), min(timeout, POLL_S))
        except TimeoutError:
            pass
        finally:
            waiters = self._wakers.get(key)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._wakers[key]

    def _listening(self) -> bool:
        return bool(self._wakers) or time.monotonic() < self._listen_until

    async def _listen(self) -> None:
        """One LISTEN connection for the store's waiters; reconnected when lost (waiters poll meanwhile). It
        stays a while after the last waiter is gone, so a worker's next task does not connect and LISTEN
        again."""
        import psycopg

        while self._listening():
            try:
                async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
                    await conn.execute("LISTEN auger_events")
                    await conn.execute("LISTEN auger_ops")
                    await conn.execute("LISTEN auger_schedules")
                    while self._listening():
                        async for note in conn.notifies(timeout=1.0):
                            for event in self._wakers.get((note.channel, note.payload), ()):
                                event.set()
            except psycopg.Error as exc:
                log.debug("listening connection lost: %s", exc)
                await asyncio.sleep(0.5)

    # -- pending changes ------------------------------------------------------------------
    async def add_pending(self, session_id: str, path: str, before_hash: str, content: bytes | None,
                          mode: int | None, agent: str, call_id: str, tool: str) -> int:
        async def insert(conn: AsyncConnection) -> int:
            row = await _numbered(
                conn, "INSERT INTO pending_changes (session_id, seq, path, before_hash, content, mode, agent, "
                "call_id, tool, created) SELECT %s, COALESCE(MAX(seq), 0) + 1, %s, %s, %s, %s::integer, %s, %s, "
                "%s, %s FROM pending_changes WHERE session_id = %s RETURNING seq",
                (session_id, b(path), before_hash, content, mode, b(agent), b(call_id), b(tool), time.time(),
                 session_id))
            return int(row[0])

        return await self._in_order(session_id, insert)

    async def load_pending(self, session_id: str) -> list[PendingRecord]:
        rows = await self._read(
            "SELECT seq, path, before_hash, content, mode, agent, call_id, tool, created FROM pending_changes "
            "WHERE session_id = %s AND state = 'pending' ORDER BY seq", (session_id,))
        return [PendingRecord(int(seq), t(path), before, None if content is None else bytes(content), mode, t(agent),
                              t(call), t(tool), created)
                for seq, path, before, content, mode, agent, call, tool, created in rows]

    async def settle_pending(self, session_id: str, seqs: list[int], state: str) -> None:
        async def update(conn: AsyncConnection) -> None:
            await conn.execute("UPDATE pending_changes SET state = %s WHERE session_id = %s AND seq = ANY(%s)",
                               (state, session_id, seqs))

        await self._in_order(session_id, update, repeatable=True)

    # -- backends and usage ------------------------------------------------------------------
    async def get_backend_session(self, session_id: str, backend: str) -> str | None:
        rows = await self._read("SELECT agent_session_id FROM backend_sessions WHERE session_id = %s AND backend = %s",
                                (session_id, backend))
        return rows[0][0] if rows and rows[0][0] else None

    async def set_backend_session(self, session_id: str, backend: str, agent_session_id: str) -> None:
        await self._exec("INSERT INTO backend_sessions VALUES (%s, %s, %s) ON CONFLICT (session_id, backend) "
                         "DO UPDATE SET agent_session_id = EXCLUDED.agent_session_id",
                         (session_id, backend, agent_session_id))

    async def record_usage(self, session_id: str, turn_id: str, model: str, usage: Usage,
                           purpose: str = "turn") -> None:
        async def insert(conn: AsyncConnection) -> None:
            await conn.execute(
                "INSERT INTO usage (session_id, turn_id, model, input, cached, output, reasoning, created, purpose) "
                "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                (session_id, turn_id, model, usage.input_tokens, usage.cached_input_tokens, usage.output_tokens,
                 usage.reasoning_tokens, time.time(), purpose))

        await self._in_order(session_id, insert)

    async def usage_breakdown(self, session_id: str, *, inherited: bool = False) -> list[tuple[str, str, Usage]]:
        rows = await self._read("SELECT model, purpose, SUM(input), SUM(cached), SUM(output), SUM(reasoning) "
                                "FROM usage WHERE session_id = %s AND inherited = %s GROUP BY model, purpose "
                                "ORDER BY model, purpose", (session_id, int(inherited)))
        return [(model, purpose, Usage(*(int(n) for n in numbers))) for model, purpose, *numbers in rows]

    async def usage_total(self, session_id: str, *, inherited: bool = False) -> Usage:
        rows = await self._read("SELECT COALESCE(SUM(input),0), COALESCE(SUM(cached),0), COALESCE(SUM(output),0), "
                                "COALESCE(SUM(reasoning),0) FROM usage WHERE session_id = %s AND inherited = %s",
                                (session_id, int(inherited)))
        return Usage(*(int(n) for n in rows[0]))


async def migrate(url: str) -> tuple[int, int]:
    """Apply the migrations the database lacks, each in one transaction, under an advisory lock (many
    workers may start at once); (version before, version after). A newer schema is refused."""
    require("postgres", "a PostgreSQL session database")
    import psycopg

    steps = migrations("postgres")
    known = steps[-1].version
    try:
        return await _apply(url, steps, known)
    except psycopg.Error as exc:
        raise StoreError(f"cannot migrate session database {redact(url)}: {_cause(exc)}") from exc


async def _apply(url: str, steps: list[Migration], known: int) -> tuple[int, int]:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, connect_timeout=10) as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        await conn.execute("CREATE TABLE IF NOT EXISTS auger_schema (version INTEGER NOT NULL)")
        row = await (await conn.execute("SELECT MAX(version) FROM auger_schema")).fetchone()
        before = int(row[0]) if row and row[0] is not None else 0
        if before > known:
            raise StoreError(newer_schema(redact(url), before, known))
        for step in steps:
            if step.version > before:
                await conn.execute(step.sql.encode())
                await conn.execute("INSERT INTO auger_schema (version) VALUES (%s)", (step.version,))
    return before, max(before, known)


async def _numbered(conn: AsyncConnection, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...]:
    """Run an INSERT that numbers its row the session's largest number plus one, and return what it
    returns. Two writers that computed the same number cannot both commit it (the primary key): the one
    that loses waits for the other's commit, gets a unique violation, and computes its number again."""
    import psycopg

    for _ in range(_NUMBERING_TRIES - 1):
        try:
            row = await (await conn.execute(sql, params)).fetchone()
        except psycopg.errors.UniqueViolation:
            continue
        assert row is not None, "an INSERT … RETURNING returns its row"
        return row
    row = await (await conn.execute(sql, params)).fetchone()  # a last try: its violation is the caller's error
    assert row is not None, "an INSERT … RETURNING returns its row"
    return row


def _connection_lost(exc: Exception) -> bool:
    import psycopg

    sqlstate = getattr(exc, "sqlstate", None) or ""
    return isinstance(exc, psycopg.OperationalError) and (not sqlstate or sqlstate.startswith(("08", "57P")))


def _cause(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


_NUMBERING_TRIES = 50  # writers racing for one session's next number: each round, one of them wins
# An item: numbered in the statement, its full output kept beside it (a tool's), the session marked updated —
# after the item is inserted (the UPDATE reads its row), so racing writers take their locks in one order.
_ITEM = ("WITH item AS (INSERT INTO items (session_id, seq, turn_id, type, data, created) "
         "SELECT %s, COALESCE(MAX(seq), 0) + 1, %s, %s, %s, %s FROM items WHERE session_id = %s RETURNING seq)")
_TOUCH = ", touched AS (UPDATE sessions SET updated = %s WHERE id = %s AND EXISTS (SELECT 1 FROM item)) "
_APPEND_ITEM = _ITEM + _TOUCH + "SELECT seq FROM item"
_APPEND_OUTPUT = (_ITEM + ", output AS (INSERT INTO tool_outputs (session_id, call_id, seq, tool, arguments, "
                  "full_output) SELECT %s, %s, seq, %s, %s, %s FROM item ON CONFLICT (session_id, call_id) DO UPDATE "
                  "SET seq = EXCLUDED.seq, tool = EXCLUDED.tool, arguments = EXCLUDED.arguments, "
                  "full_output = EXCLUDED.full_output)" + _TOUCH + "SELECT seq FROM item")
_SESSION_SELECT = ("SELECT s.id, s.created, s.updated, s.cwd, s.provider, s.model, s.mode, s.title, "
                   "(SELECT COUNT(*) FROM items i WHERE i.session_id = s.id), s.created_by FROM sessions s")


def _schedule_values(record: ScheduleRecord) -> tuple[Any, ...]:
    return (record.id, record.cadence, record.tz, record.missed, record.spec, record.queue, record.priority,
            record.max_attempts, record.paused, record.next_run, record.created, _text(record.created_by),
            record.last_run, record.last_target, record.runs, record.skipped)


def _text(value: str | None) -> str | None:
    """Text for a TEXT column, which takes neither NUL nor a lone surrogate (short notes, never data that must
    round-trip: those go to BYTEA)."""
    if value is None:
        return None
    return value.encode("utf-8", "replace").decode("utf-8").replace("\x00", "")


_USER_COLUMNS = "name, role, created, created_by, revoked"
_SHARE_COLUMNS = "id, session_id, created, created_by, expires, revoked"


def _session(row: tuple[Any, ...]) -> SessionRecord:
    return SessionRecord(row[0], row[1], row[2], t(row[3]), row[4], row[5], row[6], t(row[7]), int(row[8]), row[9])
