"""`POST /api/hooks/{name}`: a webhook intake of `auger serve` (fleet/intake.py says what an intake is).

The route is public to the Guard — a forge sends no bearer token — and its one credential is the body's
signature under the intake's secret, checked on the raw body, read within the server's limits
(wire.read_body), before anything parses it. Then, in order:

1. the delivery is recorded by its id (`X-GitHub-Delivery`, `X-Auger-Delivery`, or the body's hash): a
   delivery seen before is a replay — 200, and nothing new starts (a receipt whose receiver died before
   acting on it is taken over after a minute, and acted on once: a task under the delivery's key);
2. GitHub's `ping` is answered; a delivery the intake's filter does not take is acknowledged (202) and
   recorded as ignored;
3. the intake acts: a task — a fleet task on PostgreSQL (its submission id the delivery's key, so two
   servers receiving the same delivery make one task), or a session of this server on SQLite
   (frontends/server/local_runs.py) — or a message into its session, as that session's next input.

Answers: 401 for a missing or wrong signature, 404 for no such intake, 400 for a body that is not a JSON
payload, 422 for a payload whose fields make no valid task (an issue number that is not one), 503 for an
intake whose configuration is unusable (the reason goes to the server's log, not to the sender).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from auger.frontends.server.routing import Sent, api, json_response, server_of
from auger.frontends.server.sessions import Refused
from auger.frontends.server.wire import read_body

PREFIX = "/api/hooks/"
RETRY_AFTER_S = 60.0  # a receipt not acted on after this long (its receiver died) is taken over
log = logging.getLogger("auger.serve")


def routes() -> list[Route]:
    return [api("POST", PREFIX + "{name}", receive, role=None)]


def intake_named(server: Any, name: str) -> Any:
    """The server's intake called `name` (404: none; 503: its configuration is unusable)."""
    import os

    from auger.fleet.intake import NAME, IntakeError, configured
    from auger.models.registry import registry_for

    if not NAME.fullmatch(name):
        raise Refused(404, "no such intake")
    config = server.hub.config_for(server.options.roots[0])
    providers = {p.base_url.rstrip("/"): p.name for p in registry_for(config).providers.values() if p.base_url}
    found = configured(config.tables, providers, os.environ).get(name)
    if found is None:
        raise Refused(404, f"no intake named {name}")
    if isinstance(found, IntakeError):
        log.error("intake %s cannot be used: %s", name, found)
        raise Refused(503, f"intake {name} is not configured usably (the server's log says why)")
    return found


async def receive(request: Request, sent: Sent) -> Response:
    from auger.fleet.intake import Ignored, delivery_id, event_name

    server = server_of(request)
    name = str(request.path_params["name"])
    intake = intake_named(server, name)
    body = await read_body(request)
    headers = {key.lower(): value for key, value in request.headers.items()}
    if not intake.verify(headers, body):
        raise Refused(401, "a delivery must carry its body's HMAC-SHA256 under the intake's secret: "
                           "X-Hub-Signature-256 or X-Auger-Signature, sha256=HEX")
    try:
        delivery, event = delivery_id(headers, body), event_name(headers)
    except ValueError as exc:
        raise Refused(400, str(exc)) from None
    store = server.hub.store
    new, first = await store.record_delivery(name, delivery, event, time.time(), RETRY_AFTER_S)
    if not new:
        return json_response({"replay": True, "delivery": delivery, "outcome": first.outcome,
                              "task_id": first.task_id, "session_id": first.session_id})
    try:
        payload = _payload(headers.get("content-type", ""), body)
    except ValueError as exc:
        await store.settle_delivery(name, delivery, "failed", detail=str(exc))
        raise Refused(400, str(exc)) from None
    if event == "ping":
        await store.settle_delivery(name, delivery, "ignored", detail="ping")
        return json_response({"pong": True, "delivery": delivery})
    try:
        intake.take(event, payload)
    except Ignored as exc:
        await store.settle_delivery(name, delivery, "ignored", detail=str(exc))
        return json_response({"ignored": str(exc), "delivery": delivery}, 202)
    if intake.action == "message":
        return await _message(server, intake, event, payload, delivery)
    return await _task(server, intake, event, payload, delivery)


def _payload(content_type: str, body: bytes) -> Any:
    """The delivery's JSON payload: the body, or (GitHub's form content type) its `payload` field."""
    from urllib.parse import parse_qs

    try:
        text = body.decode("utf-8")
        if content_type.split(";")[0].strip().lower() == "application/x-www-form-urlencoded":
            text = (parse_qs(text).get("payload") or [""])[0]
        return json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ValueError("a delivery's body must be a JSON payload (or a form with one in `payload`)") from None


async def _task(server: Any, intake: Any, event: str, payload: Any, delivery: str) -> Response:
    from auger.fleet.policy import TaskRefused
    from auger.frontends.server.fleet_routes import has_fleet
    from auger.frontends.server.local_runs import run_here

    store = server.hub.store
    key = f"intake:{intake.name}:{delivery}"
    try:
        spec = intake.spec(event, payload, delivery)
    except TaskRefused as exc:
        await store.settle_delivery(intake.name, delivery, "failed", detail=str(exc))
        raise Refused(422, f"the delivery makes no task: {exc}") from None
    if has_fleet(store):
        from auger.fleet.submit import submit

        row = intake.row
        record, _ = await submit(store, spec, queue_name=row["queue"], priority=row["priority"],
                                 max_attempts=row["max_attempts"], submission_id=key,
                                 submitted_by=f"intake {intake.name}", origin=key)
        await store.settle_delivery(intake.name, delivery, "queued", task_id=record.id)
        return json_response({"delivery": delivery, "task_id": record.id}, 202)
    started = await run_here(server, spec, f"intake {intake.name}", spec.title or f"{intake.name}: {event}")
    if started.error:
        await store.settle_delivery(intake.name, delivery, "failed", detail=started.error)
        raise Refused(422, started.error)
    await store.settle_delivery(intake.name, delivery, "started", session_id=started.session_id)
    return json_response({"delivery": delivery, "session_id": started.session_id}, 202)


async def _message(server: Any, intake: Any, event: str, payload: Any, delivery: str) -> Response:
    """The delivery as the next input of the intake's session, open here (a turn running takes it before
    its next model call), recorded under the delivery's key."""
    from auger.protocol.jsontext import dumps
    from auger.protocol.ops import UserTurn

    hub = server.hub
    store = hub.store
    record = await hub.record(intake.session)
    if await hub.runs_elsewhere(record.id) or await hub.runs_in_fleet(record.id):
        await store.settle_delivery(intake.name, delivery, "failed", detail="the session runs in another process")
        raise Refused(409, f"session {record.id} runs in another process: a message reaches a session this server "
                           "runs")
    text, _ = intake.render(event, payload, delivery)
    op = UserTurn(text)
    session = await hub.open(record.id)
    key = f"intake:{intake.name}:{delivery}"[:64]
    if await store.submission(record.id, key) is None:  # a receipt taken over: the message went in already
        await store.record_submission(record.id, key, dumps(op.to_json()), f"intake {intake.name}")
        session.submit(op, key)
    await store.settle_delivery(intake.name, delivery, "sent", session_id=record.id)
    return json_response({"delivery": delivery, "session_id": record.id}, 202)
