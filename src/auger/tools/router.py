"""The tool router: one session's catalog, which can change while the session runs.

Tools come from three places: the base toolset (built-ins and plugins, fixed when the session opens),
the session's registry of dynamic toolsets (MCP servers: configured ones, and ones added at run time),
and an overlay a session may set (extra toolsets and prompt contributions, optionally hiding the base).

What the model sees — the tool schemas and the system prompt with each source's contributions — is
the cached prompt prefix, so it must stay byte-identical while nothing changes, and rebuilding it on
every request must cost nothing. The router renders it once per catalog key

    (base tools included, overlay revision, registry generation, plugin revision, base instructions)

and renders again only when a part of the key changes (`rebuilds` counts renders). Changes made
while a turn runs (a server added, a server's tool list changed) take effect at the next model call:
the turn calls `refresh()` before each request. The tool runtime asks the router; turns never look
tools up themselves.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Sequence

from auger.models.base import ToolSchema
from auger.tools.base import ToolContext, ToolError, ToolResult, ToolSpec
from auger.tools.toolset import Contribution, Toolset, contributions_of, render_contributions, why_not_offered

log = logging.getLogger("auger.tools")


@dataclass
class Overlay:
    """A session's extra toolsets and prompt contributions; `include_base=False` hides the base tools."""

    toolsets: Sequence[Toolset] = ()
    contributions: Sequence[Contribution] = ()
    include_base: bool = True


class ToolRegistry:
    """The session's dynamic toolsets by name; `generation` moves whenever what they offer changes."""

    def __init__(self) -> None:
        self._members: dict[str, Toolset] = {}
        self.generation = 0

    def __contains__(self, name: str) -> bool:
        return name in self._members

    def get(self, name: str) -> Toolset | None:
        return self._members.get(name)

    @property
    def names(self) -> list[str]:
        return list(self._members)

    @property
    def members(self) -> list[Toolset]:
        return list(self._members.values())

    async def add(self, name: str, toolset: Toolset) -> None:
        """Open a toolset and make its tools part of the catalog (a toolset reports its own start-up
        problems; an exception here is a bug and propagates)."""
        if name in self._members:
            raise ValueError(f"a tool source named {name!r} is already present")
        await toolset.open()
        self._members[name] = toolset
        self.generation += 1

    async def remove(self, name: str) -> bool:
        toolset = self._members.pop(name, None)
        if toolset is None:
            return False
        self.generation += 1
        await toolset.close()
        return True

    async def refresh(self) -> None:
        """Let members that were told their tools changed list them again; a change moves the generation."""
        for toolset in self.members:
            refresh = getattr(toolset, "refresh", None)
            if refresh is not None and await refresh():
                self.generation += 1

    async def close(self) -> None:
        for name in reversed(self.names):
            await self.remove(name)


@dataclass(frozen=True)
class Catalog:
    """One rendering of the catalog: what the model is sent, and who owns each tool."""

    key: tuple
    schemas: tuple[ToolSchema, ...]
    system_prompt: str
    specs: Mapping[str, ToolSpec]
    owners: Mapping[str, Toolset] = field(repr=False)


class ToolRouter:
    def __init__(self, base: Toolset, registry: ToolRegistry | None = None) -> None:
        """Use `ToolRouter.open`: the base toolset must be open before its tools are listed."""
        self._base = base
        self.registry = registry or ToolRegistry()
        self._overlay = Overlay()
        self._overlay_revision = 0
        self._catalog: Catalog | None = None
        self.rebuilds = 0  # renders of the catalog; stays put across requests while nothing changes
        self.catalog("")  # a duplicate among the base tools is a bug: fail at open, not at the first request

    @classmethod
    async def open(cls, toolset: Toolset, registry: ToolRegistry | None = None) -> ToolRouter:
        await toolset.open()
        try:
            return cls(toolset, registry)
        except BaseException:
            await toolset.close()
            raise

    async def close(self) -> None:
        await self.registry.close()
        await self._base.close()

    # -- what the model sees --------------------------------------------------------
    def set_overlay(self, overlay: Overlay) -> None:
        """Replace the session's overlay (its toolsets must be open); takes effect at the next request."""
        self._overlay = overlay
        self._overlay_revision += 1

    async def refresh(self) -> None:
        """Apply tool-list changes the registry's members were told about (before each model call)."""
        await self.registry.refresh()

    def _key(self, base_instructions: str) -> tuple:
        plugin_revision = getattr(self._base, "revision", 0)
        return (self._overlay.include_base, self._overlay_revision, self.registry.generation, plugin_revision,
                base_instructions)

    def catalog(self, base_instructions: str) -> Catalog:
        """The current catalog for a system prompt starting with `base_instructions`; rendered again only
        when its key changed, so an unchanged catalog is the very same bytes."""
        key = self._key(base_instructions)
        if self._catalog is not None and self._catalog.key == key:
            return self._catalog
        sources = [*([self._base] if self._overlay.include_base else []), *self.registry.members,
                   *self._overlay.toolsets]
        specs: dict[str, ToolSpec] = {}
        owners: dict[str, Toolset] = {}
        contributions: list[Contribution] = list(self._overlay.contributions)
        for source in sources:
            for spec in source.list_tools():
                if spec.name in specs:
                    if source is self._base:
                        raise ValueError(f"duplicate tool name {spec.name!r}")
                    log.warning("tool %r is offered twice; the first source keeps it", spec.name)
                    continue
                specs[spec.name] = spec
                owners[spec.name] = source
            contributions.extend(contributions_of(source))
        prompt = render_contributions(base_instructions, contributions, frozenset(specs))
        self._catalog = Catalog(key, tuple(ToolSchema(s.name, s.description, s.parameters) for s in specs.values()),
                                prompt, MappingProxyType(specs), MappingProxyType(owners))
        self.rebuilds += 1
        return self._catalog

    @property
    def _current(self) -> Catalog:
        return self._catalog if self._catalog is not None else self.catalog("")

    @property
    def schemas(self) -> tuple[ToolSchema, ...]:
        """The schemas of the catalog last rendered (the one the model was last sent)."""
        return self._current.schemas

    # -- routing calls --------------------------------------------------------------
    def get(self, name: str) -> ToolSpec | None:
        return self._current.specs.get(name)

    def not_offered(self, name: str) -> str | None:
        """Why a tool that is not in the catalog is held back by a source that has it (None: no source has it)."""
        sources = [*([self._base] if self._overlay.include_base else []), *self.registry.members,
                   *self._overlay.toolsets]
        return next((why for why in (why_not_offered(source, name) for source in sources) if why), None)

    @property
    def names(self) -> list[str]:
        return list(self._current.specs)

    def parallel_safe(self, name: str) -> bool:
        """Whether calls of this tool may run concurrently with other parallel-safe calls."""
        spec = self._current.specs.get(name)
        return spec is not None and spec.parallel_safe

    async def call(self, spec: ToolSpec, args: dict, ctx: ToolContext) -> ToolResult:
        owner = self._current.owners.get(spec.name)
        if owner is None:
            raise ToolError(f"there is no tool named {spec.name!r}")
        return await owner.call(spec.name, args, ctx)
