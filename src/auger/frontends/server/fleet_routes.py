"""`auger serve`'s fleet routes, on a PostgreSQL store (404 on SQLite): the queue's numbers and latest
tasks, one task, submitting one (the same checks and idempotency as `auger submit`: fleet/policy.py and
fleet/submit.py), cancelling, retrying, and answering the approval a waiting task parked on."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from auger.fleet.policy import CONFIGURATION, SPEC_FIELDS
from auger.frontends.server.routing import Sent, api, json_response, server_of
from auger.frontends.server.sessions import Refused

if TYPE_CHECKING:
    from auger.fleet.tasks import Tasks

LIST_PAGE = 50
LIST_MAX = 500
_TASK_ID = re.compile(r"[0-9a-f]{32}")  # what fleet/tasks.py gives: uuid4().hex
_SUBMISSION_ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
ROW_FIELDS = frozenset({"priority", "queue", "max_attempts", "submission_id"})
# Fields a submitter may mean as configuration: named here so the body check lets check_spec say why not.
_CONFIGURATION = frozenset(CONFIGURATION)


def routes() -> list[Route]:
    return [
        api("GET", "/api/fleet", fleet, role="viewer", query={"limit"}),
        api("POST", "/api/fleet/tasks", submit_task, role="member", audit="task.submit",
            body=SPEC_FIELDS | ROW_FIELDS | _CONFIGURATION, required={"prompt", "repo"}),
        api("GET", "/api/fleet/tasks/{id}", get_task, role="viewer"),
        api("POST", "/api/fleet/tasks/{id}/cancel", cancel_task, role="member", body=(), audit="task.cancel"),
        api("POST", "/api/fleet/tasks/{id}/retry", retry_task, role="member", body=(), audit="task.retry"),
        api("POST", "/api/fleet/tasks/{id}/answer", answer_task, role="approver", audit="task.answer",
            body={"request_id", "decision", "feedback"}, required={"request_id", "decision"}),
    ]


async def fleet(request: Request, sent: Sent) -> Response:
    """The fleet's numbers (queue depth, running, waiting, done, failed, retried, tokens, cost) and its
    latest tasks, each with what it cost once finished; only a PostgreSQL store has a fleet."""
    from auger.frontends.server.wire import number

    raw = sent.query.get("limit")
    limit = LIST_PAGE if raw is None else number(raw, "limit", low=1, high=LIST_MAX)
    tasks = fleet_tasks(request)
    recent = await tasks.recent(limit)
    costs = await tasks.costs([t.id for t in recent])
    return json_response({"stats": await tasks.stats(),
                          "tasks": [{**t.to_json(), "cost": costs.get(t.id)} for t in recent]})


async def submit_task(request: Request, sent: Sent) -> Response:
    """Queue a task: 201 with its record, 200 with the first one for a repeated submission id, 409 for
    the id used for another task, 400 for a task that is not only data."""
    from auger.fleet.policy import TaskRefused, check_row, check_spec
    from auger.fleet.submit import submit
    from auger.fleet.tasks import SubmissionConflict

    body = sent.body
    submission_id = body.get("submission_id")
    if submission_id is not None and (not isinstance(submission_id, str)
                                      or not _SUBMISSION_ID.fullmatch(submission_id)):
        raise Refused(400, "submission_id must be 1-64 letters, digits or '_.:-'")
    row = {"queue": body.get("queue", "default"), "priority": body.get("priority", 0),
           "max_attempts": body.get("max_attempts", 3)}
    try:
        spec = check_spec({key: value for key, value in body.items() if key not in ROW_FIELDS})
        check_row(row["queue"], row["priority"], row["max_attempts"])
    except TaskRefused as exc:
        raise Refused(400, str(exc)) from None
    tasks = fleet_tasks(request)
    sent.note(action="task.submit", submission_id=submission_id, repo=spec.repo[:200], mode=spec.mode)
    try:
        record, created = await submit(tasks.store, spec, queue_name=row["queue"], priority=row["priority"],
                              max_attempts=row["max_attempts"], submission_id=submission_id,
                              submitted_by=sent.principal.name)
    except SubmissionConflict as exc:
        raise Refused(409, str(exc)) from None
    sent.note(target=record.id, repeated=not created)
    return json_response(record.to_json(), 201 if created else 200)


async def get_task(request: Request, sent: Sent) -> Response:
    tasks = fleet_tasks(request)
    task_id = await _task_id(request, tasks)
    record = await tasks.get(task_id)
    assert record is not None, "it was just found"
    result = await tasks.result(task_id)
    return json_response({**record.to_json(), "result": result.to_json() if result else None})


async def cancel_task(request: Request, sent: Sent) -> Response:
    """Cancel a task: a queued or waiting one is cancelled at once; a running one's worker is asked to
    interrupt its session (through the store) and records it cancelled. 409 for a task already finished."""
    tasks = fleet_tasks(request)
    task_id = await _task_id(request, tasks)
    cancelled = await tasks.cancel(task_id)
    if cancelled is None:
        raise Refused(409, f"task {task_id} is {await _task_state(tasks, task_id)}: nothing to cancel")
    return json_response(cancelled.to_json())


async def retry_task(request: Request, sent: Sent) -> Response:
    """Queue a failed or cancelled task again (delivered to a worker at once); 409 for any other."""
    from auger.fleet.submit import retry

    tasks = fleet_tasks(request)
    task_id = await _task_id(request, tasks)
    again = await retry(tasks.store, task_id)
    if again is None:
        raise Refused(409, f"task {task_id} is {await _task_state(tasks, task_id)}: only a failed or cancelled "
                           "task is retried")
    return json_response(again.to_json())


async def answer_task(request: Request, sent: Sent) -> Response:
    """Answer the approval a waiting task parked on: the first valid answer wins and the task is queued
    again, for any worker to resume; 409 for a later answer or nothing waiting, 400 for another option."""
    tasks = fleet_tasks(request)
    task_id = await _task_id(request, tasks)
    body = sent.body
    feedback = body.get("feedback")
    if not isinstance(body["request_id"], str) or not isinstance(body["decision"], str) \
            or not (feedback is None or isinstance(feedback, str)):
        raise Refused(400, "request_id and decision are strings, feedback a string or null")
    answered = await answer_parked(request, tasks, task_id, body["request_id"], body["decision"], feedback)
    sent.note(decision=body["decision"], request_id=body["request_id"][:64])
    return json_response(answered.to_json())


async def answer_parked(request: Request, tasks: Tasks, task_id: str, request_id: str, decision: str,
                        feedback: str | None) -> Any:
    """The one way an answer reaches a parked task (this route, and an approval_decision op posted for its
    session): recorded with who gave it, and the task delivered again."""
    from auger.fleet.submit import answer
    from auger.fleet.tasks import AnswerRefused

    try:
        return await answer(tasks.store, task_id, request_id, decision, feedback,
                            str(request.scope.get("auger.client", "")))
    except AnswerRefused as exc:
        raise Refused(exc.status, str(exc)) from None


def has_fleet(store: Any) -> bool:
    """Whether the store has the fleet's tables (a PostgreSQL one does; SQLite none)."""
    from auger.store.postgres import PostgresStore

    return isinstance(store, PostgresStore)


def fleet_tasks(request: Request) -> Tasks:
    """The tasks table of the server's store; 404 on a store with no fleet."""
    from auger.fleet.tasks import Tasks
    from auger.store.postgres import PostgresStore

    store = server_of(request).hub.store
    if not isinstance(store, PostgresStore):
        raise Refused(404, "this server's store has no fleet: serve a postgresql:// database")
    return Tasks(store)


async def _task_id(request: Request, tasks: Tasks) -> str:
    """The task the path names, exactly: 32 hex digits (never a prefix, never anything a query could read
    otherwise), and a task that exists (404)."""
    task_id = request.path_params["id"]
    if not _TASK_ID.fullmatch(task_id):
        raise Refused(400, "a task id is 32 hex digits")
    if await tasks.get(task_id) is None:
        raise Refused(404, f"no task has the id {task_id}")
    return str(task_id)


async def _task_state(tasks: Tasks, task_id: str) -> str:
    record = await tasks.get(task_id)
    return record.state if record is not None else "gone"
