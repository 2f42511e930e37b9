"""What `auger serve`'s routes share: its options (what its operator decided), the sessions it runs, who
its people are, the provider probes, the audit, and whether it is closing. Apart from app.py so each
group of routes (sessions, fleet, team) can reach it without importing the app that mounts them."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from auger.frontends.http_guard import Exposure, Pairing
from auger.frontends.server.sessions import Hub, Roots
from auger.frontends.server.sse import PING_S
from auger.frontends.server.team import Watch, short
from auger.frontends.users import People, Principal

STATIC = Path(__file__).parent / "static"  # the web UI, shipped as package data
log = logging.getLogger("auger.serve")


@dataclass
class ServerOptions:
    store: Any
    config_for: Callable[[str], Any]  # project dir -> its config (the server's flags on top)
    roots: list[str]
    mode: str  # the most permissive mode a client may ask for
    token: str  # the owner's: an admin; users' tokens are in the store
    exposure: Exposure
    static_dir: Path = STATIC
    ping_s: float = PING_S
    secure_cookie: bool = False
    pairing: Pairing = field(default_factory=Pairing)
    acp: bool = True


class Server:
    """What the routes share: the sessions, the people, the provider probes, the audit, and whether it
    closes."""

    def __init__(self, options: ServerOptions) -> None:
        from auger.frontends.server.providers import Providers

        self.options = options
        self.hub = Hub(options.store, options.config_for, Roots(options.roots), options.mode)
        self.people = People(options.token, options.store)
        self.watch = Watch(self.people, options.store)
        self.pairing = options.pairing
        self.closing = asyncio.Event()
        self.providers = Providers(options.config_for, options.roots[0])
        self._ops_locks: dict[str, asyncio.Lock] = {}
        self.acp: Any = None
        self.scheduler: Any = None  # fleet/schedules.py: fires the store's schedules while the server runs
        self._background: list[asyncio.Task[None]] = []
        self._drained = False

    def start_schedules(self, scheduler: Any) -> None:
        """Fire the store's schedules while the server runs (fleet/schedules.py `Scheduler`): on PostgreSQL
        one loop of many — workers and servers alike, each due time firing once — on SQLite the only one."""
        self.scheduler = scheduler
        self._background.append(asyncio.create_task(scheduler.run(), name="serve-schedules"))

    async def drain(self) -> None:
        """Graceful shutdown: turns interrupted and recorded, sessions shut down, then every stream told
        the server is going away and closed; ACP connections closed."""
        if self._drained:
            return
        self._drained = True
        if self.scheduler is not None:
            self.scheduler.stop()
        if self._background:  # a pass under way ends (its runs started), then the loop stops
            await asyncio.wait(self._background, timeout=5)
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.hub.drain()
        self.closing.set()
        if self.acp is not None:
            await self.acp.close()
        await self.watch.close()

    def ops_lock(self, session_id: str) -> asyncio.Lock:
        return self._ops_locks.setdefault(session_id, asyncio.Lock())

    async def audit(self, principal: Principal, action: str, target: str, detail: dict[str, Any],
                    status: int) -> None:
        """Write what someone did (or tried) in the audit; a store that cannot take it is logged, never the
        request's failure (the action itself is recorded where it happened)."""
        try:
            await self.hub.store.record_audit(principal.name, action, short(target), detail, status)
        except Exception as exc:
            log.warning("the audit could not record %s by %s: %s", action, principal.name, exc)
