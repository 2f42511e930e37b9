"""The `remember` tool: the model proposes a note for the project's memory file, `.auger/memory.md`.

Offered only when the user's config says `memory = true`. The file is an ordinary file in the project
(listed by `/memory`, read as part of the instructions at the next user turn, edited or deleted by the
user like any other), so nothing is remembered where the user cannot see it. A note is something the
agent will follow in every later session, so the call always asks the user (`Classification.asks`),
with the added line as its diff, whatever the mode would allow for a file change; a headless run
refuses it unless told to approve everything. The write goes beneath the session's root handle, so in
pending mode the note is queued like any other change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from auger.context.memory import MEMORY_PATH, NoteRefused, append_line
from auger.policy.types import Classification
from auger.tools.base import LOCAL_MUTATION, ToolContext, ToolError, ToolResult, ToolSpec
from auger.tools.files import root_handle
from auger.tools.threads import in_thread

ASKS = "a note the agent would follow in every later session: the user decides what is remembered"


def _classify(args: dict[str, Any], root: Path) -> Classification:
    return Classification(LOCAL_MUTATION, MEMORY_PATH, asks=ASKS)


def _note(args: dict[str, Any]) -> str:
    """The note as one list item of the memory file."""
    text = " ".join(args["text"].split())
    if not text:
        raise ToolError("remember: the note is empty")
    return f"- {text}"


async def _preview(args: dict[str, Any], ctx: ToolContext) -> str:
    try:
        return await in_thread(append_line, root_handle(ctx), MEMORY_PATH, _note(args), write=False)
    except (NoteRefused, ToolError):
        return ""  # the call itself says why


async def _remember(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    try:
        diff = await in_thread(append_line, root_handle(ctx), MEMORY_PATH, _note(args))
    except NoteRefused as exc:
        raise ToolError(f"remember: {exc}") from None
    return ToolResult(f"Added to {MEMORY_PATH}; it is part of your instructions from the next user turn on.",
                      metadata={"diff": diff})


REMEMBER = ToolSpec(
    name="remember",
    description=(f"Propose a note for this project's memory file ({MEMORY_PATH}), which is part of your "
                 "instructions in every later session: a fact about the project, a command that works, a "
                 "preference the user stated. One short line; the user approves each note. Do not store "
                 "secrets or anything that only matters for the current task."),
    parameters={
        "type": "object",
        "properties": {"text": {"type": "string", "description": "The note: one line."}},
        "required": ["text"],
    },
    handler=_remember,
    effect=LOCAL_MUTATION,
    classifier=_classify,
    previewer=_preview,
)

TOOLS = [REMEMBER]
