"""Which agents exist: the well-known ones, and those the user's `[backends.NAME]` tables define.

    [backends.opencode]          # overrides the built-in entry of that name
    command = "opencode"
    args = ["acp"]
    env = { OPENCODE_CONFIG = "/path/to/opencode.json" }
    enabled = true
    label = "OpenCode"

Never raises: a broken table is reported (name and why) and left out, so a typo in one agent's
table costs that agent, never start-up. Only the user's own config defines agents: a project's
`.auger/config.toml` may not (config.py refuses its `[backends]`), since that would run a command
the repository chose.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from auger.backends.base import BackendSpec

# The agents auger knows how to start, by their documented ACP commands.
KNOWN: tuple[BackendSpec, ...] = (
    BackendSpec("opencode", "opencode", ("acp",), label="OpenCode"),
    BackendSpec("gemini", "gemini", ("--experimental-acp",), label="Gemini CLI"),
    BackendSpec("goose", "goose", ("acp",), label="goose"),
    BackendSpec("claude-code", "claude-code-acp", label="Claude Code (ACP adapter)"),
    BackendSpec("codex", "codex-acp", label="Codex (ACP adapter)"),
)
_KEYS = {"command", "args", "env", "enabled", "label"}


@dataclass
class BackendCatalog:
    specs: dict[str, BackendSpec] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # name -> why its table is unusable


def load_backends(tables: dict[str, Any], source: str = "config") -> BackendCatalog:
    """The known agents, overlaid by the `[backends.NAME]` tables (a partial table amends a known one)."""
    catalog = BackendCatalog({spec.name: spec for spec in KNOWN})
    raw = tables.get("backends", {})
    if not isinstance(raw, dict):
        catalog.errors["backends"] = "[backends] must be a table of tables"
        return catalog
    for name, table in raw.items():
        problem = _check(name, table)
        if problem:
            catalog.errors[name] = problem
            catalog.specs.pop(name, None)
            continue
        base = catalog.specs.get(name)
        command = table.get("command", base.command if base else None)
        if not command:
            catalog.errors[name] = "no command: set command = \"...\""
            continue
        catalog.specs[name] = BackendSpec(
            name, command, tuple(table.get("args", base.args if base else ())),
            dict(table.get("env", base.env if base else {})), bool(table.get("enabled", True)),
            str(table.get("label", base.label if base else "")), source)
    return catalog


def _check(name: str, table: Any) -> str | None:
    if not isinstance(table, dict):
        return "must be a table ([backends.NAME])"
    if not name.replace("-", "").replace("_", "").isalnum():
        return "a backend name uses letters, digits, '-' and '_' only"
    unknown = set(table) - _KEYS
    if unknown:
        return f"unknown key(s) {', '.join(sorted(unknown))} (allowed: {', '.join(sorted(_KEYS))})"
    checks = (("command", lambda v: isinstance(v, str) and v.strip() != "", "a non-empty string"),
              ("args", lambda v: isinstance(v, list) and all(isinstance(a, str) for a in v), "a list of strings"),
              ("env", lambda v: isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str)
                                                           for k, x in v.items()), "a table of strings"),
              ("enabled", lambda v: isinstance(v, bool), "true or false"),
              ("label", lambda v: isinstance(v, str), "a string"))
    for key, ok, expected in checks:
        if key in table and not ok(table[key]):
            return f"'{key}' must be {expected}, got {table[key]!r}"
    return None
