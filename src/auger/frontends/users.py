"""People, not one token: who may use `auger serve`, and what each of them may do.

The server's own token (`AUGER_SERVER_TOKEN`, or the file it keeps) is its **owner**'s, an admin: one
person runs a server with it exactly as before. A team adds **users** — `auger users add NAME --role
ROLE` prints that user's token once; the store keeps only its SHA-256 (tokens are 256 random bits, so a
fast hash is as good as a slow one), and looks a bearer token up by it on every request, so a revoked
token is refused at once, by every server on the database.

Roles, each able to do what the one before it can:

    viewer    read: sessions, transcripts, diffs, event streams, the fleet, providers
    member    + open, fork and resume sessions, send ops (prompts, interrupts, mode and model within the
                server's ceiling, undo…), submit, cancel and retry tasks
    approver  + answer approval requests (and use ACP over /acp, whose client answers its own)
    admin     + manage users, change providers, add MCP servers to a session, read the audit

A browser pairs as the user who asked for the link (its cookie names the user, MAC'd under the
owner's token), so it is that user, with that role, until the user is revoked or the owner's token
changes.

Below the roles is a **share** (`auger share ID`, a link a member makes): not a person but a read-only
view of one session — its snapshot, transcript, diffs and live events, nothing else — until it expires or
is revoked. Its token (`augs_…`) is kept as its SHA-256, like a user's, and looked up at every request.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from auger.store.base import ShareRecord, Store

ROLES = ("viewer", "member", "approver", "admin")
SHARE = "share"  # a share link's rank: below a viewer, held to one session
RANKS = (SHARE, *ROLES)
OWNER = "owner"  # the name the server's own token goes by
TOKEN_PREFIX = "aug_"
SHARE_PREFIX = "augs_"
_NAME = re.compile(r"[a-z][a-z0-9._-]{0,31}")


class UserError(ValueError):
    """A user that cannot be made as asked (a bad name or role); the message says why."""


@dataclass(frozen=True)
class Principal:
    """Who a request comes from: a user's name and role, and how they signed in (`token`, or a paired
    browser's id)."""

    name: str
    role: str
    via: str = "token"
    session: str | None = None  # a share's: the one session it shows
    expires: float | None = None  # a share's: when it stops working

    def may(self, role: str) -> bool:
        """Whether this principal's role includes `role`'s rights."""
        return RANKS.index(self.role) >= RANKS.index(role)

    def label(self, client: str = "") -> str:
        """How the record names them: the user, the browser if it was one, the name the client gave."""
        parts = [self.name] + ([self.via] if self.via != "token" else []) + ([client] if client else [])
        return parts[0] if len(parts) == 1 else f"{parts[0]} ({', '.join(parts[1:])})"


def check_user(name: str, role: str) -> None:
    if not _NAME.fullmatch(name) or name == OWNER:
        raise UserError(f"a user's name is 1-32 lower-case letters, digits or '._-', starting with a letter "
                        f"(and not {OWNER!r}, the server's own token): not {name!r}")
    if role not in ROLES:
        raise UserError(f"role must be one of {', '.join(ROLES)}, not {role!r}")


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def new_share_token() -> str:
    return SHARE_PREFIX + secrets.token_urlsafe(32)


def share_principal(share: ShareRecord) -> Principal:
    return Principal(f"share-{share.id}", SHARE, "share", share.session_id, share.expires)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class People:
    """Turns credentials into principals: the owner's token, users' tokens (from the store), and paired
    browsers' cookies. Nothing is cached: each request is looked up, so revoking a user takes effect at
    the next request (open event streams are watched: server/app.py)."""

    def __init__(self, owner_token: str, store: Store | None) -> None:
        self._owner_token = owner_token
        self.store = store
        self.owner = Principal(OWNER, "admin")

    async def bearer(self, token: str) -> Principal | None:
        if hmac.compare_digest(token.encode("utf-8", "surrogatepass"), self._owner_token.encode()):
            return self.owner
        if self.store is None or len(token) > 200:
            return None
        if token.startswith(SHARE_PREFIX):
            return await self.share(token)
        if not token.startswith(TOKEN_PREFIX):
            return None
        user = await self.store.user_by_token(token_hash(token))
        return Principal(user.name, user.role) if user is not None else None

    async def share(self, token: str) -> Principal | None:
        """The read-only principal a live share token names (None: no such share, expired or revoked)."""
        if self.store is None or not token.startswith(SHARE_PREFIX) or len(token) > 200:
            return None
        found = await self.store.share_by_token(token_hash(token))
        return share_principal(found) if found is not None and found.live(time.time()) else None

    async def current(self, principal: Principal) -> Principal | None:
        """The principal as it stands now: None once its user (or its share) is revoked or expired."""
        if principal.role == SHARE:
            found = await self.store.get_share(principal.name.removeprefix("share-")) if self.store else None
            return principal if found is not None and found.live(time.time()) else None
        if principal.name == OWNER:
            return Principal(OWNER, self.owner.role, principal.via)
        user = await self.store.get_user(principal.name) if self.store is not None else None
        if user is None or user.revoked is not None:
            return None
        return Principal(user.name, user.role, principal.via)

    # -- browsers ------------------------------------------------------------------------
    def new_cookie(self, principal: Principal) -> str:
        browser = secrets.token_hex(8)
        return f"{principal.name}.{browser}.{self._mac(principal.name, browser)}"

    async def cookie(self, value: str) -> Principal | None:
        """The principal a valid browser cookie names (its user still active), else None."""
        name, _, rest = value.partition(".")
        browser, _, mac = rest.partition(".")
        if not name or not browser or not mac \
                or not hmac.compare_digest(mac.encode(), self._mac(name, browser).encode()):
            return None
        return await self.current(Principal(name, "viewer", f"browser-{browser}"))

    def _mac(self, name: str, browser: str) -> str:
        message = f"browser:{browser}" if name == OWNER else f"browser:{name}:{browser}"
        return hmac.new(self._owner_token.encode(), message.encode(), hashlib.sha256).hexdigest()
