"""What a request must show before it reaches one of auger's HTTP servers (`auger mcp-server --http`).

Anything that can reach the port could otherwise hand auger a task: another user's process, a web
page in the user's browser (DNS rebinding, or a plain cross-site request), a command in some sandbox.
So every request needs, in this order:

1. a `Host` the server answers to (its loopback names, or the host it was told to bind), with its port:
   a rebound DNS name is refused (421);
2. no `Origin`, or the server's own: a page from another site is refused (403);
3. `Authorization: Bearer <token>` (401 otherwise, compared in constant time). The token is
   `AUGER_SERVER_TOKEN`, or one generated once and kept in the user's data dir (mode 0600). It is
   never read from the query string, which ends up in logs and browser history.
"""

from __future__ import annotations

import hmac
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Awaitable, Callable

TOKEN_ENV = "AUGER_SERVER_TOKEN"
TOKEN_FILE = "server-token"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")

Asgi = Callable[[dict, Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Awaitable[None]]


@dataclass(frozen=True)
class ServerToken:
    value: str
    where: str  # where the user finds it: "in <file>", or "the value of AUGER_SERVER_TOKEN"


def server_token(environ: dict[str, str] | os._Environ[str], data_dir: Path) -> ServerToken:
    """The token clients must send: `AUGER_SERVER_TOKEN`, else the one kept in the data dir (made on
    first use, readable by the user only)."""
    if environ.get(TOKEN_ENV):
        return ServerToken(environ[TOKEN_ENV], f"the value of {TOKEN_ENV}")
    path = data_dir / TOKEN_FILE
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, encoding="utf-8") as kept:
            if os.fstat(kept.fileno()).st_mode & 0o077:
                os.fchmod(kept.fileno(), 0o600)  # nobody else may read it, whoever loosened it
            token = kept.read().strip()
        if token:
            return ServerToken(token, f"in {path}")
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW)
    token = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w", encoding="utf-8") as new:
        new.write(token + "\n")
    return ServerToken(token, f"in {path}")


class RequestGuard:
    """An ASGI wrapper: a request reaches `app` only with a right Host, no foreign Origin, and the token."""

    def __init__(self, app: Asgi, *, token: str, host: str, port: int) -> None:
        self.app = app
        self.token = token.encode()
        names = {*LOOPBACK_NAMES, f"[{host}]" if ":" in host else host}
        self.hosts = {f"{name}:{port}" for name in names} | (names if port == 80 else set())
        self.origins = {f"http://{authority}" for authority in self.hosts}

    async def __call__(self, scope: dict, receive: Callable[[], Awaitable[dict]],
                       send: Callable[[dict], Awaitable[None]]) -> None:
        if scope["type"] != "http":  # lifespan: the app's own start and stop
            await self.app(scope, receive, send)
            return
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        refusal = self.refusal(headers)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, text = refusal
        extra = [(b"www-authenticate", b'Bearer realm="auger"')] if status == 401 else []
        body = (text + "\n").encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                (b"content-length", str(len(body)).encode()), *extra]})
        await send({"type": "http.response.body", "body": body})

    def refusal(self, headers: dict[str, str]) -> tuple[int, str] | None:
        """(status, why) for a request that may not pass; None for one that may."""
        if headers.get("host", "").lower() not in self.hosts:
            return 421, "this server does not answer to that Host"
        origin = headers.get("origin")
        if origin is not None and origin.lower() not in self.origins:
            return 403, "cross-site requests are refused"
        scheme, _, credential = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(credential.strip().encode(), self.token):
            return 401, "send the server's token as `Authorization: Bearer <token>`"
        return None


def serving_note(url: str, token: ServerToken) -> str:
    """What the user is told at start: where the server is and where its token is."""
    return f"auger mcp-server: serving {url}; clients send `Authorization: Bearer <token>`, the token is {token.where}"
