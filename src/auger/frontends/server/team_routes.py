"""`auger serve`'s routes for its people: the users (admins add and revoke them; a new user's token is
shown once), and the audit of who did what (admins read it, a page at a time, filtered)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from auger.frontends.server.routing import Sent, api, json_response, server_of
from auger.frontends.server.sessions import Refused
from auger.frontends.server.team import audit_json, short, user_json
from auger.frontends.server.wire import number
from auger.frontends.users import UserError, check_user, new_token, token_hash
from auger.store.base import UserExists


def routes() -> list[Route]:
    return [
        api("GET", "/api/users", list_users, role="admin"),
        api("POST", "/api/users", add_user, role="admin", audit="user.add", body={"name", "role"},
            required={"name", "role"}),
        api("POST", "/api/users/{name}/revoke", revoke_user, role="admin", body=(), audit="user.revoke"),
        api("GET", "/api/audit", audit_log, role="admin", query={"actor", "action", "target", "before", "limit"}),
    ]


async def list_users(request: Request, sent: Sent) -> Response:
    users = await server_of(request).hub.store.list_users()
    return json_response({"users": [user_json(u) for u in users]})


async def add_user(request: Request, sent: Sent) -> Response:
    """A new user: 201 with their token, shown this once (the store keeps its hash)."""
    name, role = sent.body["name"], sent.body["role"]
    if not isinstance(name, str) or not isinstance(role, str):
        raise Refused(400, "name and role are strings")
    sent.note(target=short(name, 40), role=short(role, 20))
    try:
        check_user(name, role)
    except UserError as exc:
        raise Refused(400, str(exc)) from None
    token = new_token()
    try:
        user = await server_of(request).hub.store.add_user(name, role, token_hash(token), sent.principal.name)
    except UserExists as exc:
        raise Refused(409, str(exc)) from None
    return json_response({**user_json(user), "token": token}, 201)


async def revoke_user(request: Request, sent: Sent) -> Response:
    """Revoke a user: their token and browsers are refused from the next request, their open streams and
    ACP connections end now."""
    name = str(request.path_params["name"])
    server = server_of(request)
    revoked = await server.hub.store.revoke_user(name)
    if revoked is None:
        raise Refused(404, f"no active user named {short(name, 40)!r}")
    server.watch.revoked(name)
    return json_response(user_json(revoked))


async def audit_log(request: Request, sent: Sent) -> Response:
    """Who did what, newest first, a page at a time (`next_before` continues), filtered by actor, action
    (a whole name, or its prefix before a dot: `op`, `task`) and target."""

    query = sent.query
    limit = number(query["limit"], "limit", low=1, high=500) if "limit" in query else 100
    before = number(query["before"], "before", low=1) if "before" in query else None
    entries = await server_of(request).hub.store.load_audit(
        before=before, limit=limit + 1, actor=query.get("actor"), action=query.get("action"),
        target=query.get("target"))
    page = entries[:limit]
    return json_response({"entries": [audit_json(e) for e in page],
                          "next_before": page[-1].id if len(entries) > limit else None})
