"""Schedules: a task run on a cadence, fired exactly once per due time however many processes look.

A schedule is a cadence (fleet/cron.py: five cron fields in a time zone, or `@every DURATION`), the task
each run is (a spec, held to fleet/policy.py like any other task's: data, never configuration), and a
missed-run policy. It lives in the store (schedules, schedule_runs), so it survives every restart.

Who fires: every `auger worker` and every `auger serve` on a PostgreSQL store runs the same loop
(`Scheduler`); on SQLite — one machine — `auger serve` does. Each pass:

1. **Claim.** In one transaction, the schedules due now (`next_run <= now`, not paused) are locked
   (`FOR UPDATE SKIP LOCKED`: another process skips a row this one holds), each gets its run row —
   keyed by (schedule, due time), so a due time can be claimed once and never twice — and its `next_run`
   moves on. "Now" is the database's clock on PostgreSQL, so machines whose clocks disagree still agree
   on what is due.
2. **Start.** Each claimed run is started after the commit: on PostgreSQL a fleet task (fleet/submit.py)
   whose submission id is the run's key, `schedule:ID:DUE` — so starting a run twice makes one task; on
   SQLite a session of `auger serve` in the schedule's directory. The run records what it started.
3. **Recover.** A run claimed and never started (its process died between the two) is taken over after
   `STALE_S` by whichever process looks next, and started — once, by the same key.

**Missed runs.** A due time fired within its grace (a minute, or half the time to the next due time if
that is shorter) is on time. Past it — every process was down, the schedule was due while none ran —
the policy decides: `once` (the default) fires one late run now for all the due times missed, `skip`
fires nothing and counts them; either way the next run is the next due time after now. A paused
schedule's due times do not count as missed: resuming it starts from the next due time.

Why not pgqueuer's own scheduler (read in 1.6): its schedules are registered in code when a process
starts — `(entrypoint, cron expression)` pairs — so a schedule added by `auger schedule add` would not be
seen by running processes; it computes the next run as the database's `NOW()` plus a delay taken from
the process's own clock, so a machine whose clock is behind can fire the same minute again; a dispatch
whose heartbeat goes stale is picked and run again (its own code says so); and its missed-run behaviour
is fixed. auger keeps the shape — a row per schedule, `SKIP LOCKED`, `next_run` in the database's clock —
and adds the run's key that makes a due time fire once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from auger.fleet.cron import Cadence, CadenceError, parse
from auger.fleet.policy import TaskRefused, TaskSpec, check_row, check_spec
from auger.ids import new_hex
from auger.store.base import RunPlan, ScheduleRecord, ScheduleRun, StoreError

if TYPE_CHECKING:
    from auger.store.base import Store

log = logging.getLogger("auger.schedules")

MISSED = ("once", "skip")
GRACE_S = 60.0  # a run fired this late (at most half its period) is on time
STALE_S = 30.0  # a run claimed this long ago and never started is taken over
MAX_WAIT_S = 30.0  # the longest the loop sleeps without looking again
CLOCK_CHECK_S = 60.0  # how often the database's clock is read again (PostgreSQL)
MAX_SCHEDULES = 1000


class ScheduleRefused(ValueError):
    """A schedule that may not be made as given; the message says which field and why."""


@dataclass(frozen=True)
class Schedule:
    """A stored schedule, read back and checked: its cadence parsed, its task's spec checked as a worker
    checks one (`refusal` says why it may not run: the database is not trusted either)."""

    record: ScheduleRecord
    cadence: Cadence | None
    spec: TaskSpec | None
    refusal: str | None = None

    @property
    def id(self) -> str:
        return self.record.id

    def to_json(self) -> dict[str, Any]:
        r = self.record
        try:
            spec = json.loads(r.spec)
        except ValueError:
            spec = None
        return {"id": r.id, "cadence": r.cadence, "tz": r.tz, "missed": r.missed, "paused": r.paused,
                "next_run": None if r.paused else r.next_run, "spec": self.spec.to_json() if self.spec else spec,
                "queue": r.queue, "priority": r.priority, "max_attempts": r.max_attempts, "created": r.created,
                "created_by": r.created_by, "last_run": r.last_run, "last_target": r.last_target, "runs": r.runs,
                "skipped": r.skipped, "refusal": self.refusal}


def read(record: ScheduleRecord) -> Schedule:
    """A stored schedule with its cadence and spec checked."""
    try:
        cadence = parse(record.cadence, record.tz, anchor=record.created)
    except CadenceError as exc:
        return Schedule(record, None, None, str(exc))
    try:
        return Schedule(record, cadence, check_spec(json.loads(record.spec)))
    except (ValueError, TaskRefused) as exc:
        return Schedule(record, cadence, None, str(exc))


def new_schedule(cadence: str, spec: TaskSpec, *, tz: str = "UTC", missed: str = "once", queue: str = "default",
                 priority: int = 0, max_attempts: int = 3, created_by: str = "", now: float | None = None
                 ) -> ScheduleRecord:
    """A new schedule's record, every field checked (ScheduleRefused otherwise); first due at the cadence's
    next due time after `now`."""
    created = time.time() if now is None else now
    if missed not in MISSED:
        raise ScheduleRefused(f"missed must be one of {', '.join(MISSED)}, not {missed!r}")
    try:
        parsed = parse(cadence, tz, anchor=created)
        check_row(queue, priority, max_attempts)
    except (CadenceError, TaskRefused) as exc:
        raise ScheduleRefused(str(exc)) from None
    return ScheduleRecord(new_hex(32), parsed.text, tz, missed, json.dumps(spec.to_json()), queue, priority,
                          max_attempts, False, parsed.next_after(created), created, created_by)


SCHEDULE_FIELDS = frozenset({"cron", "every", "tz", "missed", "queue", "priority", "max_attempts"})


def schedule_from_fields(fields: dict[str, Any], *, created_by: str = "", now: float | None = None) -> ScheduleRecord:
    """A new schedule from what a client sent (`auger schedule add`, `POST /api/fleet/schedules`): `cron`
    or `every`, `tz`, `missed`, the row's `queue`, `priority`, `max_attempts`, and the task's own fields
    (checked by fleet/policy.py: data, never configuration). ScheduleRefused for anything else."""
    spec_fields = {k: v for k, v in fields.items() if k not in SCHEDULE_FIELDS}
    cron, every = fields.get("cron"), fields.get("every")
    if (cron is None) == (every is None):
        raise ScheduleRefused("give when it runs: cron (five fields, or @daily…) or every (a duration like 10m)")
    if every is not None and not isinstance(every, str):
        raise ScheduleRefused("every must be a duration like 30s, 10m, 2h or 1d")
    tz = fields.get("tz", "UTC")
    if not isinstance(tz, str):
        raise ScheduleRefused("tz must be an IANA time zone name, like UTC or Europe/Paris")
    try:
        spec = check_spec(spec_fields)
    except TaskRefused as exc:
        raise ScheduleRefused(str(exc)) from None
    return new_schedule(cron if cron is not None else f"@every {every}", spec, tz=tz,
                        missed=fields.get("missed", "once"), queue=fields.get("queue", "default"),
                        priority=fields.get("priority", 0), max_attempts=fields.get("max_attempts", 3),
                        created_by=created_by, now=now)


def plan_run(record: ScheduleRecord, now: float) -> RunPlan:
    """What becomes of a schedule found due at `now`: its run (on time, or late by the policy `once`), or
    nothing (late, policy `skip`), and its next due time after now. A schedule whose cadence no longer
    parses is skipped and left a day on (its refusal is shown in the list)."""
    try:
        cadence = parse(record.cadence, record.tz, anchor=record.created)
    except CadenceError:
        return RunPlan(None, now + 86400.0)
    due = record.next_run
    following = cadence.next_after(due)
    grace = min(GRACE_S, (following - due) / 2)
    upcoming = cadence.next_after(now)
    if now - due <= grace:
        return RunPlan(due, upcoming)
    missed = cadence.due_between(due, now)  # the due times after the first one missed
    if record.missed == "skip":
        return RunPlan(None, upcoming, missed=missed)
    return RunPlan(due, upcoming, late=True, missed=missed)


def run_key(run: ScheduleRun) -> str:
    """The run's key: as a task's submission id, it makes a run started twice one task."""
    return f"schedule:{run.schedule_id}:{run.due:.3f}"


# What starting a run gave: a task's id or a session's (None: refused, with the reason).
@dataclass(frozen=True)
class Started:
    task_id: str | None = None
    session_id: str | None = None
    error: str | None = None


Starter = Callable[[Schedule, ScheduleRun], Awaitable[Started]]


def fleet_starter(store: Any) -> Starter:
    """Start a run as a fleet task, on a PostgreSQL store: recorded and delivered (fleet/submit.py) under
    the run's key, labelled with its schedule and linked to it (`origin`)."""

    async def start(schedule: Schedule, run: ScheduleRun) -> Started:
        from auger.fleet.submit import submit

        if schedule.spec is None:
            return Started(error=f"refused: {schedule.refusal}")
        spec = schedule.spec
        label = f"schedule:{schedule.id}"
        if label not in spec.labels and len(spec.labels) < 16:
            spec = dataclasses.replace(spec, labels=(*spec.labels, label))
        r = schedule.record
        record, _ = await submit(store, spec, queue_name=r.queue, priority=r.priority, max_attempts=r.max_attempts,
                                 submission_id=run_key(run), submitted_by=f"schedule {schedule.id[:12]}",
                                 origin=f"schedule:{schedule.id}@{run.due:.0f}")
        return Started(task_id=record.id)

    return start


class Scheduler:
    """The firing loop of one process (see the module docstring). `clock` gives "now" (default: the
    database's clock on PostgreSQL, this machine's on SQLite); `start` starts a claimed run."""

    def __init__(self, store: Store, start: Starter, *, clock: Callable[[], Awaitable[float]] | None = None,
                 max_wait_s: float = MAX_WAIT_S) -> None:
        self.store = store
        self.start = start
        self.clock = clock or self._store_clock
        self.max_wait_s = max_wait_s
        self._stopping = asyncio.Event()
        self._poked = asyncio.Event()
        self._offset: float | None = None
        self._offset_at = 0.0
        self._recovered_at = 0.0
        self.fired = 0

    def stop(self) -> None:
        self._stopping.set()

    def poke(self) -> None:
        """A schedule changed in this process: look again now."""
        self._poked.set()

    async def _store_clock(self) -> float:
        """The database's clock where it has one (PostgreSQL): read once a minute, kept as an offset."""
        now = getattr(self.store, "now", None)
        if now is None:
            return time.time()
        if self._offset is None or time.monotonic() - self._offset_at > CLOCK_CHECK_S:
            before = time.time()
            theirs = await now()
            self._offset = theirs - (before + time.time()) / 2
            self._offset_at = time.monotonic()
        return time.time() + self._offset

    async def fire_due(self) -> list[ScheduleRun]:
        """One pass: claim the runs due now and start them; take over runs claimed and never started."""
        now = await self.clock()
        runs = await self.store.claim_runs(now, plan_run)
        if now - self._recovered_at >= STALE_S:
            self._recovered_at = now
            runs += await self.store.stale_runs(now, STALE_S)
        for run in runs:
            await self._start(run)
        return runs

    async def _start(self, run: ScheduleRun) -> None:
        record = await self.store.get_schedule(run.schedule_id)
        if record is None or record.id != run.schedule_id:
            await self.store.finish_run(run.schedule_id, run.due, "failed", error="the schedule was removed")
            return
        schedule = read(record)
        try:
            started = await self.start(schedule, run)
        except (TaskRefused, ValueError) as exc:
            started = Started(error=str(exc))
        except StoreError:
            raise  # left claimed: recovered by the next pass that looks
        except Exception as exc:  # a bug: the run fails with it rather than stay claimed forever
            log.exception("schedule %s: starting its run failed", run.schedule_id[:8])
            started = Started(error=f"{type(exc).__name__}: {exc}")
        state = "failed" if started.error else "started"
        if started.error:
            log.warning("schedule %s: its run due at %s was not started: %s", run.schedule_id[:8],
                        time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(run.due)), started.error)
        else:
            self.fired += 1
        await self.store.finish_run(run.schedule_id, run.due, state, task_id=started.task_id,
                                    session_id=started.session_id, error=started.error)

    async def run(self) -> None:
        """Fire schedules until `stop`: sleep until the next due time (at most `max_wait_s`), waking early
        when a schedule changes (PostgreSQL: its NOTIFY; here: `poke`)."""
        while not self._stopping.is_set():
            wait = self.max_wait_s
            try:
                await self.fire_due()
                upcoming = await self.store.next_due()
                if upcoming is not None:
                    wait = min(wait, max(0.05, upcoming - await self.clock()))
            except StoreError as exc:
                log.warning("schedules: the store failed (%s); looking again shortly", exc)
                wait = min(wait, 5.0)
            self._poked.clear()
            waits = [asyncio.ensure_future(self.store.wait_schedules(wait)),
                     asyncio.ensure_future(self._poked.wait()), asyncio.ensure_future(self._stopping.wait())]
            try:
                await asyncio.wait(waits, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiting in waits:
                    waiting.cancel()


async def pause(store: Store, schedule_id: str) -> ScheduleRecord | None:
    record = await store.get_schedule(schedule_id)
    if record is None:
        return None
    return await store.update_schedule(record.id, paused=True, next_run=record.next_run)


async def resume(store: Store, schedule_id: str, now: float | None = None) -> ScheduleRecord | None:
    """Resume a schedule from its next due time after now: the due times it spent paused are not missed."""
    record = await store.get_schedule(schedule_id)
    if record is None:
        return None
    when = time.time() if now is None else now
    try:
        upcoming = parse(record.cadence, record.tz, anchor=record.created).next_after(when)
    except CadenceError as exc:
        raise ScheduleRefused(str(exc)) from None
    return await store.update_schedule(record.id, paused=False, next_run=upcoming)


async def add(store: Store, record: ScheduleRecord) -> ScheduleRecord:
    if len(await store.list_schedules()) >= MAX_SCHEDULES:
        raise ScheduleRefused(f"this store has {MAX_SCHEDULES} schedules already: remove some first")
    await store.add_schedule(record)
    return record
