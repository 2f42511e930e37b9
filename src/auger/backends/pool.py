"""BackendPool: a session's running agents, kept warm between turns and stopped when idle.

Starting an agent costs seconds (a node runtime, its config, its first model handshake), so a
session keeps each agent it used running between turns. One that has not run a prompt for
`idle_timeout` seconds is disposed by a reaper task (which exists only while agents do); the next
prompt starts it again and loads its session when the agent supports that. `aclose` disposes all,
and the session calls it at shutdown: no agent process outlives its session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Callable

from auger.backends.base import AgentBackend, BackendError, BackendSpec

log = logging.getLogger("auger.backends")

BackendFactory = Callable[[BackendSpec], AgentBackend]


def acp_factory(spec: BackendSpec) -> AgentBackend:
    from auger.backends.acp import AcpBackend

    return AcpBackend(spec)


class BackendPool:
    def __init__(self, specs: dict[str, BackendSpec], *, idle_timeout: float = 600.0,
                 factory: BackendFactory = acp_factory) -> None:
        self.specs = specs
        self.idle_timeout = idle_timeout
        self._factory = factory
        self._running: dict[str, AgentBackend] = {}
        self._last_used: dict[str, float] = {}
        self._reaper: asyncio.Task[None] | None = None

    def running(self) -> dict[str, AgentBackend]:
        return dict(self._running)

    async def acquire(self, name: str, cwd: str, agent_session_id: str | None) -> AgentBackend:
        """The named agent with its session open, started (or restarted after a crash) if need be."""
        spec = self.specs.get(name)
        if spec is None:
            raise BackendError(f"no backend named {name!r}; `auger backends` lists them")
        if not spec.enabled:
            raise BackendError(f"backend {name!r} is disabled (enabled = false in [backends.{name}])")
        backend = self._running.get(name)
        if backend is None:
            backend = self._running[name] = self._factory(spec)
        self._last_used[name] = time.monotonic()
        await backend.ensure_session(cwd, agent_session_id)
        self._last_used[name] = time.monotonic()
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.create_task(self._reap_loop(), name="auger-backend-reaper")
        return backend

    def touch(self, name: str) -> None:
        """A prompt just ended: the idle clock starts now."""
        self._last_used[name] = time.monotonic()

    async def reap(self) -> list[str]:
        """Dispose the agents idle for longer than the timeout; returns their names."""
        now = time.monotonic()
        idle = [name for name, backend in self._running.items()
                if not backend.busy and now - self._last_used.get(name, now) >= self.idle_timeout]
        for name in idle:
            await self._dispose(name)
        return idle

    async def _reap_loop(self) -> None:
        while self._running:
            await asyncio.sleep(max(0.05, min(self.idle_timeout / 2, 30.0)))
            try:
                await self.reap()
            except Exception:  # a failed dispose must not stop the reaping of the others
                log.exception("reaping idle backends failed")

    async def _dispose(self, name: str) -> None:
        backend = self._running.pop(name, None)
        self._last_used.pop(name, None)
        if backend is not None:
            await backend.dispose()

    async def aclose(self) -> None:
        """Stop every agent of the pool (session shutdown)."""
        reaper, self._reaper = self._reaper, None
        if reaper is not None and not reaper.done():
            reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reaper
        for name in list(self._running):
            await self._dispose(name)
