"""`/acp`: auger's ACP agent (frontends/acp/agent.py) for editors that reach the server over a WebSocket,
through the ACP SDK's own ASGI WebSocket handler.

Each connection gets its own `AugerAgent`, held to what the HTTP API is held to: projects inside the
server's roots, stored sessions loaded, resumed, forked or listed only when the server may open them
(`Hub.open_refusal`: inside the roots, no fleet task's), image blocks that really are images, no mode
more permissive than the server's, and the editor's files and terminals left alone — they are on the
editor's machine, not this one, so the tools work here, in auger's sandbox. When the socket closes,
that connection's sessions are shut down (and their leases released).
"""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from auger.frontends.server.sessions import Refused

if TYPE_CHECKING:
    from auger.frontends.server.sessions import Hub

_CONNECTION: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("auger_acp_connection", default=None)


class AcpOverWebSocket:
    """An ASGI app for the websocket scope; `close` ends every connection's sessions."""

    def __init__(self, config_for: Callable[[str], Any], store: Any, hub: Hub) -> None:
        from acp.http.server import AcpServer

        self.config_for = config_for
        self.store = store
        self.hub = hub
        self.server = AcpServer(self._agent)
        self.agents: set[Any] = set()

    def _agent(self, conn: Any) -> Any:
        """The agent of one connection (the SDK calls this as the socket is accepted, in its task)."""
        from auger.frontends.acp.agent import AugerAgent

        agent = AugerAgent(self.config_for, self.store, editor_terminals=False, editor_files=False,
                           project_dir=self._project_dir, max_mode=self.hub.mode,
                           open_refusal=self.hub.open_refusal)
        connection = _CONNECTION.get()
        if connection is not None:
            connection.append(agent)
        self.agents.add(agent)
        return agent

    def _project_dir(self, cwd: Any) -> str:
        from auger.frontends.acp.agent import refuse

        try:
            return self.hub.roots.project(cwd)
        except Refused as exc:
            raise refuse(exc.message) from None

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                       send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        from acp.ws.server import handle_asgi_websocket

        agents: list[Any] = []
        token = _CONNECTION.set(agents)
        try:
            await handle_asgi_websocket(self.server, scope, receive, send)
        finally:
            _CONNECTION.reset(token)
            for agent in agents:
                self.agents.discard(agent)
                await agent.close()

    async def close(self) -> None:
        for agent in list(self.agents):
            self.agents.discard(agent)
            await agent.close()
        await self.server.close()
