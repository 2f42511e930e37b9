"""Toolsets: where tools come from, with a lifecycle.

A Toolset opens (start a server, connect), lists its tools, runs a call by name, and closes.
The built-in tools are one toolset; an MCP server or a plugin is another. Each behaviour on top
is a small wrapper around another toolset, never a special case elsewhere:

    Prefixed(inner, "gh")           names become gh_<name> (two servers with a `search` tool)
    Filtered(inner, keep)           only the tools `keep` accepts: read_only(...), allow_only(...)
    Combined([a, b, ...])           one catalog from many; a duplicate name is an error

Plan mode needs no wrapper (policy denies its changes and the catalog stays byte-stable); a
read-only sub-agent gets `read_only(toolset)`.

A toolset may also say something in the system prompt: `contributions()` returns Contributions
(an MCP server's `instructions`, a plugin's usage notes). A contribution tied to tools is shown
only while one of them is in the catalog, so a filtered-out source says nothing. A toolset whose
tools can change in place has an int `revision` that moves when they do. A toolset that holds a tool
back until it makes sense (the sub-agent follow-ups before any sub-agent) says why in `not_offered(name)`,
so a model that calls it anyway reads that instead of "there is no tool named …".
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable, Protocol, Sequence

from auger.lazy_dataclass import Deferred, dataclass
from auger.policy.types import Effect
from auger.tools.base import ToolContext, ToolError, ToolResult, ToolSpec


class Toolset(Protocol):
    async def open(self) -> None:
        """Make the tools available; called once before `list_tools`."""

    async def close(self) -> None: ...

    def list_tools(self) -> Sequence[ToolSpec]: ...

    async def call(self, name: str, args: dict, ctx: ToolContext) -> ToolResult:
        """Run one listed tool with validated arguments."""


@dataclass(frozen=True)
class Contribution(Deferred):
    """Text for the system prompt, after the base instructions: grouped by `slot` (in SLOTS order),
    ordered by `priority` (lower first) within one. Shown only while one of `tools` is in the catalog,
    unless `tools` is empty."""

    text: str
    slot: str = "tools"
    priority: int = 100
    tools: frozenset[str] = frozenset()


SLOTS = ("guidance", "tools")  # where contributions go, in prompt order; an unknown slot goes last


def contributions_of(toolset: Toolset) -> Sequence[Contribution]:
    contributions = getattr(toolset, "contributions", None)
    return contributions() if contributions is not None else ()


def why_not_offered(toolset: Toolset, name: str) -> str | None:
    """Why `toolset` holds back a tool of that name it has (None: it has none, or offers it)."""
    not_offered = getattr(toolset, "not_offered", None)
    return not_offered(name) if not_offered is not None else None


def render_contributions(base: str, contributions: Iterable[Contribution], tools: frozenset[str]) -> str:
    """The system prompt: the base instructions, then each shown contribution; deterministic, so an
    unchanged catalog renders the same bytes."""
    shown = [c for c in contributions if c.text and (not c.tools or c.tools & tools)]
    rank = {slot: i for i, slot in enumerate(SLOTS)}
    shown.sort(key=lambda c: (rank.get(c.slot, len(SLOTS)), c.slot, c.priority))  # stable: source order
    return "\n\n".join([base, *(c.text for c in shown)]) if shown else base


class StaticToolset:
    """Tools defined in-process (the built-ins): nothing to open or close."""

    def __init__(self, specs: Iterable[ToolSpec]) -> None:
        self._specs = {spec.name: spec for spec in specs}

    async def open(self) -> None:
        pass

    async def close(self) -> None:
        pass

    def list_tools(self) -> Sequence[ToolSpec]:
        return list(self._specs.values())

    async def call(self, name: str, args: dict, ctx: ToolContext) -> ToolResult:
        spec = self._specs.get(name)
        if spec is None:
            raise ToolError(f"there is no tool named {name!r}")
        return await spec.handler(args, ctx)


class _Wrapper:
    """Delegates the lifecycle to the wrapped toolset."""

    def __init__(self, inner: Toolset) -> None:
        self.inner = inner

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()


class Prefixed(_Wrapper):
    def __init__(self, inner: Toolset, prefix: str) -> None:
        super().__init__(inner)
        self.prefix = f"{prefix}_"

    def list_tools(self) -> Sequence[ToolSpec]:
        return [dataclasses.replace(spec, name=self.prefix + spec.name) for spec in self.inner.list_tools()]

    async def call(self, name: str, args: dict, ctx: ToolContext) -> ToolResult:
        if not name.startswith(self.prefix):
            raise ToolError(f"there is no tool named {name!r}")
        return await self.inner.call(name[len(self.prefix):], args, ctx)


class Filtered(_Wrapper):
    def __init__(self, inner: Toolset, keep: Callable[[ToolSpec], bool]) -> None:
        super().__init__(inner)
        self.keep = keep

    def list_tools(self) -> Sequence[ToolSpec]:
        return [spec for spec in self.inner.list_tools() if self.keep(spec)]

    async def call(self, name: str, args: dict, ctx: ToolContext) -> ToolResult:
        if name not in {spec.name for spec in self.list_tools()}:  # a hidden tool cannot be called by name
            raise ToolError(f"there is no tool named {name!r}")
        return await self.inner.call(name, args, ctx)


def read_only(inner: Toolset) -> Filtered:
    """Only tools that change nothing whatever their arguments (shell, classified per call, is left out)."""
    return Filtered(inner, lambda spec: spec.effect == Effect.READ_ONLY and spec.classifier is None
                    and spec.context_classifier is None)


def allow_only(inner: Toolset, names: Iterable[str]) -> Filtered:
    allowed = frozenset(names)
    return Filtered(inner, lambda spec: spec.name in allowed)


class Combined:
    def __init__(self, toolsets: Sequence[Toolset]) -> None:
        self.toolsets = list(toolsets)
        self._owner: dict[str, Toolset] = {}

    async def open(self) -> None:
        opened: list[Toolset] = []
        try:
            for toolset in self.toolsets:
                await toolset.open()
                opened.append(toolset)
        except BaseException:
            for toolset in reversed(opened):
                await toolset.close()
            raise
        self._owner = {}
        for toolset in self.toolsets:
            for spec in toolset.list_tools():
                if spec.name in self._owner:
                    await self.close()
                    raise ValueError(f"duplicate tool name {spec.name!r}")
                self._owner[spec.name] = toolset

    async def close(self) -> None:
        for toolset in reversed(self.toolsets):
            await toolset.close()

    def list_tools(self) -> Sequence[ToolSpec]:
        return [spec for toolset in self.toolsets for spec in toolset.list_tools()]

    async def call(self, name: str, args: dict, ctx: ToolContext) -> ToolResult:
        owner = self._owner.get(name)
        if owner is None:
            raise ToolError(f"there is no tool named {name!r}")
        return await owner.call(name, args, ctx)


def builtin_toolset(*, with_skills: bool = False, with_memory: bool = False, with_exec_sessions: bool = False,
                    with_code_mode: bool = False) -> StaticToolset:
    """The built-in tools; `skill` only where there are skills to load (it would be noise otherwise),
    `remember` only where the user turned the memory file on (`memory = true`), `exec_command` and
    `write_stdin` only with `exec_sessions = true` and `run_code` only with `code_mode = true` (every schema
    rides on every request: the default catalog stays small). `apply_patch` is among them; a session whose
    model does not expect it leaves it out (`for_model`)."""
    from auger.tools import files, patch, plan, recall, search, shell, skills

    tools = [*shell.TOOLS, *files.TOOLS, *patch.TOOLS, *search.TOOLS, *recall.TOOLS, *plan.TOOLS,
             *(skills.TOOLS if with_skills else ())]
    if with_exec_sessions:
        from auger.tools import exec_command

        tools[1:1] = exec_command.TOOLS  # beside shell
    if with_code_mode:
        from auger.tools import code_mode

        tools += code_mode.TOOLS
    if with_memory:  # its module (and the memory file's) only where the user turned it on
        from auger.tools import memory

        tools += memory.TOOLS
    return StaticToolset(tools)


def for_model(inner: Toolset, family: str) -> Toolset:
    """The catalog a model of `family` is offered: `apply_patch` only to the OpenAI family, which is
    trained on its envelope; other models edit with edit_file and would only be confused by it."""
    from auger.tools.patch import NAME

    if family == "openai":
        return inner
    return Filtered(inner, lambda spec: spec.name != NAME)
