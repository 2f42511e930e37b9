"""Compaction: replace a long conversation by what the model needs to carry on.

What users lose most in compacted sessions is their own words and the task state, so
the new context is built from what must not be paraphrased away: the recorded
instructions and environment, the user's own messages (newest first, within a
budget, kept verbatim), the model's hand-off summary, and the current plan. Nothing
is deleted from the store; `recall` still finds the archived items.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from auger.engine.history import normalise, to_prompt
from auger.engine.tokens import estimate_request, estimate_text
from auger.models.base import ContextWindowExceeded, ModelRequest
from auger.protocol import events as ev
from auger.protocol.items import Compaction, ContextMessage, Item, UserMessage

if TYPE_CHECKING:
    from auger.engine.turn import Turn

SUMMARY_PROMPT = """\
The conversation is about to be compacted: everything above will be replaced by your summary, the \
user's own messages and the current plan. Write a hand-off summary for yourself so you can continue \
the task without the transcript. Include:
- the user's goal, and every requirement, preference and correction they gave (quote exact values);
- what has been done: files created or changed (paths), commands run and their results;
- the current state: what works, what fails and the exact errors, where you stopped;
- what remains to do next, and any decision or discovery you must not lose.
Be specific and concise. Do not call tools. Reply with the summary only."""

MAX_TRIM_ROUNDS = 6
USER_BUDGET_SHARE = 0.2  # of the context window, for the user's own messages
USER_BUDGET_CAP = 20_000  # tokens


@dataclass
class Kept:
    messages: list[str]
    dropped: int


def keep_user_messages(messages: list[str], budget_tokens: int) -> Kept:
    """The newest messages that fit the budget, oldest first; the newest is cut to fit if it alone is too long."""
    kept: list[str] = []
    left = budget_tokens
    for text in reversed(messages):
        cost = estimate_text(text)
        if cost > left:
            if not kept:
                kept.append(text[:max(0, left) * 4] + "\n[... the rest of this message was cut ...]")
            break
        kept.append(text)
        left -= cost
    kept.reverse()
    return Kept(kept, len(messages) - len(kept))


async def compact(turn: Turn, reason: str) -> None:
    """Summarise and record a compaction; raises ModelError when even a trimmed summary request fails."""
    session = turn.session
    view = session.history.view()
    tools = session.agent.tools.schemas
    instructions = session.instructions()
    before = estimate_request(instructions, to_prompt(view, session.output_cap_chars), tools)
    users = [item.text for item in view if isinstance(item, UserMessage)]
    window = session.context_window
    kept = keep_user_messages(users, min(USER_BUDGET_CAP, int(window * USER_BUDGET_SHARE)))
    summary = await _summarise(turn, view, instructions)
    item = Compaction(summary, kept.messages, session.tool_state.plan, archived_items=len(session.history))
    await session.record(turn.id, item)
    after_view = session.history.view()
    after = estimate_request(instructions, to_prompt(after_view, session.output_cap_chars), tools)
    session.mark_context(after)
    session.emit(ev.ContextCompacted(turn.id, reason, before, after, item.archived_items, len(kept.messages),
                                     kept.dropped, summary))


async def _summarise(turn: Turn, view: list[Item], instructions: str) -> str:
    """Ask for the summary; if the request itself overflows, drop the oldest conversation items and retry."""
    session = turn.session
    context = [i for i in view if isinstance(i, ContextMessage) and i.kind in ("instructions", "environment")]
    rest = [i for i in view if i not in context]
    for _ in range(MAX_TRIM_ROUNDS):
        items = to_prompt([*context, *normalise(rest)], session.output_cap_chars) + [UserMessage(SUMMARY_PROMPT)]
        request = ModelRequest(instructions, items, session.agent.tools.schemas)
        try:
            reply = await turn.call_model(request, quiet=True)
        except ContextWindowExceeded:
            if len(rest) <= 1:
                raise
            rest = rest[max(1, len(rest) // 4):]  # the oldest quarter goes; normalise() mends split call blocks
            continue
        text = reply.text.strip()
        return text or "(the model returned an empty summary)"
    raise ContextWindowExceeded("the conversation could not be summarised within the context window, "
                                "even after dropping its oldest items")
