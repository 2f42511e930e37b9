"""A task put on the queue: recorded in the tasks table first (the record of truth), then delivered to a
worker through the queue library. `auger submit`, `auger tasks retry`, `auger serve`'s task routes and
the answer to a parked task's approval all go through here, so a task is never recorded without its
delivery, nor delivered twice for one request."""

from __future__ import annotations

from typing import TYPE_CHECKING

from auger.fleet import queue
from auger.fleet.policy import TaskSpec, check_row
from auger.fleet.tasks import TaskRecord, Tasks

if TYPE_CHECKING:
    from auger.store.postgres import PostgresStore


async def submit(store: PostgresStore, spec: TaskSpec, *, queue_name: str = "default", priority: int = 0,
                 max_attempts: int = 3, submission_id: str | None = None, submitted_by: str = "",
                 origin: str | None = None) -> tuple[TaskRecord, bool]:
    """Record the task and deliver it; a submission id used before for the same task returns the first
    task, delivered then (nothing is queued again) — unless it was recorded and never delivered (the
    submitter died between the two): a task still queued with no job in the queue is delivered now. (Two
    deliveries of one task could only make a duplicate the worker drops: see fleet/worker.py.) The id
    used before for another task: SubmissionConflict, nothing queued. `spec` is checked (fleet/policy.py)
    by whoever built it; what travels beside it is checked here."""
    check_row(queue_name, priority, max_attempts)
    record, created = await Tasks(store).submit(spec, queue=queue_name, priority=priority,
                                                max_attempts=max_attempts, submission_id=submission_id,
                                                submitted_by=submitted_by, origin=origin)
    if created or (record.state == "queued" and not await queue.waiting(store, record.id)):
        await _deliver(store, record)
    return record, created


async def retry(store: PostgresStore, task_id: str) -> TaskRecord | None:
    """Queue a failed or cancelled task again and deliver it; None when it was neither (nothing changed)."""
    again = await Tasks(store).retry(task_id)
    if again is not None:
        await _deliver(store, again)
    return again


async def answer(store: PostgresStore, task_id: str, request_id: str, decision: str, feedback: str | None,
                 by: str) -> TaskRecord:
    """Answer the approval a waiting task parked on and deliver it again, to whichever worker takes it
    (fleet/worker.py resumes it there). AnswerRefused when the answer does not count."""
    answered = await Tasks(store).answer(task_id, request_id, decision, feedback, by)
    await _deliver(store, answered)
    return answered


async def _deliver(store: PostgresStore, record: TaskRecord) -> None:
    await queue.enqueue(store, record.id, queue=record.queue, priority=record.priority)
