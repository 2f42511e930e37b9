"""`auger serve`'s ASGI application: routes that turn requests into protocol ops and answer with
snapshots of the engine's state, event streams by sequence number, the ACP agent over WebSocket, and
the web UI's files — every one behind `http_guard.Guard`.

Nothing here runs a turn or decides a policy: a session is driven only through `Session.submit`
(and `Session.decide` for approvals, so the first answer wins and a late one is told so at once),
and followed only through its envelopes. docs/server.md is the reference.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
from pathlib import Path
from typing import Any, AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, WebSocketRoute

from auger.frontends.http_guard import Guard
from auger.frontends.relay import relayed_op
from auger.frontends.server import fleet_routes, intake_routes, schedule_routes, share_routes, team_routes
from auger.frontends.server.events import list_frames, session_frames
from auger.frontends.server.routing import Sent, api, json_response as _json, server_of as _server
from auger.frontends.server.sessions import Refused, describe
from auger.frontends.server.sse import SseResponse
from auger.frontends.server.state import STATIC, Server, ServerOptions
from auger.frontends.server.team import op_role, role_refusal
from auger.frontends.server.wire import MAX_INT, number, parse_op
from auger.protocol.jsontext import dumps
from auger.protocol.ops import ApprovalDecision, Interrupt, SetMode, SetModel, Shutdown
from auger.store.base import page_cursor, parse_page_cursor

__all__ = ["STATIC", "Server", "ServerOptions", "create_app"]
# The UI's files come with a strict policy: scripts and styles from this origin only (no inline code, no eval),
# requests to this origin only, never framed. Model text is drawn as text nodes, so even a policy bypass would
# find no HTML of the model's to run; the policy is the second wall. `no-cache`: revalidated by ETag, so a
# new version is seen at the next load.
UI_HEADERS = [
    (b"content-security-policy", b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                                 b"connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; "
                                 b"frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer"), (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-cache")]
LIST_PAGE = 50
LIST_MAX = 500  # sessions or tasks in one page
ITEMS_PAGE = 200
ITEMS_MAX = 5000  # items in one page
_SUBMISSION_ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_PROVIDER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_TURN = re.compile(r"[A-Za-z0-9_-]{1,64}")  # a turn's number, its id or an id prefix
HEALTH = "/api/health"  # the one API route served without credentials (Guard `public`: Host and Origin still checked)


def create_app(options: ServerOptions) -> tuple[Any, Server]:
    """The ASGI app (Starlette, wrapped in the Guard), and its `Server`."""
    from contextlib import asynccontextmanager

    import mimetypes

    from starlette.staticfiles import StaticFiles

    for suffix in (".js", ".mjs"):  # a module script is refused under another type, whatever the system's table says
        mimetypes.add_type("text/javascript", suffix)
    server = Server(options)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        _start_schedules(server)
        yield
        await server.drain()

    routes: list[BaseRoute] = [  # each API route's role, query parameters, body fields and audit are declared
        api("GET", HEALTH, _health, role=None),  # for load balancers and probes: no credentials, no details
        api("GET", "/api/openapi.json", _openapi, role="viewer"),
        api("GET", "/api/protocol.schema.json", _protocol_schema, role="viewer"),
        api("POST", "/api/pair", _pair, role="viewer", body=(), audit="pair"),
        api("GET", "/api/server", _server_info, role="share"),
        api("GET", "/api/sessions", _list_sessions, role="viewer", query={"cursor", "limit"}),
        api("POST", "/api/sessions", _create_session, role="member", audit="session.create",
            body={"cwd", "mode", "model", "provider", "resume", "fork", "before", "before_seq"}),
        api("GET", "/api/sessions/{id}", _get_session, role="share"),
        api("POST", "/api/sessions/{id}/handoff", _handoff, role="member", body=(), audit="session.handoff"),
        api("POST", "/api/sessions/{id}/ops", _post_op, role="member", audit="op", body={"submission_id", "op"},
            required={"submission_id", "op"}),
        api("GET", "/api/sessions/{id}/events", _session_events, role="share", query={"after_seq"}),
        api("GET", "/api/sessions/{id}/items", _items, role="share", query={"before", "limit"}),
        api("GET", "/api/sessions/{id}/diff", _diff, role="share", query={"turn"}),
        api("GET", "/api/sessions/{id}/pending", _pending, role="viewer"),
        api("GET", "/api/events", _list_events, role="viewer"),
        *fleet_routes.routes(),
        *schedule_routes.routes(),
        *intake_routes.routes(),  # public to the Guard: the body's signature is their credential
        api("GET", "/api/providers", _list_providers, role="viewer", query={"probe"}),
        api("POST", "/api/providers/{name}/probe", _probe_provider, role="member", body=(), audit="provider.probe"),
        api("PATCH", "/api/providers/{name}", _patch_provider, role="admin", audit="provider.change",
            body={"enabled", "command", "args", "label"}),
        *team_routes.routes(),
        *share_routes.routes(),
    ]
    if options.acp:
        from auger.frontends.server.acp_ws import AcpOverWebSocket

        server.acp = AcpOverWebSocket(options.config_for, options.store, server.hub, server.watch)
        routes.append(WebSocketRoute("/acp", server.acp))
    routes.append(Mount("/", _with_headers(StaticFiles(directory=options.static_dir, html=True, check_dir=False),
                                           UI_HEADERS)))
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={Refused: _refused})
    app.state.server = server
    return Guard(app, server.people, options.exposure, server.pairing, secure_cookie=options.secure_cookie,
                 public=frozenset({HEALTH}), signed=(intake_routes.PREFIX,)), server


# -- helpers ------------------------------------------------------------------------------
def _start_schedules(server: Server) -> None:
    """The schedules' firing loop: runs become fleet tasks on PostgreSQL, this server's sessions on SQLite."""
    from auger.fleet.schedules import Scheduler, fleet_starter
    from auger.frontends.server.local_runs import local_starter

    store = server.hub.store
    server.start_schedules(Scheduler(store, fleet_starter(store) if fleet_routes.has_fleet(store)
                                     else local_starter(server)))


def _with_headers(app: Any, headers: list[tuple[bytes, bytes]]) -> Any:
    """An ASGI app whose responses carry `headers` as well."""
    names = {name for name, _ in headers}

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        async def sending(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message = {**message, "headers": [*kept, *headers]}
            await send(message)

        await app(scope, receive, sending)

    return wrapped



async def _refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Refused)
    return JSONResponse({"error": exc.message}, status_code=exc.status)


def _number(query: dict[str, str], name: str, default: int, *, low: int = 0, high: int = MAX_INT) -> int:
    """A number from the query (`default` when it is not given)."""
    value = query.get(name)
    return default if value is None else number(value, name, low=low, high=high)


# -- routes -------------------------------------------------------------------------------
async def _health(request: Request, sent: Sent) -> Response:
    """`{"status": "ok", "version", "store": "ok"}`, or 503 with `"store": "unreachable"` (auger/health.py)."""
    from auger.health import health

    status, body = await health(_server(request).hub.store)
    return Response(dumps(body), status_code=status, media_type="application/json",
                    headers={"cache-control": "no-store"})


async def _openapi(request: Request, sent: Sent) -> Response:
    from auger.frontends.server.openapi import openapi_document

    return _json(openapi_document())


async def _protocol_schema(request: Request, sent: Sent) -> Response:
    from auger.protocol.schema import protocol_schema

    return _json(protocol_schema())


async def _pair(request: Request, sent: Sent) -> Response:
    """A new one-use pairing link, for another browser (a phone) of someone already signed in."""
    server = _server(request)
    code = server.pairing.new_code(sent.principal)
    sent.note(target=sent.principal.name)
    origin = f"{server.options.exposure.scheme}://{request.headers.get('host', '')}"
    return _json({"url": f"{origin}/pair?code={code}", "expires_in": server.pairing.ttl}, 201)


async def _server_info(request: Request, sent: Sent) -> Response:
    """What a client needs to offer a new session: the roots (a session's directory lies inside one), the
    server's mode (new sessions get it; no client may ask for more), its model and provider; who the
    caller is (their role says what they may do), and whether the server has a fleet."""
    server = _server(request)
    me = sent.principal
    if me.session is not None:  # a share link learns which session it shows, until when, and nothing else
        return _json({"user": {"name": me.name, "role": me.role, "via": me.via},
                      "share": {"session": me.session, "expires": me.expires}})
    config = server.hub.config_for(server.options.roots[0])
    return _json({"roots": server.hub.roots.paths, "mode": server.options.mode, "model": config.model,
                  "provider": config.provider, "user": {"name": me.name, "role": me.role, "via": me.via},
                  "fleet": fleet_routes.has_fleet(server.hub.store)})


async def _list_sessions(request: Request, sent: Sent) -> Response:
    """Stored sessions within the roots, newest first, a page at a time (`next_cursor` continues)."""
    server = _server(request)
    limit = _number(sent.query, "limit", LIST_PAGE, low=1, high=LIST_MAX)
    before = _cursor(sent.query.get("cursor"))
    records = await server.hub.store.list_sessions(limit + 1, before=before)
    page = records[:limit]
    more = len(records) > limit
    rows = []
    for record in page:
        if await server.hub.visible(record):
            rows.append({**describe(record), "open": server.hub.live(record.id) is not None,
                         "running": await server.hub.running_turn(record.id) is not None,
                         "cost": await server.hub.cost(record)})
    return _json({"sessions": rows, "next_cursor": page_cursor(page[-1]) if more else None})


def _cursor(cursor: str | None) -> tuple[float, str] | None:
    if cursor is None:
        return None
    try:
        return parse_page_cursor(cursor)
    except ValueError:
        raise Refused(400, f"cursor {cursor[:80]!r} is not one this server gave; list again without it") from None


async def _create_session(request: Request, sent: Sent) -> Response:
    """A new session (201), a fork of a stored one (201), or a stored one opened here (200)."""
    server = _server(request)
    body = sent.body
    if "resume" in body and "fork" in body:
        raise Refused(400, "give resume or fork, not both")
    cut = {key for key in ("before", "before_seq") if key in body}
    if cut and "fork" not in body:
        raise Refused(400, f"{' and '.join(sorted(cut))} cut a fork: give it with fork")
    if len(cut) > 1:
        raise Refused(400, "give before (a user message number) or before_seq (its item seq), not both")
    source = body.get("resume", body.get("fork"))
    if source is not None:
        if "model" in body or "provider" in body:
            raise Refused(400, "a stored session continues with its recorded model; switch it with a set_model op")
        record = await server.hub.record(source)
        if "cwd" in body and server.hub.roots.project(body["cwd"]) != record.cwd:
            raise Refused(400, f"session {record.id} belongs to {record.cwd}, not {body['cwd']}")
        if "resume" in body:
            sent.note(action="session.resume", target=record.id)
            if "mode" in body or cut:
                raise Refused(400, "a resumed session keeps its mode (switch it with a set_mode op) and its "
                                   "whole history (fork it to cut it)")
            session = await server.hub.open(record.id)
            return _json(await server.hub.snapshot(session.meta), 200)
        sent.note(action="session.fork", source=record.id)
        session = await server.hub.fork(record.id, mode=body.get("mode"), before=body.get("before"),
                                        before_seq=body.get("before_seq"), created_by=sent.principal.name)
    else:
        if "cwd" not in body:
            raise Refused(400, "missing field cwd")
        sent.note(cwd=str(body["cwd"])[:300])
        session = await server.hub.create(body["cwd"], mode=body.get("mode"), model=body.get("model"),
                                          provider=body.get("provider"), created_by=sent.principal.name)
    sent.note(target=session.id, mode=session.mode)
    return _json(await server.hub.snapshot(session.meta), 201)


async def _get_session(request: Request, sent: Sent) -> Response:
    server = _server(request)
    return _json(await server.hub.snapshot(await server.hub.record(request.path_params["id"])))


async def _handoff(request: Request, sent: Sent) -> Response:
    """Take a session over from the process running it (a terminal on the same store): opened here now
    (200) when nobody runs it, else as soon as that process lets it go (202; a terminal does at its turn's
    end). The answer has the session's page and a one-use link that pairs a phone as the caller and opens it."""
    server = _server(request)
    record = await server.hub.record(request.path_params["id"])
    origin = f"{server.options.exposure.scheme}://{request.headers.get('host', '')}"
    opened = await server.hub.hand_over(record, origin)
    code = server.pairing.new_code(sent.principal)
    return _json({"id": record.id, "open": opened, "url": f"{origin}/#/s/{record.id}",
                  "pair": f"{origin}/pair?code={code}&session={record.id}", "expires_in": server.pairing.ttl},
                 200 if opened else 202)


async def _post_op(request: Request, sent: Sent) -> Response:
    """Submit one op under the client's submission id: 202, once. A repeat of the id answers as the first
    time and starts nothing; the id for another op is 409. An approval is answered here and now: the
    first valid answer wins, a later one is 409."""
    server = _server(request)
    hub = server.hub
    body = sent.body
    submission_id = body["submission_id"]
    if not isinstance(submission_id, str) or not _SUBMISSION_ID.fullmatch(submission_id):
        raise Refused(400, "submission_id must be 1-64 letters, digits or '_.:-'")
    if isinstance(body["op"], dict) and body["op"].get("type") == "approval_decision" and "by" in body["op"]:
        raise Refused(400, "'by' is set by the server: it names the client that answered")
    op = parse_op(body["op"])
    sent.note(target=request.path_params["id"], action=f"op.{op.TYPE}", submission_id=submission_id)
    needed = op_role(op.TYPE)
    if not sent.principal.may(needed):
        raise Refused(403, role_refusal(sent.principal, needed))
    record = await hub.record(request.path_params["id"])
    if isinstance(op, SetMode):
        hub.permitted(str(op.mode))
    if isinstance(op, ApprovalDecision):
        sent.note(decision=str(op.decision), request_id=op.request_id)
    op_json = dumps(op.to_json())
    accepted = {"submission_id": submission_id}
    actor = sent.principal.name
    async with server.ops_lock(record.id):
        first = await hub.store.submission(record.id, submission_id)
        if first is not None:
            if first != op_json:
                raise Refused(409, f"submission id {submission_id!r} was already used for another op")
            return _json({**accepted, "repeated": True}, 202)
        if isinstance(op, ApprovalDecision) and (parked := await hub.parked_task(record.id)) is not None:
            await fleet_routes.answer_parked(request, fleet_routes.fleet_tasks(request), parked, op.request_id,
                                             str(op.decision), op.feedback)  # any worker resumes it
            await hub.store.record_submission(record.id, submission_id, op_json, actor)
            return _json({**accepted, "relayed": True}, 202)
        if hub.adopting(record.id):  # handed over: the process still running it takes it, or this server later
            if isinstance(op, ApprovalDecision):
                op.by = request.scope.get("auger.client", "")
            await hub.store.record_submission(record.id, submission_id, op_json, actor)
            await hub.store.post_op(record.id, relayed_op(op, submission_id))
            return _json({**accepted, "relayed": True}, 202)
        if isinstance(op, (ApprovalDecision, Interrupt)) and await hub.runs_elsewhere(record.id):
            if isinstance(op, ApprovalDecision):
                op.by = request.scope.get("auger.client", "")
            await hub.store.record_submission(record.id, submission_id, op_json, actor)
            await hub.store.post_op(record.id, dumps(op.to_json()))  # the process running it takes it from there
            return _json({**accepted, "relayed": True}, 202)
        if isinstance(op, (Interrupt, Shutdown)) and hub.live(record.id) is None:
            await hub.store.record_submission(record.id, submission_id, op_json, actor)
            return _json(accepted, 202)  # nothing runs here to interrupt or shut down
        if isinstance(op, SetModel):
            hub.check_model(record.cwd, op.model, op.provider)
        session = await hub.open(record.id)
        if not session.accepts_ops:
            raise Refused(409, "the session is shutting down; send the op again once it has")
        if isinstance(op, ApprovalDecision):
            op.by = request.scope.get("auger.client", "")
            problem = session.decide(op, submission_id)
            if problem is not None:
                raise Refused(409 if "still waiting" not in problem else 400, problem)
            await hub.store.record_submission(record.id, submission_id, op_json, actor)
            return _json(accepted, 202)
        await hub.store.record_submission(record.id, submission_id, op_json, actor)  # durable before it acts
        session.submit(op, submission_id)
    return _json(accepted, 202)


async def _session_events(request: Request, sent: Sent) -> Response:
    """SSE: a `state` snapshot, then every envelope after the cursor (`Last-Event-ID`, else `after_seq`,
    else 0) with `id:` = seq. A cursor past the session's last event is 409, never a silent switch."""
    server = _server(request)
    header = request.headers.get("last-event-id")
    after = number(header.strip(), "Last-Event-ID") if header is not None else _number(sent.query, "after_seq", 0)
    record = await server.hub.record(request.path_params["id"])
    state = await server.hub.snapshot(record)
    last = state["state"]["last_seq"]
    if after > last:
        raise Refused(409, f"cursor {after} is past the last event of session {record.id} ({last}); "
                           "reload its state and follow from there")
    frames = session_frames(server.hub, record.id, after, state)
    return _stream(server, sent, frames)


async def _list_events(request: Request, sent: Sent) -> Response:
    return _stream(_server(request), sent, list_frames(_server(request).hub))


def _stream(server: Server, sent: Sent, frames: AsyncIterator[bytes]) -> Response:
    """An SSE response that ends when the server closes, or at once when the caller's user is revoked."""
    return SseResponse(frames, server.closing, ping_s=server.options.ping_s,  # type: ignore[return-value]
                       watch=server.watch, principal=sent.principal)


async def _items(request: Request, sent: Sent) -> Response:
    """The transcript, newest page first: items with seq < `before` (default: all), at most `limit`."""
    server = _server(request)
    before = _number(sent.query, "before", 0, low=1) or None
    limit = _number(sent.query, "limit", ITEMS_PAGE, low=1, high=ITEMS_MAX)
    record = await server.hub.record(request.path_params["id"])
    stored = [s for s in await server.hub.store.load_items(record.id) if before is None or s.seq < before]
    page = stored[-limit:]
    return _json({"items": [{"seq": s.seq, "turn_id": s.turn_id, "item": s.item.to_json()} for s in page],
                  "next_before": page[0].seq if len(stored) > len(page) else None})


async def _diff(request: Request, sent: Sent) -> Response:
    """The turns that changed files, with their diffs; `turn` picks one (its number or an id prefix)."""
    from auger.engine.turn.changes import numbered_turns

    server = _server(request)
    turn = sent.query.get("turn")
    if turn is not None and not _TURN.fullmatch(turn):
        raise Refused(400, f"turn must be a turn's number, its id or an id prefix, not {turn[:80]!r}")
    record = await server.hub.record(request.path_params["id"])
    items = [s.item for s in await server.hub.store.load_items(record.id)]
    try:
        turns = numbered_turns(items, turn)
    except LookupError as exc:
        raise Refused(404, str(exc)) from None
    return _json({"turns": [{"number": n, "turn_id": t.turn_id, "complete": bool(t.after),
                             "files": [dataclasses.asdict(f) for f in t.files],
                             "diff": t.diff} for n, t in turns]})


async def _pending(request: Request, sent: Sent) -> Response:
    """Pending mode's queue: each path, what it does to the real file, who proposed it. The real files are
    read only in a directory inside the roots (409 for a session whose files are elsewhere: a fleet task's)."""
    from auger.changes.pending import rows
    from auger.policy.fs import RootHandle

    server = _server(request)
    record = await server.hub.record(request.path_params["id"])
    entries = await server.hub.store.load_pending(record.id)
    found = []
    if entries:
        if not server.hub.roots.contains(record.cwd) or not os.path.isdir(record.cwd):
            raise Refused(409, f"session {record.id} works in {record.cwd}, which is not among this server's "
                               "directories: its pending changes are read where it runs")
        handle = RootHandle(Path(record.cwd))
        try:
            found = await asyncio.to_thread(rows, handle, entries)
        finally:
            handle.close()
    return _json({"count": len(found), "files": [
        {"path": r.path, "kind": r.kind, "added": r.added, "removed": r.removed, "proposed_by": r.proposers,
         "seqs": r.seqs} for r in found]})


async def _list_providers(request: Request, sent: Sent) -> Response:
    server = _server(request)
    if sent.query.get("probe", "stale") != "stale":
        raise Refused(400, "probe=stale is the one value: check the providers whose last check is too old")
    return _json({"providers": await server.providers.rows(probe_stale="probe" in sent.query)})


async def _probe_provider(request: Request, sent: Sent) -> Response:
    server = _server(request)
    return _json(await server.providers.probe(_provider_name(request)))


async def _patch_provider(request: Request, sent: Sent) -> Response:
    server = _server(request)
    return _json(await server.providers.patch(_provider_name(request), sent.body))


def _provider_name(request: Request) -> str:
    """The provider or agent the path names: ASCII letters, digits, '-' and '_' (400 otherwise)."""
    name = str(request.path_params["name"])
    if not _PROVIDER_NAME.fullmatch(name):
        raise Refused(400, "a provider or agent name is 1-64 ASCII letters, digits, '-' and '_'")
    return name
