"""The tool router: one session's catalog, fixed when the session opens.

It opens the session's toolset, renders the schemas the model sees once (they are part of the
cached prompt prefix, so they must stay byte-stable for the whole session), says which tools may
run in parallel, and sends each call to the toolset that owns it. The tool runtime asks it; turns
never look tools up themselves.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from auger.models.base import ToolSchema
from auger.tools.base import ToolContext, ToolResult, ToolSpec
from auger.tools.toolset import Toolset


class ToolRouter:
    def __init__(self, toolset: Toolset) -> None:
        """Use `ToolRouter.open`: the toolset must be open before its tools are listed."""
        self._toolset = toolset
        table: dict[str, ToolSpec] = {}
        for spec in toolset.list_tools():
            if spec.name in table:
                raise ValueError(f"duplicate tool name {spec.name!r}")
            table[spec.name] = spec
        self._specs: Mapping[str, ToolSpec] = MappingProxyType(table)
        self.schemas: tuple[ToolSchema, ...] = tuple(ToolSchema(s.name, s.description, s.parameters)
                                                     for s in table.values())

    @classmethod
    async def open(cls, toolset: Toolset) -> ToolRouter:
        await toolset.open()
        try:
            return cls(toolset)
        except BaseException:
            await toolset.close()
            raise

    async def close(self) -> None:
        await self._toolset.close()

    def get(self, name: str) -> ToolSpec | None:
        return self._specs.get(name)

    @property
    def names(self) -> list[str]:
        return list(self._specs)

    def parallel_safe(self, name: str) -> bool:
        """Whether calls of this tool may run concurrently with other parallel-safe calls."""
        spec = self._specs.get(name)
        return spec is not None and spec.parallel_safe

    async def call(self, spec: ToolSpec, args: dict, ctx: ToolContext) -> ToolResult:
        return await self._toolset.call(spec.name, args, ctx)
