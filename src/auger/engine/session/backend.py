"""Which agent runs a session's turns — auger's own loop ("") or another agent (auger/backends) — and
the agent processes kept warm for it, created with the first backend turn and closed with the session.

Switching reads the backend catalog afresh, so an agent configured while the session runs can be
chosen; an unknown, disabled or broken one is refused with the reason, and the session keeps the
agent it had. The agent's own session id is kept in the store, so a later process continues the
agent's conversation when the agent can load it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from auger.protocol.events import BackendChanged

if TYPE_CHECKING:
    from auger.backends.pool import BackendPool
    from auger.config import Config
    from auger.engine.agents.backend_turn import BackendLink
    from auger.store.base import Store


class SessionBackend:
    def __init__(self, session_id: str, store: Store, config: Config) -> None:
        self.name = ""  # "" for auger's own loop
        self._session_id = session_id
        self._store = store
        self._config = config
        self._pool: BackendPool | None = None

    def switch(self, name: str) -> BackendChanged | str:
        """Let `name` run the next turns: the event saying so, or why not (the agent is kept)."""
        from auger.backends.config import load_backends
        from auger.backends.status import status_of

        catalog = load_backends(self._config.tables)
        spec = catalog.specs.get(name)
        if name and spec is None:
            return f"{name!r}: {catalog.errors.get(name) or 'no such backend; `auger backends` lists them'}"
        if spec is not None and (status := status_of(spec)).status != "available":
            return f"{name!r} is {status.status}: {status.detail}"
        previous, self.name = self.name, name
        if self._pool is not None:
            self._pool.specs = catalog.specs
        return BackendChanged(name, previous, spec.title if spec is not None else "")

    def link(self) -> BackendLink:
        """What a BackendTurn runs on: the agent, its warm process pool, its stored session id."""
        from auger.backends.config import load_backends
        from auger.backends.pool import BackendPool
        from auger.engine.agents.backend_turn import BackendLink

        name, store, session_id = self.name, self._store, self._session_id
        if self._pool is None:
            self._pool = BackendPool(load_backends(self._config.tables).specs,
                                     idle_timeout=self._config.backend_idle_timeout)

        async def save(agent_session_id: str) -> None:
            await store.set_backend_session(session_id, name, agent_session_id)

        return BackendLink(name, self._pool, lambda: store.get_backend_session(session_id, name), save)

    async def aclose(self) -> None:
        """Stop every agent process the session started."""
        if self._pool is not None:
            await self._pool.aclose()
