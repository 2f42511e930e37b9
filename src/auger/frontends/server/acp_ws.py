"""`/acp`: auger's ACP agent (frontends/acp/agent.py) for editors that reach the server over a WebSocket,
through the ACP SDK's own ASGI WebSocket handler.

Each connection gets its own `AugerAgent`, held to what the HTTP API is held to: projects inside the
server's roots, stored sessions loaded, resumed, forked or listed only when the server may open them
(`Hub.open_refusal`: inside the roots, no fleet task's), image blocks that really are images, no mode
more permissive than the server's, approvals that never save a rule in the operator's rules.toml, and
the editor's files and terminals left alone — they are on the editor's machine, not this one, so the
tools work here, in auger's sandbox. An ACP client answers its own sessions' permission requests, so
only a user who may answer approvals (an approver or admin) may connect; the connection ends at once
when that user is revoked.

The sessions are the server's (`Hub`): one an editor opens is driven by the browser, the terminal and
scripts too, and loading one the server runs joins it. When the socket closes, the sessions that
connection opened are shut down (and their leases released); those it joined go on.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from auger.frontends.http_guard import deny
from auger.frontends.server.sessions import Refused
from auger.frontends.server.team import role_refusal

if TYPE_CHECKING:
    from auger.frontends.server.sessions import Hub
    from auger.frontends.server.team import Watch

ROLE = "approver"  # an ACP client answers its own permission requests

_CONNECTION: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("auger_acp_connection", default=None)


class AcpOverWebSocket:
    """An ASGI app for the websocket scope; `close` ends every connection's sessions."""

    def __init__(self, config_for: Callable[[str], Any], store: Any, hub: Hub, watch: Watch | None = None) -> None:
        from auger.pydantic_lazy import imported

        imported("acp")  # the SDK's models made at their first use (auger/pydantic_lazy.py)
        from acp.http.server import AcpServer

        self.config_for = lambda root: dataclasses.replace(config_for(root), remote_approvals=True)
        self.store = store
        self.hub = hub
        self.watch = watch
        self.server = AcpServer(self._agent)
        self.agents: set[Any] = set()

    def _agent(self, conn: Any) -> Any:
        """The agent of one connection (the SDK calls this as the socket is accepted, in its task)."""
        from auger.frontends.acp.agent import AugerAgent

        agent = AugerAgent(self.config_for, self.store, editor_terminals=False, editor_files=False,
                           project_dir=self._project_dir, max_mode=self.hub.mode,
                           open_refusal=self.hub.open_refusal, host=self.hub)
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

        principal = scope.get("auger.user")
        if principal is None or not principal.may(ROLE):
            await deny(scope, receive, send, 403, role_refusal(principal, ROLE) if principal else "not signed in")
            return
        agents: list[Any] = []
        token = _CONNECTION.set(agents)
        revoked = self.watch.follow(principal) if self.watch is not None else asyncio.Event()
        serving = asyncio.create_task(handle_asgi_websocket(self.server, scope, receive, send))
        ended = asyncio.create_task(revoked.wait())
        try:
            await asyncio.wait({serving, ended}, return_when=asyncio.FIRST_COMPLETED)
            if not serving.done():  # the user was revoked: the connection ends now
                serving.cancel()
                await asyncio.gather(serving, return_exceptions=True)
                try:
                    await send({"type": "websocket.close", "code": 4401, "reason": "access revoked"})
                except Exception:  # already closed under us
                    pass
            else:
                serving.result()
        finally:
            ended.cancel()
            if self.watch is not None:
                self.watch.forget(revoked)
            _CONNECTION.reset(token)
            for agent in agents:
                self.agents.discard(agent)
                await agent.close()

    async def close(self) -> None:
        for agent in list(self.agents):
            self.agents.discard(agent)
            await agent.close()
        await self.server.close()
