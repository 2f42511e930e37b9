"""A session's MCP servers: the configured ones started together at open, others added or removed
while it runs. Each is a member of the session's tool registry (tools/router.py), so a change is
offered from the next model call. tools/mcp.py (and with it the SDK) is imported only when there is
a server to start.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Awaitable, Callable

from auger.tools.base import CommandSandbox
from auger.tools.mcp_config import McpServerConfig, parse_server
from auger.tools.router import ToolRegistry

if TYPE_CHECKING:
    from auger.tools.mcp import Elicit


class McpServers:
    def __init__(self, registry: ToolRegistry, *, root: Path, sandbox: CommandSandbox | None,
                 warn: Callable[[str], None]) -> None:
        self.registry = registry
        self.root = root
        self.sandbox = sandbox
        self.warn = warn
        self.elicit: Elicit | None = None  # set once someone can answer (an interactive session)

    async def start(self, servers: list[McpServerConfig]) -> None:
        """Start servers concurrently (each within its own start-up timeout); failures are warnings."""
        await asyncio.gather(*(self._add(server) for server in servers))

    async def add(self, name: str, table: dict) -> str | None:
        """Add a server from one config table; None, or why it was refused (one line)."""
        if name in self.registry:
            return f"an MCP server named {name!r} is already running in this session"
        try:
            server = parse_server(name, table, source="session")
        except ValueError as exc:
            return str(exc)
        await self._add(server)
        return None

    async def remove(self, name: str) -> str | None:
        return None if await self.registry.remove(name) else f"no MCP server named {name!r} in this session"

    async def _add(self, server: McpServerConfig) -> None:
        from auger.tools.mcp import McpToolset

        toolset = McpToolset(server, root=self.root, warn=self.warn, sandbox=self.sandbox,
                             elicit=self._ask)
        await self.registry.add(server.name, toolset)

    async def _ask(self, server: str, message: str, schema: dict) -> str:
        return "decline" if self.elicit is None else await self.elicit(server, message, schema)
