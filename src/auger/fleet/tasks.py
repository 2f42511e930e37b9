"""The fleet's record of truth: the `tasks` table (state, attempts, the attempt's session) and one
`task_results` row per finished task, in the PostgreSQL store.

The queue library only delivers task ids (fleet/queue.py); whatever a delivery means is decided here,
against these rows, in transactions:

- `submit` inserts a task once per client-chosen submission id (a repeat returns the first record);
- `begin_attempt` runs under the task's lease (`task:<id>` in the store's leases): it counts the
  attempt, marks the task running and names the session the attempt will record;
- `finish` writes the result and the final state in one transaction that is fenced on the lease —
  holder and generation — so a worker that lost its lease (paused past the timeout, taken over) writes
  nothing.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from auger.fleet.policy import TaskRefused, TaskSpec, check_spec
from auger.ids import new_hex
from auger.protocol.events import Usage
from auger.protocol.ops import Interrupt
from auger.store.postgres import b, t

if TYPE_CHECKING:
    from psycopg import AsyncConnection

    from auger.store.postgres import PostgresStore

STATES = ("queued", "running", "waiting", "done", "failed", "cancelled")
FINAL = ("done", "failed", "cancelled")


def lease_key(task_id: str) -> str:
    """The task's lease in the store's leases table: whoever holds it runs the task."""
    return f"task:{task_id}"


@dataclass
class TaskRecord:
    id: str
    submission_id: str | None
    queue: str
    state: str
    spec: TaskSpec
    priority: int
    attempts: int
    max_attempts: int
    session_id: str | None
    worker: str | None
    cancel_requested: bool
    retried: int
    created: float
    started: float | None
    finished: float | None
    exit_reason: str | None
    error: str | None
    submitted_by: str = ""
    parked: dict[str, Any] | None = None  # waiting: the approval it waits for (`request`), its call, its base
    answer: dict[str, Any] | None = None  # the answer that resumed (or will resume) it, and who gave it
    origin: str | None = None  # what queued it, when not a person: `schedule:ID@DUE`, `intake:NAME:DELIVERY`
    refusal: str | None = None  # why the stored spec may not run (a row no submit route would write)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["spec"] = self.spec.to_json()
        data["waiting_for"] = self.parked["request"] if self.parked and self.state == "waiting" else None
        data["parked"] = None if self.parked is None else {k: v for k, v in self.parked.items() if k != "request"}
        return data

    def same_submission(self, spec: TaskSpec, queue: str, priority: int, max_attempts: int) -> bool:
        """Whether a repeat of this task's submission id asks for exactly this task."""
        return (self.spec, self.queue, self.priority, self.max_attempts) == (spec, queue, priority, max_attempts)


class AnswerRefused(Exception):
    """An answer to a parked task's approval that does not count: `status` says how (404: no such task,
    409: nothing waits or it was answered already, 400: not one of the request's options)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class SubmissionConflict(Exception):
    """A submission id used before for another task: nothing new is queued; `first` is that task."""

    def __init__(self, first: TaskRecord) -> None:
        super().__init__(f"submission id {first.submission_id!r} was already used for another task "
                         f"({first.id}): nothing was queued")
        self.first = first


@dataclass(frozen=True)
class TaskResult:
    session_id: str
    final_message: str
    diff: str  # the whole change against the base, as `git diff --binary`
    turn_diffs: list[str]
    usage: Usage
    cost: float | None
    exit_reason: str  # complete | cancelled | error | budget … (the turn's end reason, or why none ran)
    delivery: dict[str, Any] | None = None  # what was delivered past the database: a branch, a pull request…

    def to_json(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "final_message": self.final_message, "diff": self.diff,
                "turn_diffs": self.turn_diffs, "usage": asdict(self.usage), "cost": self.cost,
                "exit_reason": self.exit_reason, "delivery": self.delivery}


_COLUMNS = ("id, submission_id, queue, state, spec, priority, attempts, max_attempts, session_id, worker, "
            "cancel_requested, retried, created, started, finished, exit_reason, error, submitted_by, parked, answer, "
            "origin")


def _record(row: tuple[Any, ...]) -> TaskRecord:
    """A task's row. Its spec is checked as a worker checks it: the database is not trusted either, so a
    spec no submit route would have written is kept for display with the reason it may not run."""
    values = list(row)
    values[4], refusal = _checked_spec(values[4])
    values[18:20] = [json.loads(t(v)) if v is not None else None for v in values[18:20]]
    record = TaskRecord(*values)
    record.refusal = refusal
    return record


def _checked_spec(raw: str) -> tuple[TaskSpec, str | None]:
    try:
        data = json.loads(raw)
    except ValueError:
        return _shown_spec({}), "the stored spec is not JSON"
    try:
        return check_spec(data), None
    except TaskRefused as exc:
        return _shown_spec(data if isinstance(data, dict) else {}), str(exc)


def _shown_spec(data: dict[str, Any]) -> TaskSpec:
    """What can be shown of a spec that does not pass the check (never run)."""
    text = {key: str(data.get(key) or "") for key in ("prompt", "repo", "ref")}
    return TaskSpec(prompt=text["prompt"][:2000] or "(unreadable)", repo=text["repo"][:2000],
                    ref=text["ref"][:256] or "HEAD")


class Tasks:
    """The tasks table over a PostgreSQL store's connections."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store

    async def submit(self, spec: TaskSpec, *, queue: str = "default", priority: int = 0, max_attempts: int = 3,
                     submission_id: str | None = None, submitted_by: str = "", origin: str | None = None
                     ) -> tuple[TaskRecord, bool]:
        """Insert the task; (record, True). A submission id used before for the same task: (the first
        record, False); for another task: SubmissionConflict (nothing is inserted)."""
        task_id = new_hex(32)

        async def insert(conn: AsyncConnection) -> tuple[TaskRecord, bool]:
            row = await (await conn.execute(
                f"INSERT INTO tasks ({_COLUMNS}) VALUES (%s,%s,%s,'queued',%s,%s,0,%s,NULL,NULL,FALSE,0,%s,NULL,NULL,"
                f"NULL,NULL,%s,NULL,NULL,%s) ON CONFLICT DO NOTHING RETURNING {_COLUMNS}",
                (task_id, submission_id, queue, json.dumps(spec.to_json()), priority, max_attempts, time.time(),
                 submitted_by, origin))
            ).fetchone()
            if row is not None:
                return _record(row), True
            first = await (await conn.execute(f"SELECT {_COLUMNS} FROM tasks WHERE id = %s OR submission_id = %s",
                                              (task_id, submission_id))).fetchone()
            assert first is not None, "a conflicting submission id names a task"
            record = _record(first)
            if record.id == task_id:  # this very insert, made before the connection was lost
                return record, True
            if not record.same_submission(spec, queue, priority, max_attempts):
                raise SubmissionConflict(record)
            return record, False

        return await self.store.autocommit(insert, repeatable=True)  # made twice: found, not doubled

    async def get(self, id_or_prefix: str) -> TaskRecord | None:
        """The task with this id, or the one whose id starts with it (None: none, or several)."""
        rows = await self._rows(f"SELECT {_COLUMNS} FROM tasks WHERE id = %s", (id_or_prefix,))
        if not rows and len(id_or_prefix) >= 4 and id_or_prefix.isalnum():
            rows = await self._rows(f"SELECT {_COLUMNS} FROM tasks WHERE id LIKE %s LIMIT 2", (id_or_prefix + "%",))
        return _record(rows[0]) if len(rows) == 1 else None

    async def recent(self, limit: int = 50, state: str | None = None, label: str | None = None
                     ) -> list[TaskRecord]:
        """The latest tasks, newest first; only those in `state`, or carrying `label`, when given."""
        where: list[str] = []
        params: list[Any] = []
        if state:
            where.append("state = %s")
            params.append(state)
        if label:
            where.append("spec::jsonb -> 'labels' ? %s")
            params.append(label)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = await self._rows(f"SELECT {_COLUMNS} FROM tasks {clause} ORDER BY created DESC LIMIT %s",
                                (*params, limit))
        return [_record(r) for r in rows]

    async def result(self, task_id: str) -> TaskResult | None:
        rows = await self._rows("SELECT session_id, final_message, diff, turn_diffs, input_tokens, cached_tokens, "
                                "output_tokens, reasoning_tokens, cost, exit_reason, delivery FROM task_results "
                                "WHERE task_id = %s", (task_id,))
        if not rows:
            return None
        r = rows[0]
        return TaskResult(r[0], t(r[1]), t(r[2]), json.loads(r[3]),
                          Usage(int(r[4]), int(r[5]), int(r[6]), int(r[7])), r[8], r[9],
                          json.loads(r[10]) if r[10] else None)

    async def costs(self, task_ids: list[str]) -> dict[str, float | None]:
        """What each finished task's session cost (USD; None: a price is unknown), in one query; a task
        with no result yet is absent."""
        rows = await self._rows("SELECT task_id, cost FROM task_results WHERE task_id = ANY(%s)", (task_ids,))
        return {task_id: None if cost is None else float(cost) for task_id, cost in rows}

    async def _rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        async def select(conn: AsyncConnection) -> list[tuple[Any, ...]]:
            return await (await conn.execute(sql, params)).fetchall()

        return await self.store.autocommit(select, "read", repeatable=True)

    # -- a worker's side --------------------------------------------------------------------
    async def begin_attempt(self, task_id: str, generation: int) -> tuple[str, TaskRecord | None, str | None]:
        """Start an attempt under the lease this store holds (generation `generation`).

        Returns ("run", record before the attempt, None): the attempt is counted and the task is running, its
        `session_id` still the previous attempt's until `attach_session`; ("resume", record, diff): the same
        for a parked task that was answered — the record carries the approval it parked on (`parked`) and
        the answer, `diff` is its tree as it was left, and the park is taken off the task in this same
        transaction, so no second attempt resumes it (a later one starts afresh); ("final", record, None):
        nothing to run (done, failed, cancelled, or waiting for its answer); or ("exhausted", record, None):
        no attempt left, the task is marked failed. Nothing changes unless the lease is ours."""

        async def begin(conn: AsyncConnection) -> tuple[str, TaskRecord | None, str | None]:
            row = await (await conn.execute(
                f"SELECT {_COLUMNS}, parked_diff, EXISTS (SELECT 1 FROM leases WHERE session_id = %s AND holder = %s "
                "AND generation = %s) FROM tasks WHERE id = %s FOR UPDATE",
                (*_lease(self.store, task_id, generation), task_id))).fetchone()
            if row is None:
                return "final", None, None
            before = _record(row[:-2])
            if before.state in (*FINAL, "waiting") or not row[-1]:
                return "final", before, None
            if before.cancel_requested:
                await conn.execute("UPDATE tasks SET state = 'cancelled', finished = %s, exit_reason = 'cancelled' "
                                   "WHERE id = %s", (time.time(), task_id))
                return "final", before, None
            if before.attempts >= before.max_attempts:
                await conn.execute("UPDATE tasks SET state = 'failed', finished = %s, exit_reason = 'attempts', "
                                   "error = %s WHERE id = %s",
                                   (time.time(), f"no attempt left of {before.max_attempts}", task_id))
                return "exhausted", before, None
            await conn.execute(
                "UPDATE tasks SET state = 'running', attempts = attempts + 1, worker = %s, parked = NULL, "
                "parked_diff = NULL, started = COALESCE(started, %s), "
                "retried = retried + CASE WHEN attempts > 0 THEN 1 ELSE 0 END WHERE id = %s",
                (self.store.holder, time.time(), task_id))
            if before.parked is not None and before.answer is not None:
                return "resume", before, t(row[-2])
            return "run", before, None

        return await self.store.transaction(begin)

    async def attach_session(self, task_id: str, session_id: str, generation: int) -> bool:
        """Name the attempt's session on the task (fenced on the lease); whether a cancel was asked for
        meanwhile (its interrupt could not reach a session that did not exist yet)."""

        async def write(conn: AsyncConnection) -> bool:
            row = await (await conn.execute(
                f"{_FENCED} UPDATE tasks SET session_id = %s WHERE id = %s AND EXISTS (SELECT 1 FROM lease) "
                "RETURNING cancel_requested", (*_lease(self.store, task_id, generation), session_id, task_id))
            ).fetchone()
            return bool(row and row[0])

        return await self.store.autocommit(write, repeatable=True)

    async def finish(self, task_id: str, generation: int, state: str, result: TaskResult | None,
                     error: str | None = None, exit_reason: str | None = None) -> bool:
        """Record the attempt's outcome — its result row and the task's final state — in one transaction,
        only while this store still holds the task's lease at `generation`. False: the lease was lost and
        nothing was written (another worker owns the task now)."""

        reason = result.exit_reason if result is not None else exit_reason or (error and "error")
        now = time.time()
        params: tuple[Any, ...] = (*_lease(self.store, task_id, generation), state, now, reason, error, task_id)
        recorded = ""
        if result is not None:
            u = result.usage
            recorded = (", recorded AS (INSERT INTO task_results (task_id, session_id, final_message, diff, "
                        "turn_diffs, input_tokens, cached_tokens, output_tokens, reasoning_tokens, cost, exit_reason, "
                        "created, delivery) SELECT id, %s, %s, %s, %s, %s, %s, %s, %s, %s::double precision, %s, %s, "
                        "%s::text FROM finished)")
            params += (result.session_id, b(result.final_message), b(result.diff), json.dumps(result.turn_diffs),
                       u.input_tokens, u.cached_input_tokens, u.output_tokens, u.reasoning_tokens, result.cost,
                       result.exit_reason, now,
                       json.dumps(result.delivery) if result.delivery is not None else None)

        async def write(conn: AsyncConnection) -> bool:
            row = await (await conn.execute(
                f"{_FENCED}, finished AS (UPDATE tasks SET state = %s, finished = %s, exit_reason = %s, error = %s "
                f"WHERE id = %s AND EXISTS (SELECT 1 FROM lease) RETURNING id){recorded} "
                "SELECT EXISTS (SELECT 1 FROM lease)", params)).fetchone()
            return bool(row and row[0])

        return await self.store.autocommit(write)

    async def release(self, task_id: str, generation: int) -> bool:
        """Give the task back to the queue (a worker shutting down): queued again, its attempt not counted."""

        async def write(conn: AsyncConnection) -> bool:
            row = await (await conn.execute(
                f"{_FENCED}, given AS (UPDATE tasks SET state = 'queued', attempts = GREATEST(attempts - 1, 0), "
                "worker = NULL WHERE id = %s AND state = 'running' AND EXISTS (SELECT 1 FROM lease)) "
                "SELECT EXISTS (SELECT 1 FROM lease)", (*_lease(self.store, task_id, generation), task_id))
            ).fetchone()
            return bool(row and row[0])

        return await self.store.autocommit(write, repeatable=True)  # again: no longer running, nothing changes

    async def park(self, task_id: str, generation: int, parked: dict[str, Any], diff: str) -> bool:
        """The attempt stops to wait for a person (fleet/worker.py): the task is `waiting` with the approval
        it waits for and its tree's diff against the base, holds no worker, and its attempt is given back
        (the resume counts one). Fenced on the lease, as `finish`."""

        async def write(conn: AsyncConnection) -> bool:
            row = await (await conn.execute(
                f"{_FENCED}, waiting AS (UPDATE tasks SET state = 'waiting', parked = %s, parked_diff = %s, "
                "answer = NULL, worker = NULL, attempts = GREATEST(attempts - 1, 0) "
                "WHERE id = %s AND state = 'running' AND EXISTS (SELECT 1 FROM lease)) "
                "SELECT EXISTS (SELECT 1 FROM lease)",
                (*_lease(self.store, task_id, generation), b(json.dumps(parked)), b(diff), task_id))).fetchone()
            return bool(row and row[0])

        return await self.store.autocommit(write, repeatable=True)  # again: no longer running, nothing changes

    async def answer(self, task_id: str, request_id: str, decision: str, feedback: str | None, by: str
                     ) -> TaskRecord:
        """Answer the approval a waiting task parked on: the first valid answer wins and queues the task
        again (the caller delivers it: fleet/submit.py); AnswerRefused otherwise."""

        async def write(conn: AsyncConnection) -> TaskRecord:
            row = await (await conn.execute(f"SELECT {_COLUMNS} FROM tasks WHERE id = %s FOR UPDATE",
                                            (task_id,))).fetchone()
            if row is None:
                raise AnswerRefused(404, f"no task has the id {task_id}")
            record = _record(row)
            if record.answer is not None and record.answer.get("request_id") == request_id:
                raise AnswerRefused(409, f"approval request {request_id!r} was already answered by "
                                         f"{record.answer.get('by') or 'someone'}; decision ignored")
            request = (record.parked or {}).get("request", {}) if record.state == "waiting" else {}
            if request.get("request_id") != request_id:
                raise AnswerRefused(409, f"no approval request {request_id!r} of task {task_id} is waiting "
                                         f"(the task is {record.state}); decision ignored")
            options = request.get("options") or []
            if decision not in options:
                raise AnswerRefused(400, f"decision {decision!r} is not one of {', '.join(options)}; still waiting")
            answer = {"request_id": request_id, "decision": decision, "feedback": feedback, "by": by,
                      "time": time.time()}
            updated = await (await conn.execute(
                f"UPDATE tasks SET answer = %s, state = 'queued' WHERE id = %s RETURNING {_COLUMNS}",
                (b(json.dumps(answer)), task_id))).fetchone()
            assert updated is not None, "the row is locked"
            return _record(updated)

        return await self.store.transaction(write)

    async def waiting_for(self, session_id: str) -> TaskRecord | None:
        """The waiting task whose session this is (its approval is in `parked`), or None."""
        rows = await self._rows(f"SELECT {_COLUMNS} FROM tasks WHERE session_id = %s AND state = 'waiting'",
                                (session_id,))
        return _record(rows[0]) if rows else None

    async def owns_session(self, session_id: str) -> bool:
        """Whether the session is a task's attempt (the current one, or one before it)."""
        rows = await self._rows("SELECT 1 FROM tasks WHERE session_id = %s UNION ALL "
                                "SELECT 1 FROM session_links WHERE child_id = %s AND agent = %s LIMIT 1",
                                (session_id, session_id, b("retry")))
        return bool(rows)

    async def cancel_requested(self, task_id: str) -> bool:
        rows = await self._rows("SELECT cancel_requested FROM tasks WHERE id = %s", (task_id,))
        return bool(rows and rows[0][0])

    # -- a user's side ----------------------------------------------------------------------
    async def cancel(self, task_id: str) -> TaskRecord | None:
        """Cancel a task: a queued one at once; a running one is asked to stop (its worker interrupts the
        session within seconds and records it cancelled). None: no such task."""

        async def write(conn: AsyncConnection) -> TaskRecord | None:
            row = await (await conn.execute(
                "UPDATE tasks SET cancel_requested = TRUE, "
                "state = CASE WHEN state IN ('queued', 'waiting') THEN 'cancelled' ELSE state END, "
                "finished = CASE WHEN state IN ('queued', 'waiting') THEN %s ELSE finished END, "
                "exit_reason = CASE WHEN state IN ('queued', 'waiting') THEN 'cancelled' ELSE exit_reason END "
                f"WHERE id = %s AND state NOT IN ('done', 'failed', 'cancelled') RETURNING {_COLUMNS}",
                (time.time(), task_id))).fetchone()
            if row is not None and row[3] == "running" and row[8]:  # interrupt its session, where it runs
                await conn.execute("INSERT INTO session_ops (session_id, op, created) VALUES (%s, %s, %s)",
                                   (row[8], json.dumps(Interrupt("cancelled").to_json()).encode(), time.time()))
            return _record(row) if row else None

        return await self.store.transaction(write)

    async def retry(self, task_id: str) -> TaskRecord | None:
        """Queue a failed or cancelled task again, with its attempts counted afresh; None unless it was."""

        async def write(conn: AsyncConnection) -> TaskRecord | None:
            row = await (await conn.execute(
                "UPDATE tasks SET state = 'queued', attempts = 0, cancel_requested = FALSE, retried = retried + 1, "
                "finished = NULL, exit_reason = NULL, error = NULL, parked = NULL, parked_diff = NULL, answer = NULL "
                f"WHERE id = %s AND state IN ('failed', 'cancelled') RETURNING {_COLUMNS}", (task_id,))).fetchone()
            if row is not None:
                await conn.execute("DELETE FROM task_results WHERE task_id = %s", (task_id,))
            return _record(row) if row else None

        return await self.store.transaction(write)

    async def stats(self) -> dict[str, Any]:
        """Queue depth, running, done, failed, cancelled, retried, tokens and cost, and how long tasks
        waited (submit → started) and ran, over all tasks."""
        rows = await self._rows("SELECT state, COUNT(*), COALESCE(SUM(retried), 0) FROM tasks GROUP BY state", ())
        counts = {state: 0 for state in STATES}
        retried = 0
        for state, count, again in rows:
            counts[state] = int(count)
            retried += int(again)
        usage = (await self._rows(
            "SELECT COALESCE(SUM(input_tokens),0), COALESCE(SUM(cached_tokens),0), COALESCE(SUM(output_tokens),0), "
            "COALESCE(SUM(reasoning_tokens),0), COALESCE(SUM(cost),0), COUNT(cost) FROM task_results", ()))[0]
        times = (await self._rows(
            "SELECT AVG(started - created), AVG(finished - started) FROM tasks WHERE state = 'done'", ()))[0]
        return {"queued": counts["queued"], "running": counts["running"], "waiting": counts["waiting"],
                "done": counts["done"],
                "failed": counts["failed"], "cancelled": counts["cancelled"], "retried": retried,
                "tokens": {"input": int(usage[0]), "cached": int(usage[1]), "output": int(usage[2]),
                           "reasoning": int(usage[3])},
                "cost": float(usage[4]) if usage[5] else None,
                "avg_wait_s": None if times[0] is None else round(float(times[0]), 3),
                "avg_run_s": None if times[1] is None else round(float(times[1]), 3)}


# A write fenced on the task's lease: it changes the task only while the lease row names this store's holder
# at the attempt's generation, and it locks that row to its commit, so a takeover waits for the write.
_FENCED = "WITH lease AS (SELECT 1 FROM leases WHERE session_id = %s AND holder = %s AND generation = %s FOR UPDATE)"


def _lease(store: PostgresStore, task_id: str, generation: int) -> tuple[str, str, int]:
    """The parameters of `_FENCED` (and of a lease check): the task's lease, held by the store at `generation`."""
    return lease_key(task_id), store.holder, generation
