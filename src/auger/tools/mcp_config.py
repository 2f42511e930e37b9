"""MCP server definitions: read from `[mcp_servers.NAME]` tables, checked, never trusted blindly.

Kept apart from tools/mcp.py so that reading the configuration (every session does) never imports
the `mcp` SDK: a session with no MCP server must not pay for it.

    [mcp_servers.files]                      # a stdio server auger starts
    command = "npx"
    args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
    env = { LOG_LEVEL = "warn" }
    cwd = "."                                # relative to the project root
    trusted = false                          # true (user config only): run outside the session's
                                             # sandbox, its tools' annotations believed
    startup_timeout = 10                     # seconds to connect and list tools
    tool_timeout = 120                       # seconds per call

    [mcp_servers.tracker]                    # a streamable-HTTP (or SSE, `transport = "sse"`) server
    url = "https://mcp.example.com/mcp"
    headers = { X-Team = "core" }
    bearer_token_env = "TRACKER_TOKEN"       # sent as `Authorization: Bearer $TRACKER_TOKEN`
    enabled = true
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
STARTUP_TIMEOUT = 10.0
TOOL_TIMEOUT = 120.0


@dataclass(frozen=True)
class McpServerConfig:
    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    transport: str = "streamable_http"  # for a url: streamable_http | sse
    headers: dict[str, str] = field(default_factory=dict)
    bearer_token_env: str | None = None
    enabled: bool = True
    trusted: bool = False
    startup_timeout: float = STARTUP_TIMEOUT
    tool_timeout: float = TOOL_TIMEOUT
    source: str = "user"  # user | project | session

    @property
    def runs_trusted(self) -> bool:
        """Whether the server is taken at its word and run outside the sandbox. Only the user's own config
        can trust a server: a project's table, or one a client adds to a session, saying `trusted = true`
        is not believed."""
        return self.trusted and self.source == "user"

    @property
    def kind(self) -> str:
        return "stdio" if self.command else self.transport

    def describe(self) -> str:
        if self.command:
            return " ".join([self.command, *self.args])
        return f"{self.url} ({self.transport})"


_STR_KEYS = {"command", "cwd", "url", "bearer_token_env", "transport"}
_BOOL_KEYS = {"enabled", "trusted"}
_NUM_KEYS = {"startup_timeout", "tool_timeout"}
_TABLE_KEYS = {"env", "headers"}


def parse_server(name: str, raw: Any, source: str = "user") -> McpServerConfig:
    """One server's table, checked; raises ValueError with a one-line message saying what is wrong."""
    where = f"[mcp_servers.{name}]"
    if not NAME.match(name):
        raise ValueError(f"{where}: a server name may use only letters, digits, '_' and '-' (at most 40)")
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected a table")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key in _STR_KEYS and isinstance(value, str):
            values[key] = value
        elif key == "args" and isinstance(value, list) and all(isinstance(v, str) for v in value):
            values[key] = tuple(value)
        elif key in _TABLE_KEYS and isinstance(value, dict) and all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            values[key] = dict(value)
        elif key in _BOOL_KEYS and isinstance(value, bool):
            values[key] = value
        elif key in _NUM_KEYS and isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            values[key] = float(value)
        else:
            known = sorted(_STR_KEYS | _BOOL_KEYS | _NUM_KEYS | _TABLE_KEYS | {"args"})
            raise ValueError(f"{where}: bad or unknown key {key!r} (keys: {', '.join(known)})")
    if bool(values.get("command")) == bool(values.get("url")):
        raise ValueError(f"{where}: give either `command` (a stdio server) or `url` (an HTTP server)")
    if values.get("url"):
        from auger.config import valid_base_url

        if not valid_base_url(values["url"]):
            raise ValueError(f"{where}: `url` must be an http:// or https:// URL")
        if values.get("transport", "streamable_http") not in ("streamable_http", "sse"):
            raise ValueError(f"{where}: `transport` must be streamable_http or sse")
    return McpServerConfig(name=name, source=source, **values)


def configured_servers(tables: dict, *, trust_project: bool) -> tuple[list[McpServerConfig], list[str]]:
    """The enabled servers to start, and warnings: bad tables, and a project's servers that are
    listed but not started unless the user set `trust_project_mcp = true` (and never one that names a
    `bearer_token_env`: the user's credential would go to a host the repository chose)."""
    servers: dict[str, McpServerConfig] = {}
    warnings: list[str] = []
    for key, source in (("mcp_servers", "user"), ("project_mcp_servers", "project")):
        table = tables.get(key) or {}
        if not isinstance(table, dict):
            warnings.append(f"[{key}] must be a table of server tables (ignored)")
            continue
        for name, raw in table.items():
            try:
                server = parse_server(name, raw, source)
            except ValueError as exc:
                warnings.append(f"{exc} (server not started)")
                continue
            if source == "project" and not trust_project:
                warnings.append(f"the project's MCP server {name!r} ({server.describe()}) was not started: "
                                "set trust_project_mcp = true in your user config to allow project servers")
                continue
            if source == "project" and server.bearer_token_env:  # a repository never picks which secret goes where
                warnings.append(f"the project's MCP server {name!r} ({server.describe()}) was not started: a "
                                f"project may not send your {server.bearer_token_env} to a server it names; "
                                "define the server in your user config")
                continue
            if server.enabled:
                servers[name] = server
    return list(servers.values()), warnings
