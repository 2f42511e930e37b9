"""The default store: one SQLite file in WAL mode, written from a single worker thread.

Every `append` is its own transaction, committed before it returns, so a process
killed at any moment keeps every item it had finished recording. Blocking SQLite
calls run on one dedicated thread: the event loop never waits on disk, and writes
from many sessions in one process are serialised without locks of our own.

Several processes may share the file. An item's sequence number is assigned inside
its write transaction (`BEGIN IMMEDIATE`), never cached, so concurrent writers cannot
collide; and a process running a session holds its lease (pid, host, heartbeat), so
a second process is told the session is busy instead of interleaving turns with it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, TypeVar

from auger.process import process_alive
from auger.protocol.envelope import Envelope
from auger.protocol.events import Usage
from auger.protocol.items import Item, ToolOutput
from auger.protocol.jsontext import dumps as json_dumps
from auger.store.migrations import migrations, newer_schema
from auger.store.base import (
    DELIVERY_COLUMNS, RUN_COLUMNS, SCHEDULE_COLUMNS, AuditRecord, DeliveryRecord, LinkRecord, PendingRecord, RunPlan,
    ScheduleRecord, ScheduleRun, SessionRecord, ShareRecord, StoredItem, StoreError, UserExists, UserRecord,
    audit_filter, listed_sessions_filter,
)

__all__ = ["SqliteStore", "StoreError"]

T = TypeVar("T")
_Outcome = tuple["asyncio.Future[Any]", Any, "Exception | None"]  # a write's waiter, its result, its failure
log = logging.getLogger("auger.store")

# Columns older files may lack that schema 8's idempotent statements do not add (7: a fork's inherited usage).
_COLUMNS = [("usage", "inherited", "INTEGER NOT NULL DEFAULT 0")]
# What SQLite's failures mean to a user (the others keep SQLite's words: "database is locked"…).
_CAUSES = {
    "SQLITE_FULL": "the disk is full",
    "SQLITE_IOERR_WRITE": "writing to the disk failed (is it full?)",
}
# A lease held on another host is presumed dead once its heartbeat (each recorded item) is this old;
# on this host, the holder's pid decides.
LEASE_STALE_S = 600.0


class SqliteStore:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="auger-sqlite")
        self._writes: list[tuple[Callable[[sqlite3.Connection], Any], asyncio.Future[Any]]] = []  # not yet run
        self._writes_lock = threading.Lock()
        self._draining = False  # a pass of _drain_writes is queued or running: it will see new writes
        self._closed = False
        self._conn: sqlite3.Connection | None = None
        self._owner = (os.getpid(), socket.gethostname())
        self.holder = f"{self._owner[1]}:{self._owner[0]}"

    # -- plumbing -----------------------------------------------------------------
    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run a read on the writer thread."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._call, fn, "read")

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run a write on the writer thread."""
        return await self._queue_write(fn)

    def _queue_write(self, fn: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        """Queue a write on the writer thread now (writes run in the order they were queued). Writes queued
        while others wait are run by one pass of the thread and answered with one wake-up of the loop, so
        many sessions writing at once cost a hand-over per batch, not per write; each write is still its
        own transaction, committed before its future is done."""
        if self._closed:
            raise RuntimeError("the session store is closed")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        with self._writes_lock:
            self._writes.append((fn, future))
            idle, self._draining = not self._draining, True
        if idle:
            try:
                self._executor.submit(self._drain_writes)
            except RuntimeError:  # the executor was shut down: refuse the write as it would have been
                with self._writes_lock:
                    self._writes, self._draining = [], False
                raise
        return future

    def _drain_writes(self) -> None:
        """On the writer thread: run the queued writes in order, a batch at a time, and hand each batch's
        outcomes to the loops waiting for them; stop once none is left."""
        while True:
            with self._writes_lock:
                batch, self._writes = self._writes, []
                if not batch:
                    self._draining = False
                    return
            outcomes: dict[asyncio.AbstractEventLoop, list[_Outcome]] = {}
            for fn, future in batch:
                outcome: _Outcome
                try:
                    outcome = (future, self._call(fn, "write"), None)
                except Exception as exc:  # noqa: BLE001 - the write's own failure, handed to its waiter
                    outcome = (future, None, exc)
                outcomes.setdefault(future.get_loop(), []).append(outcome)
            for loop, settled in outcomes.items():
                try:
                    loop.call_soon_threadsafe(_settle, settled)
                except RuntimeError:  # that loop is closed: nobody waits for these any more
                    pass

    def _call(self, fn: Callable[[sqlite3.Connection], T], verb: str) -> T:
        """`fn` on the connection; a database error becomes one StoreError line naming the file and the
        cause (a full disk reads "cannot write the session store FILE: the disk is full")."""
        if self._conn is None:
            self._conn = self._open()
        try:
            return fn(self._conn)
        except sqlite3.Error as exc:
            cause = _CAUSES.get(getattr(exc, "sqlite_errorname", ""), str(exc))
            raise StoreError(f"cannot {verb} the session store {self.path}: {cause}") from exc

    def open_ahead(self) -> None:
        """Start opening (and migrating) the database on the writer thread now, so the caller's own work
        overlaps it; the first call finds it open. A failure is met again, and raised, by that call."""
        self._executor.submit(self._call, lambda conn: None, "read")

    def _open(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=10)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            _migrate(conn, str(self.path))
            return conn
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open session database {self.path}: {exc}") from exc

    async def aclose(self) -> None:
        def close(conn: sqlite3.Connection) -> None:
            conn.close()
            self._conn = None

        self._closed = True
        if self._conn is not None:
            await self._run(close)
        self._executor.shutdown(wait=False)

    async def ping(self) -> None:
        await self._run(lambda conn: conn.execute("SELECT 1 FROM sessions LIMIT 1").fetchall())

    # -- sessions -----------------------------------------------------------------
    async def create_session(self, record: SessionRecord) -> None:
        def insert(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO sessions (id, created, updated, cwd, provider, model, mode, title, created_by) "
                "VALUES (?,?,?,?,?,?,?,?,?)",
                (record.id, record.created, record.updated, to_db(record.cwd), record.provider, record.model,
                 record.mode, to_db(record.title), record.created_by))

        await self._write(insert)

    async def update_session(self, session_id: str, **fields: object) -> None:
        allowed = {"title", "provider", "model", "mode", "cwd"}
        bad = set(fields) - allowed
        if bad:
            raise ValueError(f"cannot update session fields {bad}")
        fields["updated"] = time.time()
        assignments = ", ".join(f"{k} = ?" for k in fields)

        def update(conn: sqlite3.Connection) -> None:
            values = (to_db(v) if isinstance(v, str) else v for v in fields.values())
            conn.execute(f"UPDATE sessions SET {assignments} WHERE id = ?", (*values, session_id))

        await self._write(update)

    async def get_session(self, id_or_prefix: str) -> SessionRecord | None:
        """Exact id, or a unique prefix of one (as `auger sessions` shows short ids)."""
        found = await self.find_sessions(id_or_prefix, limit=2)
        return found[0] if len(found) == 1 else None

    async def find_sessions(self, id_or_prefix: str, limit: int = 10) -> list[SessionRecord]:
        """The session with this exact id, else those whose id starts with it (4+ characters), newest
        first: more than one means the prefix is ambiguous."""

        def find(conn: sqlite3.Connection) -> list[SessionRecord]:
            rows = conn.execute(_SESSION_SELECT + " WHERE s.id = ?", (id_or_prefix,)).fetchall()
            if not rows and len(id_or_prefix) >= 4:
                rows = conn.execute(_SESSION_SELECT + " WHERE s.id LIKE ? ORDER BY s.updated DESC LIMIT ?",
                                    (id_or_prefix.replace("%", "").replace("_", "") + "%", limit)).fetchall()
            return [_session(r) for r in rows]

        return await self._run(find)

    async def list_sessions(self, limit: int = 50, *, cwd: str | None = None,
                            before: tuple[float, str] | None = None) -> list[SessionRecord]:
        """The most recently updated top-level sessions (a sub-agent's is listed under its parent, see
        `list_links`) in which the model said something. A run that never got
        a reply (a missing image, an unknown skill, an unreachable server) is no conversation to
        list; it can still be resumed by its id. `cwd` keeps one project's; `before` (updated, id)
        continues a listing after its last row, stable while sessions are added."""
        where, params = listed_sessions_filter(None if cwd is None else to_db(cwd), before, "?")

        def select(conn: sqlite3.Connection) -> list[SessionRecord]:
            rows = conn.execute(f"{_SESSION_SELECT} WHERE {where} ORDER BY s.updated DESC, s.id DESC "
                                "LIMIT ?", (*params, limit)).fetchall()
            return [_session(r) for r in rows]

        return await self._run(select)

    # -- users and the audit ------------------------------------------------------
    async def add_user(self, name: str, role: str, token_hash: str, created_by: str) -> UserRecord:
        record = UserRecord(name, role, time.time(), created_by)

        def insert(conn: sqlite3.Connection) -> None:
            try:
                conn.execute("INSERT INTO users (name, role, token_hash, created, created_by) VALUES (?,?,?,?,?)",
                             (name, role, token_hash, record.created, created_by))
            except sqlite3.IntegrityError:
                raise UserExists(f"a user named {name!r} exists (or was revoked: a name is not given twice)") from None

        await self._write(insert)
        return record

    async def user_by_token(self, token_hash: str) -> UserRecord | None:
        def select(conn: sqlite3.Connection) -> UserRecord | None:
            row = conn.execute(f"SELECT {_USER_COLUMNS} FROM users WHERE token_hash = ? AND revoked IS NULL",
                               (token_hash,)).fetchone()
            return UserRecord(*row) if row else None

        return await self._run(select)

    async def get_user(self, name: str) -> UserRecord | None:
        def select(conn: sqlite3.Connection) -> UserRecord | None:
            row = conn.execute(f"SELECT {_USER_COLUMNS} FROM users WHERE name = ?", (name,)).fetchone()
            return UserRecord(*row) if row else None

        return await self._run(select)

    async def list_users(self) -> list[UserRecord]:
        def select(conn: sqlite3.Connection) -> list[UserRecord]:
            return [UserRecord(*r) for r in conn.execute(f"SELECT {_USER_COLUMNS} FROM users ORDER BY created")]

        return await self._run(select)

    async def revoke_user(self, name: str) -> UserRecord | None:
        def update(conn: sqlite3.Connection) -> UserRecord | None:
            row = conn.execute(f"UPDATE users SET revoked = ? WHERE name = ? AND revoked IS NULL "
                               f"RETURNING {_USER_COLUMNS}", (time.time(), name)).fetchone()
            return UserRecord(*row) if row else None

        return await self._write(update)

    async def users_changed(self) -> float:
        def select(conn: sqlite3.Connection) -> float:
            row = conn.execute("SELECT MAX(MAX(created), COALESCE(MAX(revoked), 0)) FROM users").fetchone()
            return float(row[0] or 0.0)

        return await self._run(select)

    async def record_audit(self, actor: str, action: str, target: str, detail: dict[str, object],
                           status: int) -> None:
        def insert(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO audit (time, actor, action, target, detail, status) VALUES (?,?,?,?,?,?)",
                         (time.time(), actor, action, target, json_dumps(detail), status))

        await self._write(insert)

    async def load_audit(self, *, before: int | None = None, limit: int = 100, actor: str | None = None,
                         action: str | None = None, target: str | None = None) -> list[AuditRecord]:
        where, params = audit_filter(before, actor, action, target, "?")

        def select(conn: sqlite3.Connection) -> list[AuditRecord]:
            rows = conn.execute(f"SELECT id, time, actor, action, target, detail, status FROM audit WHERE {where} "
                                "ORDER BY id DESC LIMIT ?", (*params, limit)).fetchall()
            return [AuditRecord(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), r[6]) for r in rows]

        return await self._run(select)

    # -- shares -------------------------------------------------------------------
    async def add_share(self, share_id: str, session_id: str, token_hash: str, created_by: str,
                        expires: float) -> ShareRecord:
        record = ShareRecord(share_id, session_id, time.time(), created_by, expires)

        def insert(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO shares (id, session_id, token_hash, created, created_by, expires) "
                         "VALUES (?,?,?,?,?,?)",
                         (share_id, session_id, token_hash, record.created, created_by, expires))

        await self._write(insert)
        return record

    async def share_by_token(self, token_hash: str) -> ShareRecord | None:
        return await self._one_share("token_hash = ?", token_hash)

    async def get_share(self, share_id: str) -> ShareRecord | None:
        return await self._one_share("id = ?", share_id)

    async def _one_share(self, where: str, value: str) -> ShareRecord | None:
        def select(conn: sqlite3.Connection) -> ShareRecord | None:
            row = conn.execute(f"SELECT {_SHARE_COLUMNS} FROM shares WHERE {where}", (value,)).fetchone()
            return ShareRecord(*row) if row else None

        return await self._run(select)

    async def list_shares(self, session_id: str | None = None) -> list[ShareRecord]:
        def select(conn: sqlite3.Connection) -> list[ShareRecord]:
            where, params = ("WHERE session_id = ?", (session_id,)) if session_id is not None else ("", ())
            rows = conn.execute(f"SELECT {_SHARE_COLUMNS} FROM shares {where} ORDER BY created DESC", params)
            return [ShareRecord(*r) for r in rows]

        return await self._run(select)

    async def revoke_share(self, share_id: str) -> ShareRecord | None:
        def update(conn: sqlite3.Connection) -> ShareRecord | None:
            row = conn.execute(f"UPDATE shares SET revoked = ? WHERE id = ? AND revoked IS NULL "
                               f"RETURNING {_SHARE_COLUMNS}", (time.time(), share_id)).fetchone()
            return ShareRecord(*row) if row else None

        return await self._write(update)

    async def shares_changed(self) -> float:
        def select(conn: sqlite3.Connection) -> float:
            row = conn.execute("SELECT MAX(MAX(created), COALESCE(MAX(revoked), 0)) FROM shares").fetchone()
            return float(row[0] or 0.0)

        return await self._run(select)

    # -- schedules and intake deliveries ------------------------------------------
    async def add_schedule(self, record: ScheduleRecord) -> None:
        def insert(conn: sqlite3.Connection) -> None:
            conn.execute(f"INSERT INTO schedules ({SCHEDULE_COLUMNS}) VALUES ({', '.join('?' * 16)})",
                         _schedule_values(record))

        await self._write(insert)

    async def get_schedule(self, id_or_prefix: str) -> ScheduleRecord | None:
        def select(conn: sqlite3.Connection) -> ScheduleRecord | None:
            rows = conn.execute(f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE id = ?", (id_or_prefix,)).fetchall()
            if not rows and len(id_or_prefix) >= 4 and id_or_prefix.isalnum():
                rows = conn.execute(f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE id LIKE ? LIMIT 2",
                                    (id_or_prefix + "%",)).fetchall()
            return _schedule(rows[0]) if len(rows) == 1 else None

        return await self._run(select)

    async def list_schedules(self) -> list[ScheduleRecord]:
        def select(conn: sqlite3.Connection) -> list[ScheduleRecord]:
            return [_schedule(r) for r in conn.execute(f"SELECT {SCHEDULE_COLUMNS} FROM schedules ORDER BY created")]

        return await self._run(select)

    async def update_schedule(self, schedule_id: str, *, paused: bool, next_run: float) -> ScheduleRecord | None:
        def update(conn: sqlite3.Connection) -> ScheduleRecord | None:
            row = conn.execute(f"UPDATE schedules SET paused = ?, next_run = ? WHERE id = ? "
                               f"RETURNING {SCHEDULE_COLUMNS}", (int(paused), next_run, schedule_id)).fetchone()
            return _schedule(row) if row else None

        return await self._write(update)

    async def remove_schedule(self, schedule_id: str) -> bool:
        def delete(conn: sqlite3.Connection) -> bool:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("DELETE FROM schedule_runs WHERE schedule_id = ?", (schedule_id,))
                return conn.execute("DELETE FROM schedules WHERE id = ?", (schedule_id,)).rowcount > 0

        return await self._write(delete)

    async def claim_runs(self, now: float, plan: Callable[[ScheduleRecord, float], RunPlan],
                         limit: int = 100) -> list[ScheduleRun]:
        holder = self.holder

        def claim(conn: sqlite3.Connection) -> list[ScheduleRun]:
            claimed: list[ScheduleRun] = []
            with conn:
                conn.execute("BEGIN IMMEDIATE")  # another process on the file waits, then sees them moved on
                rows = conn.execute(f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE paused = 0 AND next_run <= ? "
                                    "ORDER BY next_run LIMIT ?", (now, limit)).fetchall()
                for row in rows:
                    record = _schedule(row)
                    planned = plan(record, now)
                    run = ScheduleRun(record.id, planned.due if planned.due is not None else record.next_run,
                                      "claimed" if planned.due is not None else "skipped", now, planned.late,
                                      planned.missed, holder)
                    inserted = conn.execute(
                        "INSERT INTO schedule_runs (schedule_id, due, state, fired, late, missed, claimed_by) "
                        "VALUES (?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
                        (run.schedule_id, run.due, run.state, now, int(run.late), run.missed, holder)).rowcount
                    ran = planned.due is not None and inserted > 0
                    conn.execute("UPDATE schedules SET next_run = ?, runs = runs + ?, skipped = skipped + ?, "
                                 "last_run = CASE WHEN ? THEN ? ELSE last_run END WHERE id = ?",
                                 (planned.next_run, int(ran), planned.missed + (planned.due is None), int(ran), now,
                                  record.id))
                    if ran:
                        claimed.append(run)
            return claimed

        return await self._write(claim)

    async def stale_runs(self, now: float, older_than_s: float) -> list[ScheduleRun]:
        def take(conn: sqlite3.Connection) -> list[ScheduleRun]:
            rows = conn.execute(f"UPDATE schedule_runs SET claimed_by = ?, fired = ? WHERE state = 'claimed' "
                                f"AND fired < ? RETURNING {RUN_COLUMNS}",
                                (self.holder, now, now - older_than_s)).fetchall()
            return [_run(r) for r in rows]

        return await self._write(take)

    async def finish_run(self, schedule_id: str, due: float, state: str, *, task_id: str | None = None,
                         session_id: str | None = None, error: str | None = None) -> None:
        def update(conn: sqlite3.Connection) -> None:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("UPDATE schedule_runs SET state = ?, task_id = ?, session_id = ?, error = ? "
                             "WHERE schedule_id = ? AND due = ?",
                             (state, task_id, session_id, to_db(error) if error else None, schedule_id, due))
                if task_id or session_id:
                    conn.execute("UPDATE schedules SET last_target = ? WHERE id = ?", (task_id or session_id,
                                                                                      schedule_id))

        await self._write(update)

    async def list_runs(self, schedule_id: str, limit: int = 20) -> list[ScheduleRun]:
        def select(conn: sqlite3.Connection) -> list[ScheduleRun]:
            rows = conn.execute(f"SELECT {RUN_COLUMNS} FROM schedule_runs WHERE schedule_id = ? "
                                "ORDER BY due DESC LIMIT ?", (schedule_id, limit)).fetchall()
            return [_run(r) for r in rows]

        return await self._run(select)

    async def next_due(self) -> float | None:
        def select(conn: sqlite3.Connection) -> float | None:
            row = conn.execute("SELECT MIN(next_run) FROM schedules WHERE paused = 0").fetchone()
            return None if row is None or row[0] is None else float(row[0])

        return await self._run(select)

    async def wait_schedules(self, timeout: float) -> None:
        await asyncio.sleep(timeout)  # no notifications in SQLite: the firing loop keeps its waits short

    async def record_delivery(self, intake: str, delivery_id: str, event: str, now: float,
                              retry_after_s: float) -> tuple[bool, DeliveryRecord]:
        def insert(conn: sqlite3.Connection) -> tuple[bool, DeliveryRecord]:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                row = conn.execute(
                    "INSERT INTO intake_deliveries (intake, delivery_id, received, event, outcome) "
                    "VALUES (?,?,?,?,'received') ON CONFLICT DO UPDATE SET received = excluded.received "
                    "WHERE outcome = 'received' AND received < ? "
                    f"RETURNING {DELIVERY_COLUMNS}", (intake, delivery_id, now, to_db(event), now - retry_after_s)
                ).fetchone()
                if row is not None:
                    return True, _delivery(row)
                first = conn.execute(f"SELECT {DELIVERY_COLUMNS} FROM intake_deliveries WHERE intake = ? AND "
                                     "delivery_id = ?", (intake, delivery_id)).fetchone()
                return False, _delivery(first)

        return await self._write(insert)

    async def settle_delivery(self, intake: str, delivery_id: str, outcome: str, *, task_id: str | None = None,
                              session_id: str | None = None, detail: str | None = None) -> None:
        def update(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE intake_deliveries SET outcome = ?, task_id = ?, session_id = ?, detail = ? "
                         "WHERE intake = ? AND delivery_id = ?",
                         (outcome, task_id, session_id, to_db(detail) if detail else None, intake, delivery_id))

        await self._write(update)

    async def list_deliveries(self, intake: str | None = None, limit: int = 50) -> list[DeliveryRecord]:
        def select(conn: sqlite3.Connection) -> list[DeliveryRecord]:
            where, params = ("WHERE intake = ?", (intake,)) if intake is not None else ("", ())
            rows = conn.execute(f"SELECT {DELIVERY_COLUMNS} FROM intake_deliveries {where} "
                                "ORDER BY received DESC LIMIT ?", (*params, limit)).fetchall()
            return [_delivery(r) for r in rows]

        return await self._run(select)

    # -- sub-agent links ----------------------------------------------------------
    async def link_child(self, link: LinkRecord) -> None:
        def insert(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT OR REPLACE INTO session_links (child_id, parent_id, parent_call_id, agent, status, "
                         "created) VALUES (?,?,?,?,?,?)", (link.child_id, link.parent_id, to_db(link.parent_call_id),
                                                           to_db(link.agent), link.status, time.time()))

        await self._write(insert)

    async def set_link_status(self, child_id: str, status: str) -> None:
        def update(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE session_links SET status = ? WHERE child_id = ?", (status, child_id))

        await self._write(update)

    async def list_links(self, parent_id: str | None = None) -> list[LinkRecord]:
        def select(conn: sqlite3.Connection) -> list[LinkRecord]:
            query = "SELECT child_id, parent_id, parent_call_id, agent, status FROM session_links"
            rows = (conn.execute(query + " WHERE parent_id = ? ORDER BY created", (parent_id,)) if parent_id
                    else conn.execute(query + " ORDER BY created")).fetchall()
            return [LinkRecord(r[0], r[1], from_db(r[2]), from_db(r[3]), r[4]) for r in rows]

        return await self._run(select)

    # -- items --------------------------------------------------------------------
    async def append(self, session_id: str, turn_id: str, item: Item, *,
                     full_output: str | None = None, tool_name: str = "", arguments: str = "") -> int:
        data = json_dumps(item.to_json())

        def insert(conn: sqlite3.Connection) -> int:
            now = time.time()
            with conn:
                conn.execute("BEGIN IMMEDIATE")  # the write lock first: no other process can take this seq
                seq = conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM items WHERE session_id = ?",
                                   (session_id,)).fetchone()[0]
                conn.execute("INSERT INTO items (session_id, seq, turn_id, type, data, created) VALUES (?,?,?,?,?,?)",
                             (session_id, seq, turn_id, item.TYPE, data, now))
                if isinstance(item, ToolOutput):
                    conn.execute(
                        "INSERT OR REPLACE INTO tool_outputs (session_id, call_id, seq, tool, arguments, full_output) "
                        "VALUES (?,?,?,?,?,?)",
                        (session_id, item.call_id, seq, tool_name, to_db(arguments),
                         to_db(full_output if full_output is not None else item.output)))
                conn.execute("UPDATE sessions SET updated = ? WHERE id = ?", (now, session_id))
                conn.execute("UPDATE leases SET heartbeat = ? WHERE session_id = ? AND pid = ? AND host = ?",
                             (now, session_id, *self._owner))
            return seq

        return await self._write(insert)

    # -- events -------------------------------------------------------------------
    def append_events(self, session_id: str, envelopes: list[Envelope]) -> asyncio.Future[None]:
        """Queue a batch of a session's envelopes for one transaction, at once (not when awaited).

        The single writer thread runs writes in the order they were queued, so a batch queued before
        an item's `append` is committed before that item: a crash never keeps an item but loses an
        event emitted before it. A batch must continue the stored numbering: after a batch that failed
        (a full disk) the next one is refused too, so the stored numbers never have a gap; and a number
        once stored is never written again."""
        rows = [(session_id, e.seq, e.event.TYPE, e.text()) for e in envelopes]
        first = envelopes[0].seq if envelopes else 1

        def insert(conn: sqlite3.Connection) -> None:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                last = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?",
                                    (session_id,)).fetchone()[0]
                if last != first - 1:
                    raise StoreError(f"events {first}… of session {session_id[:8]} do not follow the stored "
                                     f"event {last}: not stored")
                conn.executemany("INSERT INTO events (session_id, seq, type, data) VALUES (?,?,?,?)", rows)

        return self._queue_write(insert)

    async def last_event_seq(self, session_id: str) -> int:
        """The sequence number of the session's last stored event (0 when it has none)."""

        def select(conn: sqlite3.Connection) -> int:
            return conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?",
                                (session_id,)).fetchone()[0]

        return await self._run(select)

    async def load_events(self, session_id: str, after_seq: int = 0, upto_seq: int | None = None) -> list[Envelope]:
        """The session's stored envelopes with `after_seq < seq <= upto_seq`, in order: how a client
        that saw up to `after_seq` resumes the stream, with or without the session being open."""
        upto = upto_seq if upto_seq is not None else 1 << 62

        def select(conn: sqlite3.Connection) -> list[Envelope]:
            rows = conn.execute("SELECT data FROM events WHERE session_id = ? AND seq > ? AND seq <= ? ORDER BY seq",
                                (session_id, after_seq, upto)).fetchall()
            return [Envelope.from_json(json.loads(data)) for (data,) in rows]

        return await self._run(select)

    async def last_event(self, session_id: str, event_type: str) -> Envelope | None:
        """The session's latest stored envelope of one event type (e.g. the backend it last switched to)."""
        def select(conn: sqlite3.Connection) -> Envelope | None:
            row = conn.execute("SELECT data FROM events WHERE session_id = ? AND type = ? ORDER BY seq DESC LIMIT 1",
                               (session_id, event_type)).fetchone()
            return Envelope.from_json(json.loads(row[0])) if row else None

        return await self._run(select)

    async def submission(self, session_id: str, submission_id: str) -> str | None:
        """The op (its JSON) a client's submission id was used for in the session, or None."""

        def select(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT op FROM submissions WHERE session_id = ? AND submission_id = ?",
                               (session_id, to_db(submission_id))).fetchone()
            return None if row is None else str(from_db(row[0]))

        return await self._run(select)

    async def record_submission(self, session_id: str, submission_id: str, op: str, actor: str = "") -> None:
        """Keep a client's submission id as used for `op`; a second use of the id is refused (IntegrityError)."""

        def insert(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO submissions (session_id, submission_id, op, created, actor) VALUES (?,?,?,?,?)",
                         (session_id, to_db(submission_id), to_db(op), time.time(), actor))

        await self._run(insert)

    async def post_op(self, session_id: str, op: str) -> None:
        """Leave an op (its JSON) for the process that runs the session (`take_ops`)."""
        def insert(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO session_ops (session_id, op, created) VALUES (?,?,?)",
                         (session_id, to_db(op), time.time()))

        await self._write(insert)

    async def take_ops(self, session_id: str) -> list[str]:
        """The ops left for the session, oldest first, removed as they are taken."""
        def take(conn: sqlite3.Connection) -> list[str]:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                rows = conn.execute("SELECT id, op FROM session_ops WHERE session_id = ? ORDER BY id",
                                    (session_id,)).fetchall()
                conn.execute("DELETE FROM session_ops WHERE session_id = ? AND id <= ?",
                             (session_id, rows[-1][0] if rows else 0))
            return [str(from_db(op)) for _, op in rows]

        return await self._write(take)

    async def wait_events(self, session_id: str, timeout: float) -> None:
        """Wait for the session's events to grow; SQLite announces nothing, so this just waits (its
        callers read the store again after it)."""
        await asyncio.sleep(timeout)

    async def wait_ops(self, session_id: str, timeout: float) -> None:
        await asyncio.sleep(timeout)

    async def claim(self, session_id: str) -> str | None:
        """Take the session's lease for this process: None when taken (or already ours), else a
        description of the live process that holds it. A dead holder's lease is taken over."""
        pid, host = self._owner

        def take(conn: sqlite3.Connection) -> str | None:
            now = time.time()
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                row = conn.execute("SELECT pid, host, heartbeat, generation FROM leases WHERE session_id = ?",
                                   (session_id,)).fetchone()
                if row is not None and (row[0], row[1]) != self._owner and _lease_held(row[0], row[1], row[2], now):
                    return f"pid {row[0]} on {row[1]}"
                generation = (row[3] if row is not None else 0) + (row is None or (row[0], row[1]) != self._owner)
                conn.execute("INSERT OR REPLACE INTO leases (session_id, pid, host, heartbeat, holder, generation) "
                             "VALUES (?,?,?,?,?,?)", (session_id, pid, host, now, self.holder, generation))
            return None

        return await self._write(take)

    async def release(self, session_id: str) -> None:
        """Give up this process's lease on the session (another process's lease is left alone). A lease
        that cannot be deleted (the disk is full) is left to end with this process, whose death frees it
        for `claim`: failing here would only hide the failure that ended the session."""

        def drop(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM leases WHERE session_id = ? AND pid = ? AND host = ?",
                         (session_id, *self._owner))

        try:
            await self._write(drop)
        except StoreError as exc:
            log.debug("lease of session %s left to this process's end: %s", session_id, exc)

    async def load_items(self, session_id: str) -> list[StoredItem]:
        def select(conn: sqlite3.Connection) -> list[StoredItem]:
            rows = conn.execute("SELECT seq, turn_id, data FROM items WHERE session_id = ? ORDER BY seq",
                                (session_id,)).fetchall()
            return [StoredItem(seq, turn_id, Item.from_json(json.loads(data))) for seq, turn_id, data in rows]

        return await self._run(select)

    async def get_output(self, session_id: str, call_id: str) -> tuple[str, str, str] | None:
        def select(conn: sqlite3.Connection) -> tuple[str, str, str] | None:
            row = conn.execute("SELECT tool, arguments, full_output FROM tool_outputs "
                               "WHERE session_id = ? AND call_id = ?", (session_id, call_id)).fetchone()
            return None if row is None else tuple(from_db(v) for v in row)

        return await self._run(select)

    async def list_outputs(self, session_id: str) -> list[tuple[str, str, str, str]]:
        def select(conn: sqlite3.Connection) -> list[tuple[str, str, str, str]]:
            rows = conn.execute(
                "SELECT call_id, tool, arguments, full_output FROM tool_outputs WHERE session_id = ? ORDER BY seq",
                (session_id,)).fetchall()
            return [tuple(from_db(v) for v in row) for row in rows]

        return await self._run(select)

    async def copy_history(self, source_id: str, target_id: str, before_seq: int | None = None) -> int:
        """Copy a session's conversation (the items before `before_seq`), their stored outputs, and the
        usage recorded before the first item left out (all of it, inherited included), marked inherited,
        into another session, in one transaction; the number of items copied."""
        limit = before_seq if before_seq is not None else 1 << 62

        def copy(conn: sqlite3.Connection) -> int:
            with conn:
                conn.execute("BEGIN")
                cut = conn.execute("SELECT created FROM items WHERE session_id = ? AND seq = ?",
                                   (source_id, limit)).fetchone()
                cur = conn.execute(
                    "INSERT INTO items (session_id, seq, turn_id, type, data, created) "
                    "SELECT ?, seq, turn_id, type, data, created FROM items WHERE session_id = ? AND seq < ?",
                    (target_id, source_id, limit))
                copied = cur.rowcount
                conn.execute(
                    "INSERT INTO tool_outputs (session_id, call_id, seq, tool, arguments, full_output) "
                    "SELECT ?, call_id, seq, tool, arguments, full_output FROM tool_outputs "
                    "WHERE session_id = ? AND seq < ?", (target_id, source_id, limit))
                conn.execute(
                    "INSERT INTO usage (session_id, turn_id, model, input, cached, output, reasoning, created, "
                    "inherited, purpose) SELECT ?, turn_id, model, input, cached, output, reasoning, created, 1, "
                    "purpose FROM usage "
                    "WHERE session_id = ? AND created < ?", (target_id, source_id, cut[0] if cut else 1e300))
            return copied

        return await self._write(copy)

    async def search_messages(self, session_id: str, query: str, limit: int = 200) -> list[tuple[int, Item]]:
        """Conversation items (user, assistant, compaction summaries) whose text contains `query`,
        archived ones included."""
        needle = json_dumps(query)[1:-1]  # as the text appears inside the stored JSON (quotes, surrogates escaped)
        pattern = "%" + needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"

        def select(conn: sqlite3.Connection) -> list[tuple[int, Item]]:
            rows = conn.execute(
                "SELECT seq, data FROM items WHERE session_id = ? AND type IN "
                "('user_message', 'assistant_message', 'compaction') AND data LIKE ? ESCAPE '\\' "
                "ORDER BY seq LIMIT ?", (session_id, pattern, limit)).fetchall()
            return [(seq, Item.from_json(json.loads(data))) for seq, data in rows]

        return await self._run(select)

    # -- usage --------------------------------------------------------------------
    # -- pending changes ------------------------------------------------------------
    async def add_pending(self, session_id: str, path: str, before_hash: str, content: bytes | None,
                          mode: int | None, agent: str, call_id: str, tool: str) -> int:
        def insert(conn: sqlite3.Connection) -> int:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                seq = conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM pending_changes WHERE session_id = ?",
                                   (session_id,)).fetchone()[0]
                conn.execute(
                    "INSERT INTO pending_changes (session_id, seq, path, before_hash, content, mode, agent, call_id, "
                    "tool, created) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (session_id, seq, to_db(path), before_hash, content, mode, to_db(agent), to_db(call_id),
                     to_db(tool), time.time()))
            return seq

        return await self._write(insert)

    async def load_pending(self, session_id: str) -> list[PendingRecord]:
        def select(conn: sqlite3.Connection) -> list[PendingRecord]:
            rows = conn.execute(
                "SELECT seq, path, before_hash, content, mode, agent, call_id, tool, created FROM pending_changes "
                "WHERE session_id = ? AND state = 'pending' ORDER BY seq", (session_id,)).fetchall()
            return [PendingRecord(seq, from_db(path), before, content, mode, from_db(agent), from_db(call),
                                  from_db(tool), created)
                    for seq, path, before, content, mode, agent, call, tool, created in rows]

        return await self._run(select)

    async def settle_pending(self, session_id: str, seqs: list[int], state: str) -> None:
        def update(conn: sqlite3.Connection) -> None:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany("UPDATE pending_changes SET state = ? WHERE session_id = ? AND seq = ?",
                                 [(state, session_id, seq) for seq in seqs])

        await self._write(update)
    async def get_backend_session(self, session_id: str, backend: str) -> str | None:
        """The id a backend agent gave this session's conversation (to load it again after a restart)."""
        def read(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT agent_session_id FROM backend_sessions WHERE session_id=? AND backend=?",
                               (session_id, backend)).fetchone()
            return row[0] if row and row[0] else None

        return await self._run(read)

    async def set_backend_session(self, session_id: str, backend: str, agent_session_id: str) -> None:
        def write(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT OR REPLACE INTO backend_sessions VALUES (?, ?, ?)",
                         (session_id, backend, agent_session_id))

        await self._write(write)

    async def record_usage(self, session_id: str, turn_id: str, model: str, usage: Usage,
                           purpose: str = "turn") -> None:
        def insert(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO usage (session_id, turn_id, model, input, cached, output, reasoning, created, "
                         "purpose) VALUES (?,?,?,?,?,?,?,?,?)",
                         (session_id, turn_id, model, usage.input_tokens, usage.cached_input_tokens,
                          usage.output_tokens, usage.reasoning_tokens, time.time(), purpose))

        await self._write(insert)

    async def usage_breakdown(self, session_id: str, *, inherited: bool = False) -> list[tuple[str, str, Usage]]:
        """The session's own usage per model and purpose; with `inherited`, what it took over from the session
        it was forked from instead."""
        def select(conn: sqlite3.Connection) -> list[tuple[str, str, Usage]]:
            rows = conn.execute("SELECT model, purpose, SUM(input), SUM(cached), SUM(output), SUM(reasoning) "
                                "FROM usage WHERE session_id = ? AND inherited = ? GROUP BY model, purpose "
                                "ORDER BY model, purpose", (session_id, int(inherited))).fetchall()
            return [(model, purpose, Usage(*numbers)) for model, purpose, *numbers in rows]

        return await self._run(select)

    async def usage_total(self, session_id: str, *, inherited: bool = False) -> Usage:
        """The session's own usage; with `inherited`, what it took over from the session it was forked from."""
        def select(conn: sqlite3.Connection) -> Usage:
            row = conn.execute("SELECT COALESCE(SUM(input),0), COALESCE(SUM(cached),0), COALESCE(SUM(output),0), "
                               "COALESCE(SUM(reasoning),0) FROM usage WHERE session_id = ? AND inherited = ?",
                               (session_id, int(inherited))).fetchone()
            return Usage(*row)

        return await self._run(select)


def migrate_file(path: Path) -> tuple[int, int]:
    """`auger db migrate` on a SQLite file: (version before, version after)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, isolation_level=None, timeout=10)
        try:
            before = conn.execute("PRAGMA user_version").fetchone()[0]
            _migrate(conn, str(path))
            return before, conn.execute("PRAGMA user_version").fetchone()[0]
        finally:
            conn.close()
    except (sqlite3.Error, OSError) as exc:
        raise StoreError(f"cannot open session database {path}: {exc}") from exc


def _settle(outcomes: list[_Outcome]) -> None:
    """On the loop: give each write's waiter its result or failure (unless it stopped waiting)."""
    for future, result, exc in outcomes:
        if future.done():
            continue
        if exc is None:
            future.set_result(result)
        else:
            future.set_exception(exc)


def _migrate(conn: sqlite3.Connection, where: str) -> None:
    """Bring the file's schema to the latest version (store/migrations), each step in one transaction;
    a newer file than this code knows is refused."""
    steps = migrations("sqlite")
    known = steps[-1].version
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > known:
        raise StoreError(newer_schema(where, version, known))
    for step in steps:
        if step.version <= version:
            continue
        with conn:
            conn.execute("BEGIN IMMEDIATE")
            if conn.execute("PRAGMA user_version").fetchone()[0] >= step.version:
                continue  # another process migrated it meanwhile
            for statement in step.statements():
                conn.execute(statement)
            if step.version == 8:  # the base: files of versions 1-7 may lack columns added since
                for table, column, declaration in _COLUMNS:
                    if column not in {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}:
                        conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
            conn.execute(f"PRAGMA user_version={step.version}")


def _lease_held(pid: int, host: str, heartbeat: float, now: float) -> bool:
    """Whether a lease still belongs to a running process (on another host: a recent heartbeat)."""
    if host == socket.gethostname():
        return process_alive(pid)
    return now - heartbeat < LEASE_STALE_S


def to_db(text: str) -> str | bytes:
    """A value SQLite can bind: the text, or its `surrogatepass` UTF-8 bytes when it holds a lone
    surrogate (text from a model is data and must round-trip exactly)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def from_db(value: Any) -> Any:
    """The text `to_db` was given (bytes back to str); other values unchanged."""
    return value.decode("utf-8", "surrogatepass") if isinstance(value, bytes) else value


_SESSION_SELECT = ("SELECT s.id, s.created, s.updated, s.cwd, s.provider, s.model, s.mode, s.title, "
                   "(SELECT COUNT(*) FROM items i WHERE i.session_id = s.id), s.created_by FROM sessions s")


_USER_COLUMNS = "name, role, created, created_by, revoked"
_SHARE_COLUMNS = "id, session_id, created, created_by, expires, revoked"




def _schedule_values(record: ScheduleRecord) -> tuple[Any, ...]:
    return (record.id, record.cadence, record.tz, record.missed, record.spec, record.queue, record.priority,
            record.max_attempts, int(record.paused), record.next_run, record.created, to_db(record.created_by),
            record.last_run, record.last_target, record.runs, record.skipped)


def _schedule(row: Any) -> ScheduleRecord:
    values = [from_db(v) for v in row]
    values[8] = bool(values[8])
    return ScheduleRecord(*values)


def _run(row: Any) -> ScheduleRun:
    values = [from_db(v) for v in row]
    values[4] = bool(values[4])
    return ScheduleRun(*values)


def _delivery(row: Any) -> DeliveryRecord:
    return DeliveryRecord(*(from_db(v) for v in row))


def _session(row: Any) -> SessionRecord:
    return SessionRecord(*(from_db(v) for v in row))
