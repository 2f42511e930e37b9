"""A session's MCP servers: the configured ones started together at open, others added or removed
while it runs. Each is a member of the session's tool registry (tools/router.py), so a change is
offered from the next model call. tools/mcp.py (and with it the SDK) is imported only when there is
a server to start; without the `mcp` extra no server starts, and the session goes on without them.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from auger.lazy_dataclass import Deferred, dataclass
from auger.tools.base import CommandSandbox, ToolContext, ToolError, ToolResult, ToolSpec
from auger.tools.router import ToolRegistry

if TYPE_CHECKING:
    from auger.tools.mcp import Elicit, McpToolset
    from auger.tools.mcp_config import McpServerConfig

@dataclass(frozen=True)
class ServerStatus(Deferred):
    name: str
    kind: str  # stdio | streamable_http | sse
    target: str  # its command line or URL
    connected: bool
    tools: int
    source: str  # user | project | session


PROMPT_PREFIX = "/mcp__"  # what a slash command naming an MCP server's prompt starts with
RESOURCES = "mcp resources"  # its registry name: no server can be named so (tools/mcp_config.NAME)


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
        if not servers:
            return
        absent = not_started([server.name for server in servers])
        if absent is not None:
            self.warn(absent)
            return
        await self._offer_resources()
        await asyncio.gather(*(self._add(server) for server in servers))

    async def add(self, name: str, table: dict) -> str | None:
        """Add a server from one config table; None, or why it was refused (one line)."""
        if name in self.registry:
            return f"an MCP server named {name!r} is already running in this session"
        from auger.tools.mcp_config import parse_server

        try:
            server = parse_server(name, table, source="session")
        except ValueError as exc:
            return str(exc)
        absent = not_started([name])
        if absent is not None:
            return absent
        await self._offer_resources()
        await self._add(server)
        return None

    async def reconfine(self) -> None:
        """The session's mode changed: each server the sandbox holds is confined as the new mode says
        (a writable one is stopped at once when the mode gets stricter; see McpToolset.reconfine)."""
        await asyncio.gather(*(server.reconfine() for server in self._servers()))

    async def remove(self, name: str) -> str | None:
        return None if await self.registry.remove(name) else f"no MCP server named {name!r} in this session"

    def status(self) -> list[ServerStatus]:
        """Each server of this session as a client shows it (`/mcp`): what it is and whether it is up."""
        return [ServerStatus(t.server.name, t.server.kind, t.server.describe(), t.connected, len(t.list_tools()),
                             t.server.source)
                for t in self._servers()]

    def _servers(self) -> list[McpToolset]:
        if "auger.tools.mcp" not in sys.modules:  # never loaded: this process never had a server
            return []
        from auger.tools.mcp import McpToolset

        return [t for t in self.registry.members if isinstance(t, McpToolset)]

    async def _offer_resources(self) -> None:
        """The resource tools, one pair for all servers, listed only while a server has resources."""
        if RESOURCES not in self.registry:
            await self.registry.add(RESOURCES, _ResourceTools(self.registry))

    async def _add(self, server: McpServerConfig) -> None:
        from auger.tools.mcp import McpToolset

        toolset = McpToolset(server, root=self.root, warn=self.warn, sandbox=self.sandbox,
                             elicit=self._ask)
        await self.registry.add(server.name, toolset)

    async def _ask(self, server: str, message: str, schema: dict) -> tuple[str, str | None]:
        return ("decline", None) if self.elicit is None else await self.elicit(server, message, schema)


def without_sdk() -> str | None:
    """Why no MCP server can start here, when the `mcp` extra is not installed (None: it is)."""
    from auger.extras import missing, needs

    module = missing("mcp")
    return None if module is None else needs("mcp", "MCP", module)


def not_started(names: list[str]) -> str | None:
    """The warning for servers that cannot start without the `mcp` extra (None: they can)."""
    why = without_sdk()
    listed = ", ".join(repr(name) for name in names)
    return None if why is None else f"MCP server{'s' if len(names) > 1 else ''} {listed} not started: {why}"


def prompt_commands(registry: ToolRegistry) -> list[tuple[str, str]]:
    """(slash-command name, description) of every prompt the session's servers offer, for completion."""
    return [(name, _one_line(prompt.description or prompt.title or "MCP prompt"))
            for server in _prompt_servers(registry) for name, prompt in sorted(server.prompts.items())]


async def expand_prompt(registry: ToolRegistry, text: str) -> str | None:
    """`/mcp__<server>__<prompt> args…` as the text the server's prompt gives (prompts/get); None when
    `text` names no MCP prompt. Raises PromptError (one line) for arguments the prompt does not take, or
    a server that failed.

    Arguments are words split like a shell would; `name=value` sets a named argument, other words
    fill the prompt's arguments in their declared order."""
    import shlex

    if not text.startswith(PROMPT_PREFIX):
        return None
    command, _, rest = text[1:].partition(" ")
    command = command.strip()
    server = next((server for server in _prompt_servers(registry) if command in server.prompts), None)
    if server is None:
        return None
    prompt = server.prompts[command]
    declared = [a.name for a in prompt.arguments or []]
    try:
        words = shlex.split(rest)
    except ValueError:  # an unbalanced quote: the user meant words
        words = rest.split()
    arguments: dict[str, str] = {}
    positional = []
    for word in words:
        key, sep, value = word.partition("=")
        if sep and key in declared:
            arguments[key] = value
        else:
            positional.append(word)
    free = [name for name in declared if name not in arguments]
    if len(positional) > len(free):
        if not free:
            raise PromptError(f"/{command} takes no further arguments (usage: /{command} {_usage(prompt)})")
        positional[len(free) - 1:] = [" ".join(positional[len(free) - 1:])]  # the rest is the last one's
    arguments.update(zip(free, positional, strict=False))  # fewer words: the rest unset
    missing = [a.name for a in prompt.arguments or [] if a.required and a.name not in arguments]
    if missing:
        raise PromptError(f"/{command} needs {', '.join(missing)} (usage: /{command} {_usage(prompt)})")
    result = await server.get_prompt(prompt.name, arguments)
    if not result.ok:
        raise PromptError(f"/{command}: {result.output}")
    return result.output


def _prompt_servers(registry: ToolRegistry) -> list[McpToolset]:
    return [t for t in registry.members if hasattr(t, "get_prompt")]  # type: ignore[misc]


class PromptError(Exception):
    """An MCP prompt could not be used as typed; the message says why, in one line."""


def _usage(prompt: Any) -> str:
    return " ".join(f"<{a.name}>" if a.required else f"[{a.name}]" for a in prompt.arguments or []) or ""


def _one_line(text: str) -> str:
    return " ".join(text.split())[:200]


class _ResourceTools:
    """`list_mcp_resources` / `list_mcp_resource_templates` / `read_mcp_resource` over the registry's servers
    that have resources or resource templates."""

    def __init__(self, registry: ToolRegistry) -> None:
        from auger.tools.mcp import resource_tools

        self.registry = registry
        self._specs = {spec.name: spec for spec in resource_tools(self._servers)}

    def _servers(self) -> list[McpToolset]:
        return [t for t in self.registry.members if getattr(t, "has_resources", False)]  # type: ignore[misc]

    async def open(self) -> None:
        pass

    async def close(self) -> None:
        pass

    def list_tools(self) -> Sequence[ToolSpec]:
        return list(self._specs.values()) if self._servers() else []

    async def call(self, name: str, args: dict, ctx: ToolContext) -> ToolResult:
        spec = self._specs.get(name)
        if spec is None:
            raise ToolError(f"there is no tool named {name!r}")
        return await spec.handler(args, ctx)
