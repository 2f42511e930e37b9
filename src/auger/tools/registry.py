"""The tool catalog an Agent offers: an immutable name → spec map, built once and shared by sessions."""

from __future__ import annotations

from types import MappingProxyType
from typing import Iterable, Mapping

from auger.models.base import ToolSchema
from auger.tools.base import ToolSpec


class ToolRegistry:
    def __init__(self, specs: Iterable[ToolSpec]) -> None:
        table: dict[str, ToolSpec] = {}
        for spec in specs:
            if spec.name in table:
                raise ValueError(f"duplicate tool name {spec.name!r}")
            table[spec.name] = spec
        self._specs: Mapping[str, ToolSpec] = MappingProxyType(table)
        self._schemas = tuple(ToolSchema(s.name, s.description, s.parameters) for s in table.values())

    def get(self, name: str) -> ToolSpec | None:
        return self._specs.get(name)

    @property
    def names(self) -> list[str]:
        return list(self._specs)

    @property
    def schemas(self) -> list[ToolSchema]:
        """The catalog sent to the model, built once (it is part of the cached prompt prefix)."""
        return list(self._schemas)


def default_registry(*, with_skills: bool = False) -> ToolRegistry:
    """The built-in tools; `skill` only where there are skills to load (it would be noise otherwise)."""
    from auger.tools import files, plan, recall, search, shell, skills

    return ToolRegistry([*shell.TOOLS, *files.TOOLS, *search.TOOLS, *recall.TOOLS, *plan.TOOLS,
                         *(skills.TOOLS if with_skills else ())])
