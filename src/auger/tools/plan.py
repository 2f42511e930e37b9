"""The `update_plan` tool: the model's todo list, shown to the user and kept across compaction."""

from __future__ import annotations

from typing import Any

from auger.protocol.events import PlanStep, PlanUpdated
from auger.tools.base import READ_ONLY, ToolContext, ToolError, ToolResult, ToolSpec

STATUSES = ["pending", "in_progress", "completed"]
_MARKS = {"completed": "[x]", "in_progress": "[>]", "pending": "[ ]"}


def render_plan(plan: list[dict]) -> str:
    return "\n".join(f"{_MARKS.get(str(s.get('status')), '[ ]')} {s.get('step', '')}" for s in plan)


async def _update_plan(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    plan = [{"step": entry["step"].strip(), "status": entry["status"]} for entry in args["plan"]]
    if any(not entry["step"] for entry in plan):
        raise ToolError("update_plan: every step needs a non-empty 'step' text")
    if sum(entry["status"] == "in_progress" for entry in plan) > 1:
        raise ToolError("update_plan: at most one step can be in_progress at a time")
    ctx.state.plan = plan
    done = sum(entry["status"] == "completed" for entry in plan)
    return ToolResult(f"Plan updated ({done}/{len(plan)} done):\n{render_plan(plan)}",
                      events=[PlanUpdated(ctx.turn_id, [PlanStep(e["step"], e["status"]) for e in plan],
                                          args.get("explanation"))])


UPDATE_PLAN = ToolSpec(
    name="update_plan",
    description=("Record your plan for a multi-step task: a short list of steps, each pending, in_progress "
                 "(one at most) or completed. Send the whole list each time; the user sees it and it survives "
                 "compaction."),
    parameters={
        "type": "object",
        "properties": {
            "explanation": {"type": "string", "description": "Why the plan changed (optional)."},
            "plan": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"step": {"type": "string"}, "status": {"type": "string", "enum": STATUSES}},
                    "required": ["step", "status"],
                },
            },
        },
        "required": ["plan"],
    },
    handler=_update_plan,
    effect=READ_ONLY,  # changes nothing outside the conversation
    parallel_safe=False,
)

TOOLS = [UPDATE_PLAN]
