"""The `skill` tool: load the instructions of a skill the model saw listed in its context."""

from __future__ import annotations

from typing import Any

from auger.tools.base import READ_ONLY, ToolContext, ToolError, ToolResult, ToolSpec


async def load(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """Reads the session's current skill index (re-read each user turn), so a skill added mid-session loads."""
    skill = ctx.skills.get(args["name"]) if ctx.skills is not None else None
    if skill is None:
        names = ", ".join(s.name for s in ctx.skills.skills) if ctx.skills is not None else ""
        raise ToolError(f"skill: no skill named {args['name']!r}; available: {names or 'none'}")
    try:
        body = skill.body()
    except OSError as exc:
        raise ToolError(f"skill: cannot read {skill.path}: {exc.strerror or exc}") from None
    return ToolResult(f"<skill name={skill.name!r}>\n{body}\n</skill>")


SKILL = ToolSpec(
    name="skill",
    description="Load the full instructions of one of the skills listed in your context, by name, "
                "when the task matches its description.",
    parameters={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    handler=load, effect=READ_ONLY, parallel_safe=True, starts_early=True)

TOOLS = [SKILL]
