"""The code-intelligence tools: `code_nav` (definitions, references, types, symbols, rename previews) and
`repo_map` (a ranked outline of the project within a token budget).

Only the specs live here, terse because every schema rides on every request; what they do is lsp/'s,
reached through the `CodeIntel` the session gives (engine/session/code_intel.py), which loads lsp/ at the first
call. Both only read: allowed in plan mode, and parallel-safe.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

from auger.tools.base import READ_ONLY, ToolContext, ToolResult, ToolSpec
from auger.tools.toolset import StaticToolset

SOURCE = "code intelligence"  # its name in a session's tool registry: no MCP server can be named so
CODE_NAV, REPO_MAP = "code_nav", "repo_map"
OPS = ("definition", "references", "hover", "symbols", "workspace_symbols", "rename")


class CodeIntel(Protocol):
    async def code_nav(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult: ...

    async def repo_map(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult: ...


def code_intel_toolset(intel: Callable[[], CodeIntel], *, nav: bool, repo_map: bool) -> StaticToolset:
    """The tools the session offers (`code_nav = true`, `repo_map` not "off"), bound to its CodeIntel."""

    async def navigate(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return await intel().code_nav(args, ctx)

    async def outline(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return await intel().repo_map(args, ctx)

    specs = []
    if nav:
        specs.append(ToolSpec(
            CODE_NAV, "Navigate code with the language server (by name without one): definition, references, "
                      "hover (type, docs), symbols (file outline), workspace_symbols (search), rename (preview "
                      "patch for apply_patch). Target: path+line(+column), or symbol (name).",
            {"type": "object", "properties": {
                "op": {"type": "string", "enum": list(OPS)}, "path": {"type": "string"},
                "line": {"type": "integer", "minimum": 1}, "column": {"type": "integer", "minimum": 1},
                "symbol": {"type": "string"}, "new_name": {"type": "string"}},
             "required": ["op"]},
            navigate, READ_ONLY, parallel_safe=True))
    if repo_map:
        specs.append(ToolSpec(
            REPO_MAP, "Ranked outline of the project's files and most used definitions within `budget` tokens "
                      "(default 1024); `focus`: paths or names to center on.",
            {"type": "object", "properties": {"budget": {"type": "integer", "minimum": 64},
                                              "focus": {"type": ["string", "array"], "items": {"type": "string"}}}},
            outline, READ_ONLY, parallel_safe=True))
    return StaticToolset(specs)
