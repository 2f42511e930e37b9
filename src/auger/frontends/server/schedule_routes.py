"""`auger serve`'s schedule routes, on either store: the schedules and their latest runs, adding one (the
same checks as `auger schedule add`: fleet/schedules.py, fleet/policy.py), pausing, resuming and removing
one. On PostgreSQL a run is a fleet task; on SQLite this server runs it (frontends/server/local_runs.py)."""

from __future__ import annotations

import re
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from auger.fleet.policy import CONFIGURATION, SPEC_FIELDS
from auger.fleet.schedules import SCHEDULE_FIELDS
from auger.frontends.server.routing import Sent, api, json_response, server_of
from auger.frontends.server.sessions import Refused

_SCHEDULE_ID = re.compile(r"[0-9a-f]{32}")
RUNS_SHOWN = 5


def routes() -> list[Route]:
    return [
        api("GET", "/api/fleet/schedules", list_schedules, role="viewer"),
        api("POST", "/api/fleet/schedules", add_schedule, role="member", audit="schedule.add",
            body=SPEC_FIELDS | SCHEDULE_FIELDS | frozenset(CONFIGURATION), required={"prompt", "repo"}),
        api("GET", "/api/fleet/schedules/{id}", get_schedule, role="viewer"),
        api("POST", "/api/fleet/schedules/{id}/pause", pause_schedule, role="member", body=(),
            audit="schedule.pause"),
        api("POST", "/api/fleet/schedules/{id}/resume", resume_schedule, role="member", body=(),
            audit="schedule.resume"),
        api("DELETE", "/api/fleet/schedules/{id}", remove_schedule, role="member", audit="schedule.remove"),
    ]


async def _described(store: Any, record: Any, runs: int = RUNS_SHOWN) -> dict[str, Any]:
    from auger.fleet.schedules import read

    return {**read(record).to_json(), "recent_runs": [_run_json(r) for r in await store.list_runs(record.id, runs)]}


def _run_json(run: Any) -> dict[str, Any]:
    return {"due": run.due, "state": run.state, "fired": run.fired, "late": run.late, "missed": run.missed,
            "task_id": run.task_id, "session_id": run.session_id, "error": run.error}


async def list_schedules(request: Request, sent: Sent) -> Response:
    store = server_of(request).hub.store
    return json_response({"schedules": [await _described(store, r) for r in await store.list_schedules()],
                          "fired_by": _fired_by(request)})


def _fired_by(request: Request) -> str:
    from auger.frontends.server.fleet_routes import has_fleet

    return "fleet" if has_fleet(server_of(request).hub.store) else "server"


async def add_schedule(request: Request, sent: Sent) -> Response:
    """A new schedule: 201 with it; 400 for a cadence, policy or task that is not one."""
    from auger.fleet.schedules import ScheduleRefused, add, schedule_from_fields

    server = server_of(request)
    try:
        record = schedule_from_fields(dict(sent.body), created_by=sent.principal.name)
    except ScheduleRefused as exc:
        raise Refused(400, str(exc)) from None
    if _fired_by(request) == "server":  # this server runs it: its directory must be one of the server's
        _check_local(server, str(sent.body.get("repo")))
        if sent.body.get("deliver", "none") != "none" or sent.body.get("kind", "change") != "change":
            raise Refused(400, "this server has no fleet (a SQLite store): its runs answer in their sessions; "
                               "delivering past them, and review tasks, need a fleet worker's [forge]")
    sent.note(cadence=record.cadence[:60], repo=str(sent.body.get("repo"))[:200])
    try:
        await add(server.hub.store, record)
    except ScheduleRefused as exc:
        raise Refused(409, str(exc)) from None
    sent.note(target=record.id)
    if server.scheduler is not None:
        server.scheduler.poke()
    return json_response(await _described(server.hub.store, record), 201)


def _check_local(server: Any, repo: str) -> None:
    from auger.fleet.policy import is_remote

    if is_remote(repo):
        raise Refused(400, "this server has no fleet (a SQLite store): a schedule runs here, in a directory of its "
                           "roots, not in a repository URL")
    server.hub.roots.project(repo)


async def get_schedule(request: Request, sent: Sent) -> Response:
    store = server_of(request).hub.store
    return json_response(await _described(store, await _schedule(request), runs=50))


async def pause_schedule(request: Request, sent: Sent) -> Response:
    from auger.fleet.schedules import pause

    record = await _schedule(request)
    paused = await pause(server_of(request).hub.store, record.id)
    return json_response(await _described(server_of(request).hub.store, paused or record))


async def resume_schedule(request: Request, sent: Sent) -> Response:
    """Resume from the next due time after now: the time it spent paused is not missed."""
    from auger.fleet.schedules import ScheduleRefused, resume

    server = server_of(request)
    record = await _schedule(request)
    try:
        resumed = await resume(server.hub.store, record.id)
    except ScheduleRefused as exc:
        raise Refused(409, str(exc)) from None
    if server.scheduler is not None:
        server.scheduler.poke()
    return json_response(await _described(server.hub.store, resumed or record))


async def remove_schedule(request: Request, sent: Sent) -> Response:
    record = await _schedule(request)
    await server_of(request).hub.store.remove_schedule(record.id)
    return json_response({"id": record.id, "removed": True})


async def _schedule(request: Request) -> Any:
    """The schedule the path names, exactly (32 hex digits), and one that exists (404)."""
    schedule_id = str(request.path_params["id"])
    if not _SCHEDULE_ID.fullmatch(schedule_id):
        raise Refused(400, "a schedule id is 32 hex digits")
    record = await server_of(request).hub.store.get_schedule(schedule_id)
    if record is None or record.id != schedule_id:
        raise Refused(404, f"no schedule has the id {schedule_id}")
    return record
