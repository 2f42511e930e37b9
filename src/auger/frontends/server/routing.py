"""How an API route of `auger serve` is declared, and what every one does before and after its handler.

A route declares its method and path, the role it needs, its query parameters and body fields, and —
for an action — the audit's name for it. Before the handler runs: the caller's role is checked (403
naming the role it needs), the query and body checked against the declaration (an unknown or repeated
one is 400; a body read only within the limits, wire.read_body). After it, whatever the outcome, an
action is written in the audit with its status: who did what to what, and how it ended. So no route can
forget a check, and no action goes unrecorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from auger.frontends.server.sessions import Refused
from auger.frontends.server.team import role_refusal
from auger.frontends.server.wire import parse_body, parse_query, read_body
from auger.frontends.users import Principal
from auger.protocol.jsontext import dumps

if TYPE_CHECKING:
    from auger.frontends.server.state import Server


@dataclass
class Sent:
    """What a client sent a route, checked against the route's declaration: its query parameters, and its
    body's fields (an empty dict for a route that takes no body); and what the audit says of the action
    (`note`)."""

    query: dict[str, str]
    body: dict[str, Any]
    principal: Principal  # a public route's (the health check) is ANONYMOUS
    action: str = ""
    target: str = ""
    detail: dict[str, Any] = field(default_factory=dict)

    def note(self, target: str = "", action: str = "", **detail: Any) -> None:
        """What the audit records of this request: its target, a more precise action, details."""
        self.target = target or self.target
        self.action = action or self.action
        self.detail.update(detail)


Handler = Callable[[Request, Sent], Awaitable[Response]]
ANONYMOUS = Principal("anonymous", "viewer", "public")  # who calls a public route: never in a request's scope


def api(method: str, path: str, handler: Handler, *, role: str | None, query: Iterable[str] = (),
        body: Iterable[str] | None = None, required: Iterable[str] = (), audit: str = "") -> Route:
    """One API route. `role`: the least role that may call it (None: a public route, which the Guard lets
    through without credentials and which is never audited). Its query parameters (`query`) and body
    fields (`body`; None: it takes no body, and none is read) are part of its declaration and checked
    before its handler runs. `audit`: the action's name in the audit (none for a read)."""
    allowed = frozenset(query)
    fields = None if body is None else frozenset(body)
    needed = frozenset(required)

    async def endpoint(request: Request) -> Response:
        signed_in: Principal | None = request.scope.get("auger.user")
        principal = signed_in or ANONYMOUS
        sent = Sent({}, {}, principal, audit if role is not None else "")
        status = 500
        try:
            if role is not None and (signed_in is None or not principal.may(role)):
                raise Refused(403, role_refusal(principal, role) if signed_in else "not signed in")
            sent.query = parse_query(request.query_params.multi_items(), allowed)
            sent.body = parse_body(await read_body(request), fields, needed) if fields is not None else {}
            response = await handler(request, sent)
            status = getattr(response, "status_code", 200)  # an event stream is an ASGI app of its own
            return response
        except Refused as exc:
            status = exc.status
            sent.detail.setdefault("error", exc.message[:300])
            raise
        finally:
            if sent.action and signed_in is not None:
                await server_of(request).audit(principal, sent.action, sent.target or path_target(request),
                                               sent.detail, status)

    return Route(path, endpoint, methods=[method], name=f"{method} {path}")


def path_target(request: Request) -> str:
    """What the path names (a session, a task, a user), as the audit's target by default."""
    return str(request.path_params.get("id") or request.path_params.get("name") or "")


def server_of(request: Request) -> Server:
    server: Server = request.app.state.server
    return server


def json_response(data: Any, status: int = 200) -> Response:
    return Response(dumps(data), status_code=status, media_type="application/json")
