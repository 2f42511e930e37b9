"""The `skill` tool: load the instructions of a skill the model saw listed in its context."""

from __future__ import annotations

from typing import Any

from auger.context.skills import SkillIndex
from auger.tools.base import READ_ONLY, ToolContext, ToolError, ToolResult, ToolSpec


def skill_tool(index: SkillIndex) -> ToolSpec:
    async def load(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        skill = index.get(args["name"])
        if skill is None:
            names = ", ".join(s.name for s in index.skills) or "none"
            raise ToolError(f"skill: no skill named {args['name']!r}; available: {names}")
        try:
            body = skill.body()
        except OSError as exc:
            raise ToolError(f"skill: cannot read {skill.path}: {exc.strerror or exc}") from None
        return ToolResult(f"<skill name={skill.name!r}>\n{body}\n</skill>")

    return ToolSpec(
        name="skill",
        description="Load the full instructions of one of the skills listed in your context, by name, "
                    "when the task matches its description.",
        parameters={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        handler=load, effect=READ_ONLY, parallel_safe=True)
