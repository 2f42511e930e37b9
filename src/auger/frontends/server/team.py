"""The people of `auger serve` as its routes see them: who may call each route (a role), what is written
in the audit, the routes that manage users and read the audit, and the watch that closes a revoked
user's open streams at once.

Roles are checked per route (app.py declares each route's role) and, for ops, per op type
(`op_role`): an approval decision needs an approver; adding or removing an MCP server — a command the
server would start — needs an admin; every other op a member. A refused request is answered 403 naming
the role it needs, and written in the audit like any other action.

Revocation is immediate for requests (each one is looked up: users.People). Open event streams and ACP
connections outlive their first check, so each registers here; a revocation through the API ends its
user's at once, and one made elsewhere (`auger users revoke` on the same database, another server) is
noticed within `WATCH_S` seconds — the users and shares tables' last change is read that often while
anything is open. A share's stream also ends the moment the share expires.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from auger.frontends.users import ROLES, SHARE, Principal

if TYPE_CHECKING:
    from auger.frontends.users import People
    from auger.store.base import AuditRecord, Store

log = logging.getLogger("auger.serve")

WATCH_S = 1.0  # how often the users table is read while a stream or ACP connection is open
OP_ROLES = {"approval_decision": "approver", "add_mcp_server": "admin", "remove_mcp_server": "admin"}
SHARE_REFUSAL = ("a share link shows one session, read-only: its transcript, diffs and live events, and nothing "
                 "else")


def op_role(op_type: str) -> str:
    """The role an op of this type needs."""
    return OP_ROLES.get(op_type, "member")


def short(text: Any, limit: int = 200) -> str:
    """A value as the audit keeps it: printable text, cut at `limit` characters."""
    value = str(text)
    return "".join(c if c.isprintable() else "?" for c in value[:limit])


class Watch:
    """The open streams and connections of each user, ended when the user is revoked."""

    def __init__(self, people: People, store: Store) -> None:
        self.people = people
        self.store = store
        self._open: dict[asyncio.Event, Principal] = {}
        self._expiries: dict[asyncio.Event, asyncio.TimerHandle] = {}
        self._task: asyncio.Task[None] | None = None
        self._seen: tuple[float, float] | None = None

    def follow(self, principal: Principal) -> asyncio.Event:
        """An event set when `principal` loses access (a share: also when it expires); `forget` it when the
        stream ends."""
        ended = asyncio.Event()
        self._open[ended] = principal
        if principal.expires is not None:
            loop = asyncio.get_running_loop()
            self._expiries[ended] = loop.call_later(max(0.0, principal.expires - time.time()), ended.set)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._watch(), name="serve-revocations")
        return ended

    def forget(self, ended: asyncio.Event) -> None:
        self._open.pop(ended, None)
        timer = self._expiries.pop(ended, None)
        if timer is not None:
            timer.cancel()

    def revoked(self, name: str) -> None:
        """A user (or a share, `share-ID`) was revoked here: end their streams now."""
        for ended, principal in list(self._open.items()):
            if principal.name == name:
                ended.set()

    async def _watch(self) -> None:
        while self._open:
            try:
                changed = (await self.store.users_changed(), await self.store.shares_changed())
                if self._seen is not None and changed != self._seen:
                    await self._check()
                self._seen = changed
            except Exception as exc:  # a store that cannot be read now: try again at the next tick
                log.warning("reading the users table failed: %s", exc)
            await asyncio.sleep(WATCH_S)

    async def _check(self) -> None:
        for ended, principal in list(self._open.items()):
            if await self.people.current(principal) is None:
                ended.set()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


def user_json(user: Any) -> dict[str, Any]:
    return {"name": user.name, "role": user.role, "created": user.created, "created_by": user.created_by,
            "revoked": user.revoked}


def audit_json(entry: AuditRecord) -> dict[str, Any]:
    return {"id": entry.id, "time": entry.time, "actor": entry.actor, "action": entry.action,
            "target": entry.target, "detail": entry.detail, "status": entry.status}


def role_refusal(principal: Principal, needed: str) -> str:
    """Why a principal's role does not reach `needed`, in the 403's words."""
    if principal.role == SHARE:
        return SHARE_REFUSAL
    return (f"{principal.name} is a {principal.role}: this needs the {needed} role "
            f"({', '.join(ROLES[ROLES.index(needed):])})")
