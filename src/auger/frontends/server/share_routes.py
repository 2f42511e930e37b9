"""`auger serve`'s routes for share links: a member makes a read-only link to one session, with an expiry
(`POST /api/sessions/{id}/shares`), lists them and revokes one — which ends the streams it has open at once.

A share is a principal below a viewer, held to its session (users.py, routing.py): its snapshot, items,
diffs and live events, and nothing else — no op, no approval, no other session, no fleet, no providers,
no pending changes read from the files. Nothing leaves the server: the link is the server's own URL with
the token, and the store keeps the token's hash only. The browser that opens it gets the token as an
`HttpOnly; SameSite=Strict` cookie (http_guard.py) and lands on the session's page, drawn read-only.
"""

from __future__ import annotations

import re
import secrets
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from auger.frontends.server.routing import Sent, api, json_response, server_of
from auger.frontends.server.sessions import Refused
from auger.frontends.users import new_share_token, token_hash

DEFAULT_EXPIRES_S = 24 * 3600
MAX_EXPIRES_S = 30 * 24 * 3600
MIN_EXPIRES_S = 60
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def routes() -> list[Route]:
    return [
        api("POST", "/api/sessions/{id}/shares", create_share, role="member", audit="share.create",
            body={"expires_in"}),
        api("GET", "/api/shares", list_shares, role="member", query={"session"}),
        api("POST", "/api/shares/{share}/revoke", revoke_share, role="member", body=(), audit="share.revoke"),
    ]


def share_json(share: Any, now: float | None = None) -> dict[str, Any]:
    now = time.time() if now is None else now
    return {"id": share.id, "session_id": share.session_id, "created": share.created, "created_by": share.created_by,
            "expires": share.expires, "revoked": share.revoked, "live": share.live(now)}


async def create_share(request: Request, sent: Sent) -> Response:
    """A new read-only link to the session (201): its URL carries the token, shown this once (also alone, as
    `token`, for a program that sends it as a bearer token)."""
    server = server_of(request)
    record = await server.hub.record(request.path_params["id"])
    expires_in = _seconds(sent.body.get("expires_in", DEFAULT_EXPIRES_S))
    if expires_in is None or not MIN_EXPIRES_S <= expires_in <= MAX_EXPIRES_S:
        raise Refused(400, f"expires_in is a number of seconds from {MIN_EXPIRES_S} to {MAX_EXPIRES_S} (30 days), "
                           "or a duration such as 30m, 1h or 7d")
    token = new_share_token()
    share = await server.hub.store.add_share(secrets.token_hex(5), record.id, token_hash(token), sent.principal.name,
                                             time.time() + expires_in)
    sent.note(target=record.id, share=share.id, expires_in=expires_in)
    origin = f"{server.options.exposure.scheme}://{request.headers.get('host', '')}"
    return json_response({**share_json(share), "token": token, "url": f"{origin}/share?code={token}"}, 201)


def _seconds(value: Any) -> int | None:
    """Seconds, from a number of them or a duration (`90s`, `30m`, `1h`, `7d`); None for anything else."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    found = re.fullmatch(r"([0-9]{1,6})([smhd])", value.strip()) if isinstance(value, str) else None
    return int(found.group(1)) * UNITS[found.group(2)] if found else None


async def list_shares(request: Request, sent: Sent) -> Response:
    """The shares made (of one session, with `session`), newest first; never their tokens."""
    session = sent.query.get("session")
    if session is not None:
        session = (await server_of(request).hub.record(session)).id
    shares = await server_of(request).hub.store.list_shares(session)
    now = time.time()
    return json_response({"shares": [share_json(s, now) for s in shares]})


async def revoke_share(request: Request, sent: Sent) -> Response:
    """Revoke a share: refused from its next request, its open streams ended now."""
    server = server_of(request)
    share_id = str(request.path_params["share"])
    sent.note(target=share_id[:40])
    revoked = await server.hub.store.revoke_share(share_id) if share_id.isalnum() and len(share_id) <= 40 else None
    if revoked is None:
        raise Refused(404, f"no share {share_id[:40]!r} that is not revoked already")
    server.watch.revoked(f"share-{revoked.id}")
    return json_response(share_json(revoked))
