"""Compaction: replace a long conversation by what the model needs to carry on.

What users lose most in compacted sessions is their own words and the task state, so
the new context is built from what must not be paraphrased away: the recorded
instructions and environment, the user's own messages (newest first, within a
budget, kept verbatim), the model's hand-off summary, and the current plan. Nothing
is deleted from the store; `recall` still finds the archived items.
"""

from __future__ import annotations

import json
from typing import Sequence

from auger.engine.turn.host import TurnHost
from auger.engine.turn.history import normalise, to_prompt
from auger.engine.turn.model_call import announce_limits, announce_retries, announce_switch, call_model
from auger.engine.turn.tokens import estimate_request, estimate_text
from auger.engine.turn.turn_context import TurnContext
from auger.lazy_dataclass import Deferred, dataclass
from auger.models.base import ContextWindowExceeded, ModelRequest
from auger.protocol import events as ev
from auger.protocol.items import Compaction, ContextMessage, Item, ToolCall, ToolOutput, UserMessage
from auger.tools.plan import render_plan

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
SUMMARY_ATTEMPTS = 2  # an empty (or call-only) summary is asked for once more, then built from the record
FILE_TOOLS = ("read_file", "write_file", "edit_file")
LAST_ENTRIES = 30  # files and commands listed in a summary built from the record
LAST_ERRORS = 5
RECORD_SUMMARY_NOTE = ("(The model gave no hand-off summary; this one was built from the session record. "
                       "Use `recall` to look up anything it does not cover.)")
USER_BUDGET_SHARE = 0.2  # of the context window, for the user's own messages
USER_BUDGET_CAP = 20_000  # tokens


@dataclass
class Kept(Deferred):
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


async def compact(ctx: TurnContext, host: TurnHost, reason: str) -> None:
    """Summarise and record a compaction; raises ModelError when even a trimmed summary request fails."""
    hooks = ctx.runtime.hooks
    if hooks is not None and hooks.has("before_compact"):  # told, not asked: a hook cannot stop it
        for message in (await hooks.run("before_compact", {"turn_id": ctx.turn_id, "reason": reason})).warnings:
            host.emit(ev.WarningEvent(message, ctx.turn_id))
    view = host.history.view()
    cap = ctx.limits.output_cap_chars
    before = estimate_request(ctx.instructions, to_prompt(view, cap), ctx.tools)
    users = [item.text for item in view if isinstance(item, UserMessage)]
    kept = keep_user_messages(users, min(USER_BUDGET_CAP, int(ctx.limits.window * USER_BUDGET_SHARE)))
    plan = ctx.runtime.state.plan
    summary = await _summarise(ctx, host, view, plan)
    item = Compaction(summary, kept.messages, plan, archived_items=len(host.history))
    await host.record(ctx.turn_id, item)
    after = estimate_request(ctx.instructions, to_prompt(host.history.view(), cap), ctx.tools)
    host.meter.mark(after)
    host.emit(ev.ContextCompacted(ctx.turn_id, reason, before, after, item.archived_items, len(kept.messages),
                                  kept.dropped, summary))


async def _summarise(ctx: TurnContext, host: TurnHost, view: list[Item], plan: list[dict] | None) -> str:
    """The model's hand-off summary, or one built from the record when the model gives none.

    The request keeps the conversation's tool list (so the prompt-cache prefix still matches) but
    forbids calls: a model that answers with a call instead of text would otherwise lose the summary.
    An empty reply is asked once more; a second one falls back to `record_summary`. If the request
    itself overflows, the oldest conversation items are dropped and it is retried. The user's
    `compact_prompt` replaces SUMMARY_PROMPT.
    """
    context = [i for i in view if isinstance(i, ContextMessage) and i.kind in ("instructions", "environment")]
    rest = [i for i in view if i not in context]
    ask = (ctx.workspace.config.compact_prompt or "").strip() or SUMMARY_PROMPT  # the user's, if set
    overflows = empty = 0
    while empty < SUMMARY_ATTEMPTS:
        items = to_prompt([*context, *normalise(rest)], ctx.limits.output_cap_chars) + [UserMessage(ask)]
        request = ModelRequest(ctx.instructions, items, list(ctx.tools), tool_choice="none", effort=ctx.effort,
                               summary=ctx.summary)
        try:
            reply = await call_model(ctx.small_client or ctx.client, request, ctx.retry,
                                     on_retry=announce_retries(host.emit, ctx.turn_id, ctx.retry),
                                     on_limits=announce_limits(host.emit, ctx.turn_id),
                                     on_switch=announce_switch(host.emit, ctx.turn_id))
            await host.charge(ctx.turn_id, reply.model, reply.usage,
                              ctx.info_for(reply.provider, reply.model).cost(reply.usage), "compaction")
            host.emit(host.ledger.report(ctx.turn_id, reply.usage, host.meter.estimate(
                ctx.instructions, ctx.tools, ctx.limits), ctx.limits.window, model=reply.model,
                duration_ms=reply.duration_ms, finish_reason=reply.finish_reason, purpose="compaction"))
        except ContextWindowExceeded:
            overflows += 1
            if len(rest) <= 1:
                raise
            if overflows >= MAX_TRIM_ROUNDS:
                raise ContextWindowExceeded("the conversation could not be summarised within the context window, "
                                            "even after dropping its oldest items") from None
            rest = rest[max(1, len(rest) // 4):]  # the oldest quarter goes; normalise() mends split call blocks
            continue
        if reply.text.strip():
            return reply.text.strip()
        empty += 1
    return record_summary(view, plan)


def record_summary(view: Sequence[Item], plan: list[dict] | None) -> str:
    """A hand-off summary built from the recorded items, for when the model wrote none: the earlier
    summary, the files touched, the commands run with their exit codes, the last errors and the plan.
    Everything quoted comes from the model or a tool, so each entry is cut short."""
    calls = {i.call_id: i for i in view if isinstance(i, ToolCall)}
    outputs = [i for i in view if isinstance(i, ToolOutput)]
    files: dict[str, None] = {}
    commands: list[str] = []
    for output in outputs:
        call = calls.get(output.call_id)
        args = _arguments(call.arguments) if call else {}
        if call and call.name in FILE_TOOLS and isinstance(args.get("path"), str):
            files[f"{_clip(args['path'], 200)} ({call.name})"] = None
        elif call and call.name == "shell" and isinstance(args.get("command"), str):
            status = output.output.partition("\n")[0] if output.output.startswith("Exit code") else (
                "ok" if output.ok else "failed")
            commands.append(f"`{_clip(args['command'], 200)}` -> {_clip(status, 100)}")
    errors = [f"{calls[o.call_id].name if o.call_id in calls else 'tool'}: {_clip(o.output, 300)}"
              for o in outputs if not o.ok][-LAST_ERRORS:]
    earlier = [i.text for i in view if isinstance(i, ContextMessage) and i.kind == "summary"]
    sections = [RECORD_SUMMARY_NOTE]
    if earlier:
        sections.append("Earlier summary:\n" + _clip(earlier[-1], 4_000))
    for title, lines in (("Files touched", list(files)[-LAST_ENTRIES:]), ("Commands run", commands[-LAST_ENTRIES:]),
                         ("Last errors", errors)):
        if lines:
            sections.append(f"{title}:\n" + "\n".join(f"- {line}" for line in lines))
    if plan:
        sections.append("Plan:\n" + render_plan(plan))
    return "\n\n".join(sections)


def _arguments(raw: str) -> dict:
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"
