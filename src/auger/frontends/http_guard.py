"""Who may talk to auger's HTTP servers, and from where: tokens, paired browsers, the bound Host,
same-site Origins. Both `auger serve` and `auger mcp-server --http` put `Guard` in front of everything.

Anything that can reach the port could otherwise hand auger a task: another user's process, a web
page in the user's browser (DNS rebinding, or a plain cross-site request), a command in some sandbox.
So every request — each route, the SSE streams, a WebSocket, the web UI — shows, in this order:

1. a `Host` naming the address the server was bound to (or a name the operator allowed), so a page
   whose DNS name was rebound to 127.0.0.1 is refused (403);
2. no cross-site `Origin` (nor `Sec-Fetch-Site: cross-site`), unless that origin was configured for
   CORS; a browser's state-changing request must also say it is same-origin (403);
3. a credential (401): `Authorization: Bearer TOKEN` (API clients), or — where the server pairs
   browsers — the cookie a browser got by redeeming a one-use pairing code at `/pair?code=…`
   (`HttpOnly; SameSite=Strict`). A token in the query string is never read, since URLs end up in logs
   and browser history. Secrets are compared in constant time. The exceptions are a `GET` (or `HEAD`)
   of a path the server names public — `auger serve`'s health check, which tells nothing but "ok", the
   version and whether the store answers — and a `POST` below a prefix the server names signed — its
   webhook intakes, whose route checks the body's signature, the one credential a forge sends; both
   still pass 1 and 2.

Which credentials name whom is the `Credentials` given: `Keys`, the server's one token (`auger
mcp-server --http`), or `users.People` — the owner's token and each user's (`auger serve`). The
server's own token is `AUGER_SERVER_TOKEN` (16 characters or more), or one generated once and kept in
the user's data dir (mode 0600; a file others may read, or a symlink, is refused rather than trusted).
A pairing code is made for one principal and redeemed as them; the browser's cookie names them, MAC'd
under the server's token, so it survives a restart and dies with the token (or with the user).
The principal is put in `scope["auger.user"]`, and the name the record shows in `scope["auger.client"]`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Mapping, Protocol

from auger.frontends.users import Principal

TOKEN_ENV = "AUGER_SERVER_TOKEN"
TOKEN_FILE = "server-token"
MIN_TOKEN_CHARS = 16
COOKIE = "auger_auth"
SHARE_COOKIE = "auger_share"  # a share link's token, once its link was opened in this browser
PAIRING_TTL_S = 600.0  # a printed pairing link works for ten minutes, once
CLIENT_HEADER = "x-auger-client"  # a client may name itself (shown as who answered an approval)
_SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
_SESSION_ID = re.compile(r"[A-Za-z0-9-]{1,64}")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class TokenError(ValueError):
    """The token cannot be had (too short, or its file is unsafe); the message says what to do."""


def load_token(env: Mapping[str, str], data_dir: Path) -> tuple[str, str]:
    """(token, where it came from): the environment's, else the one kept in `data_dir` (made on first use)."""
    given = env.get(TOKEN_ENV)
    if given is not None:
        if len(given) < MIN_TOKEN_CHARS:
            raise TokenError(f"{TOKEN_ENV} must be at least {MIN_TOKEN_CHARS} characters")
        return given, TOKEN_ENV
    path = data_dir / TOKEN_FILE
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return kept_token(path), str(path)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        token = secrets.token_urlsafe(32)
        handle.write(token + "\n")
    return token, str(path)


def kept_token(path: Path) -> str:
    info = path.lstat()
    if not path.is_file() or path.is_symlink() or info.st_mode & 0o077 or info.st_uid != os.getuid():
        raise TokenError(f"{path} must be a regular file of yours readable by you alone (chmod 600 {path})")
    token = path.read_text(encoding="utf-8").strip()
    if len(token) < MIN_TOKEN_CHARS:
        raise TokenError(f"{path} holds no usable token; delete it and a new one is made")
    return token


def token_whereabouts(source: str) -> str:
    """Where the user finds the token, for the line a server prints at start (never the token itself)."""
    return TOKEN_ENV if source == TOKEN_ENV else f"the file {source}"


@dataclass
class Pairing:
    """One-use pairing codes for browsers, each for one principal; each expires `ttl` seconds after it was
    made."""

    ttl: float = PAIRING_TTL_S
    clock: Callable[[], float] = time.monotonic
    _codes: dict[str, tuple[float, Principal | None]] = field(default_factory=dict)  # code -> expiry, for whom

    def new_code(self, principal: Principal | None = None) -> str:
        """A code that pairs a browser as `principal` (None: whoever the credentials call the owner)."""
        now = self.clock()
        self._codes = {code: entry for code, entry in self._codes.items() if entry[0] > now}
        code = secrets.token_urlsafe(18)
        self._codes[code] = (now + self.ttl, principal)
        return code

    def redeem(self, code: str) -> tuple[bool, Principal | None]:
        """(True, for whom) once for a live code; every code is compared, in constant time, and the match
        is spent."""
        now = self.clock()
        found = None
        for known in list(self._codes):
            if hmac.compare_digest(known.encode(), code.encode("utf-8", "surrogatepass")):
                found = known
        if found is None:
            return False, None
        until, principal = self._codes.pop(found)
        return until > now, principal


class Credentials(Protocol):
    """Who a credential names: a bearer token, a browser's cookie, a share link's token; and the cookie for a
    paired browser."""

    owner: Principal

    async def bearer(self, token: str) -> Principal | None: ...
    async def cookie(self, value: str) -> Principal | None: ...
    async def share(self, token: str) -> Principal | None: ...
    def new_cookie(self, principal: Principal) -> str: ...


@dataclass(frozen=True)
class Exposure:
    """Where the server listens, and which Host names and Origins it answers to."""

    scheme: str  # http | https
    hosts: frozenset[str]  # acceptable Host header values, port included
    cors_origins: frozenset[str] = frozenset()

    @property
    def origins(self) -> frozenset[str]:
        return frozenset(f"{self.scheme}://{host}" for host in self.hosts)


def exposure(host: str, port: int, *, tls: bool, allowed_hosts: tuple[str, ...] = (),
             cors_origins: tuple[str, ...] = ()) -> Exposure:
    """The Host values a client may send: the bound address, the loopback names when bound to loopback or
    to every address, and the names the operator allowed (for a wildcard bind, this machine's names)."""
    import ipaddress
    import socket

    names = {host, *allowed_hosts}
    wildcard = host in ("0.0.0.0", "::", "")
    if wildcard or is_loopback(host):
        names |= {"127.0.0.1", "localhost", "::1"}
    if wildcard and not allowed_hosts:
        names |= {socket.gethostname(), socket.getfqdn()}
    names -= {"0.0.0.0", "::", ""}
    hosts = set()
    for name in names:
        try:
            shown = f"[{name}]" if ipaddress.ip_address(name).version == 6 else name
        except ValueError:
            shown = name.lower()
        hosts.add(f"{shown}:{port}")
        if port == (443 if tls else 80):
            hosts.add(shown)
    return Exposure("https" if tls else "http", frozenset(hosts), frozenset(o.rstrip("/") for o in cors_origins))


def is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class Keys:
    """One token, whoever holds it (`auger mcp-server --http`), and the browser cookies derived from it."""

    token: str

    def __post_init__(self) -> None:
        self.owner = Principal("api", "admin")

    async def bearer(self, token: str) -> Principal | None:
        ok = hmac.compare_digest(token.encode("utf-8", "surrogatepass"), self.token.encode())
        return self.owner if ok else None

    def new_cookie(self, principal: Principal) -> str:
        browser = secrets.token_hex(8)
        return f"{browser}.{self._mac(browser)}"

    async def share(self, token: str) -> Principal | None:
        return None  # one token, no share links

    async def cookie(self, value: str) -> Principal | None:
        browser, _, mac = value.partition(".")
        if not browser or not mac or not hmac.compare_digest(mac.encode(), self._mac(browser).encode()):
            return None
        return Principal(self.owner.name, self.owner.role, f"browser-{browser}")

    def _mac(self, browser: str) -> str:
        return hmac.new(self.token.encode(), f"browser:{browser}".encode(), hashlib.sha256).hexdigest()


def bearer_token(header: str | None) -> str | None:
    """The credential of an `Authorization: Bearer …` header (the scheme's name is case-insensitive, RFC
    9110), else None."""
    scheme, _, credential = (header or "").partition(" ")
    return credential.strip() if scheme.lower() == "bearer" and credential.strip() else None


def client_name(headers: Mapping[str, str]) -> str:
    """The name a client gave itself (`X-Auger-Client`), kept to a few safe characters, for the record."""
    name = headers.get(CLIENT_HEADER, "")
    return "".join(c for c in name if c.isalnum() or c in " ._-")[:40].strip()


class Guard:
    """ASGI middleware: Host, Origin and credentials for every http and websocket request (see the module
    docstring). With `pairing`, browsers pair at `/pair` (the one path served without credentials) and
    then send their cookie; without it, only the bearer token opens the door. CORS preflights of
    configured origins are answered here. The caller's identity is put in `scope["auger.client"]`."""

    def __init__(self, app: Any, keys: Credentials, exposed: Exposure, pairing: Pairing | None = None, *,
                 secure_cookie: bool = False, public: frozenset[str] = frozenset(),
                 signed: tuple[str, ...] = ()) -> None:
        self.app = app
        self.keys = keys
        self.exposed = exposed
        self.pairing = pairing
        self.secure_cookie = secure_cookie
        self.public = public  # paths a GET or HEAD reaches without credentials (Host and Origin still checked)
        self.signed = signed  # path prefixes a POST reaches without them: the route checks the body's signature

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        method = scope.get("method", "GET")
        if headers.get("host", "").lower() not in self.exposed.hosts:
            await deny(scope, receive, send, 403, "this server does not answer to that Host name")
            return
        if self.pairing is not None and scope["type"] == "http" and scope["path"] == "/share" and method == "GET":
            await self._share(scope, send)  # a link opened from anywhere (a chat, a mail): read-only, one session
            return
        origin = headers.get("origin")
        cors = origin is not None and origin in self.exposed.cors_origins
        if origin is not None and origin not in self.exposed.origins and not cors:
            await deny(scope, receive, send, 403, "cross-site requests are refused")
            return
        if headers.get("sec-fetch-site") == "cross-site" and not cors:
            await deny(scope, receive, send, 403, "cross-site requests are refused")
            return
        if cors and method == "OPTIONS" and scope["type"] == "http":
            await _preflight(send, origin or "")
            return
        if self.pairing is not None and scope["type"] == "http" and scope["path"] == "/pair" and method == "GET":
            await self._pair(scope, send, self.pairing)
            return
        if scope["type"] == "http" and scope["path"] in self.public and method in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "http" and method == "POST" and _below(scope["path"], self.signed):
            await self.app(scope, receive, send)  # no bearer token: the intake's route checks the signature
            return
        token = bearer_token(headers.get("authorization"))
        principal = await self.keys.bearer(token) if token is not None else None
        if principal is None and self.pairing is not None:
            cookies = _cookies(headers)
            principal = await self.keys.cookie(cookies[COOKIE]) if cookies.get(COOKIE) else None
            if principal is None and cookies.get(SHARE_COOKIE):
                principal = await self.keys.share(cookies[SHARE_COOKIE])
            if principal is not None and scope["type"] == "http" and method not in _SAFE_METHODS and origin is None:
                await deny(scope, receive, send, 403, "a browser's request must carry its Origin")
                return
        if principal is None:
            await deny(scope, receive, send, 401, "authentication required: send 'Authorization: Bearer TOKEN'" + (
                ", or pair this browser with the link `auger serve` printed" if self.pairing is not None else ""))
            return
        scope["auger.user"] = principal
        scope["auger.client"] = principal.label(client_name(headers))
        await self.app(scope, receive, send if not cors else _with_cors(send, origin or ""))

    async def _pair(self, scope: Scope, send: Send, pairing: Pairing) -> None:
        from urllib.parse import parse_qs

        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        code = (query.get("code") or [""])[0]
        session = (query.get("session") or [""])[0]  # the page to land on: a session's, or the home page
        landing = f"/#/s/{session}" if _SESSION_ID.fullmatch(session) else "/"
        live, principal = pairing.redeem(code) if code else (False, None)
        if not live:
            await _plain(send, 403, "this pairing link is used up or expired; ask `auger serve` for a new one "
                                    "(POST /api/pair)")
            return
        cookie = f"{COOKIE}={self.keys.new_cookie(principal or self.keys.owner)}; Path=/; HttpOnly; SameSite=Strict"
        if self.secure_cookie:
            cookie += "; Secure"
        await send({"type": "http.response.start", "status": 303,
                    "headers": [(b"location", landing.encode()), (b"set-cookie", cookie.encode()),
                                (b"cache-control", b"no-store"),
                                (b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})


    async def _share(self, scope: Scope, send: Send) -> None:
        """Open a share link: its token becomes this browser's share cookie, and a page that takes it on to the
        session (a same-origin step, so a link followed from another site lands signed in)."""
        from urllib.parse import parse_qs

        code = (parse_qs(scope.get("query_string", b"").decode("latin-1")).get("code") or [""])[0]
        principal = await self.keys.share(code) if code else None
        if principal is None or principal.session is None or not _SESSION_ID.fullmatch(principal.session):
            await _plain(send, 403, "this share link was revoked, has expired, or is not one")
            return
        cookie = f"{SHARE_COOKIE}={code}; Path=/; HttpOnly; SameSite=Strict"
        if self.secure_cookie:
            cookie += "; Secure"
        landing = f"/#/s/{principal.session}"
        body = (f'<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url={landing}">'
                f'<title>auger</title><a href="{landing}">Open the shared session</a>').encode()
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"text/html; charset=utf-8"), (b"set-cookie", cookie.encode()),
            (b"cache-control", b"no-store"), (b"referrer-policy", b"no-referrer"),
            (b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'"),
            (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


def _below(path: str, prefixes: tuple[str, ...]) -> bool:
    """Whether `path` is one segment below one of `prefixes` (`/api/hooks/NAME`, never deeper, never a dot)."""
    for prefix in prefixes:
        rest = path[len(prefix):] if path.startswith(prefix) else None
        if rest and "/" not in rest and rest not in (".", ".."):
            return True
    return False


def _headers(scope: Scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in scope.get("headers", []):
        out.setdefault(key.decode("latin-1").lower(), value.decode("latin-1"))
    return out


def _cookies(headers: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in headers.get("cookie", "").split(";"):
        name, sep, value = part.strip().partition("=")
        if sep:
            out.setdefault(name, value)
    return out


async def deny(scope: Scope, receive: Receive, send: Send, status: int, message: str) -> None:
    """Refuse an http request or a websocket handshake with `status` and a one-line reason."""
    if scope["type"] == "http":
        await _plain(send, status, message)
        return
    await receive()  # websocket.connect
    if "websocket.http.response" in scope.get("extensions", {}):  # a real status, where the server can send one
        body = json.dumps({"error": message}).encode()
        await send({"type": "websocket.http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "websocket.http.response.body", "body": body})
    else:
        await send({"type": "websocket.close", "code": 4000 + status})


async def _plain(send: Send, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    challenge = [(b"www-authenticate", b'Bearer realm="auger"')] if status == 401 else []
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *challenge]})
    await send({"type": "http.response.body", "body": body})


async def _preflight(send: Send, origin: str) -> None:
    await send({"type": "http.response.start", "status": 204, "headers": [
        (b"access-control-allow-origin", origin.encode()), (b"vary", b"Origin"),
        (b"access-control-allow-methods", b"GET, POST, PATCH, DELETE"),
        (b"access-control-allow-headers", b"authorization, content-type, last-event-id, x-auger-client"),
        (b"access-control-max-age", b"600")]})
    await send({"type": "http.response.body", "body": b""})


def _with_cors(send: Send, origin: str) -> Send:
    async def wrapped(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []),
                                              (b"access-control-allow-origin", origin.encode()), (b"vary", b"Origin")]}
        await send(message)

    return wrapped
