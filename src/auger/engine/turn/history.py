"""The in-memory conversation of one session and its prompt form.

The store keeps every item forever; the prompt is a *view* of them, rebuilt from
the items alone (so a resumed session sends byte-for-byte what the original would):

1. `compaction` items replace everything before them with what they kept (context
   messages, the user's own messages, the summary, the plan); `rollback` items drop
   the last N user turns.
2. Normalisation makes any recorded history sendable: a reply's calls form one
   contiguous block closed by the first non-call item; outputs sit right after their
   block in call order (parallel calls may finish in any order); a call without an
   output gets a synthetic "interrupted" one; orphan outputs are dropped.
3. Tool outputs longer than the budget keep their head and tail, with a marker
   saying how much was cut and that `recall` fetches the rest.
4. Engine context (instructions, environment, summaries, plan, aborted-turn notes)
   becomes user-role messages, so wire clients only ever see user, assistant,
   reasoning, call and output items.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from auger.protocol.jsontext import loads as loads_bounded
from auger.protocol.items import (
    RECORDS_ONLY, Compaction, ContextMessage, Item, Rollback, ToolCall, ToolOutput, TurnAborted, UserMessage,
)
from auger.tools.plan import render_plan

INTERRUPTED_OUTPUT = "interrupted: this call was stopped before it finished; its effects may be partial"
ABORTED_NOTE = ("<turn_aborted>The user interrupted the previous turn ({reason}). Tool calls still running were "
                "stopped; check the state of anything they were changing before relying on it.</turn_aborted>")
SUMMARY_NOTE = ("<conversation_summary>\nEarlier parts of this conversation were compacted to save context. "
                "You wrote this hand-off summary of them:\n\n{summary}\n</conversation_summary>")
PLAN_NOTE = "<current_plan>\n{plan}\n</current_plan>"
MIN_OUTPUT_CHARS = 4_000
TOOL_IMAGES = "tool_images"  # a ContextMessage kind: images a tool returned, sent in the user role (data["images"])
IMAGE_REJECTED = "image_rejected"  # a ContextMessage kind: images of earlier messages replaced by a note


class History:
    def __init__(self, items: Iterable[Item] = ()) -> None:
        self._items: list[Item] = list(items)

    def append(self, item: Item) -> None:
        self._items.append(item)

    def __len__(self) -> int:
        return len(self._items)

    @property
    def items(self) -> Sequence[Item]:
        return self._items

    def unanswered_calls(self) -> list[ToolCall]:
        answered = {i.call_id for i in self._items if isinstance(i, ToolOutput)}
        return [i for i in self._items if isinstance(i, ToolCall) and i.call_id not in answered]

    def call_ids(self) -> set[str]:
        return {i.call_id for i in self._items if isinstance(i, ToolCall)}

    def view(self) -> list[Item]:
        """Steps 1 and 2: what the model's context holds, still in engine item types."""
        return normalise(apply_markers(self._items))

    def user_turns(self) -> int:
        """How many of the user's own messages the context holds (what `rollback` can drop)."""
        return sum(isinstance(i, UserMessage) for i in self.view())

    def for_prompt(self, output_cap_chars: int | None = None) -> list[Item]:
        return to_prompt(self.view(), output_cap_chars)


def apply_markers(items: Sequence[Item]) -> list[Item]:
    """Replay compactions and rollbacks over the raw items."""
    view: list[Item] = []
    context: list[ContextMessage] = []  # instructions and environment survive every compaction
    for item in items:
        if isinstance(item, ContextMessage) and item.kind == IMAGE_REJECTED:
            view = [_replace_images(i, item.data or {}) for i in view]
        elif isinstance(item, ContextMessage):
            if item.kind in ("instructions", "environment"):
                if item.kind == "instructions" and item.data and "instructions" in item.data:
                    context = [c for c in context if c.kind != "instructions"]  # a replacement supersedes them
                context.append(item)
            view.append(item)
        elif isinstance(item, Compaction):
            view = [*context, *(UserMessage(text) for text in item.user_messages),
                    ContextMessage(SUMMARY_NOTE.format(summary=item.summary), "summary")]
            if item.plan:
                view.append(ContextMessage(PLAN_NOTE.format(plan=render_plan(item.plan)), "plan"))
        elif isinstance(item, Rollback):
            view = _drop_user_turns(view, item.turns)
        elif isinstance(item, RECORDS_ONLY):
            continue  # records of the project's state (diff, undo, created files): not conversation
        else:
            view.append(item)
    return view


def image_rejection(view: Sequence[Item], reason: str) -> ContextMessage | None:
    """The marker that replaces the images of the newest message carrying any (the ones a provider just
    refused: earlier ones were accepted before) with a note, or None when the context holds no image.
    Recorded as an item, so later turns and a resumed session never send those images again."""
    for item in reversed(view):
        images = _images_of(item)
        if images:
            return ContextMessage(f"images replaced after the provider rejected them: {reason}", IMAGE_REJECTED,
                                  {"images": images, "reason": reason})
    return None


def _images_of(item: Item) -> list[str]:
    """The images a message sends: a user's attachments, or those a tool returned (TOOL_IMAGES)."""
    if isinstance(item, UserMessage):
        return list(item.images)
    if isinstance(item, ContextMessage) and item.kind == TOOL_IMAGES:
        return list((item.data or {}).get("images", []))
    return []


def _replace_images(item: Item, marker: dict) -> Item:
    images = _images_of(item)
    refused = [ref for ref in images if ref in marker.get("images", ())]
    if not refused:
        return item
    assert isinstance(item, (UserMessage, ContextMessage))  # _images_of found images in it
    notes = [f"[an image attached here ({_image_name(ref)}) was removed: the model provider rejected it: "
             f"{marker.get('reason', 'no reason given')}]" for ref in refused]
    text = "\n".join([*notes, item.text] if item.text else notes)
    kept = [ref for ref in images if ref not in refused]
    if isinstance(item, ContextMessage):
        return ContextMessage(text, item.kind, {**(item.data or {}), "images": kept})
    return UserMessage(text, kept)


def _image_name(ref: str) -> str:
    return "inline image" if ref.startswith("data:") else ref.replace("\\", "/").rsplit("/", 1)[-1][:100]


def _drop_user_turns(view: list[Item], turns: int) -> list[Item]:
    """Cut the conversation back to before the Nth-last user message. Engine context after the cut
    (a compaction's summary and plan, environment changes) is state, not conversation: it stays."""
    starts = [n for n, item in enumerate(view) if isinstance(item, UserMessage)]
    if turns <= 0 or not starts:
        return view
    cut = starts[-turns] if turns <= len(starts) else starts[0]
    return view[:cut] + [i for i in view[cut:] if isinstance(i, ContextMessage) and i.kind != "skill"]


def normalise(view: list[Item]) -> list[Item]:
    outputs = {i.call_id: i for i in view if isinstance(i, ToolOutput)}
    result: list[Item] = []
    open_calls: list[ToolCall] = []

    def close_calls() -> None:
        for call in open_calls:
            result.append(outputs.get(call.call_id) or ToolOutput(call.call_id, INTERRUPTED_OUTPUT, ok=False))
        open_calls.clear()

    for item in view:
        if isinstance(item, ToolCall):
            result.append(item)
            open_calls.append(item)
            continue
        close_calls()  # a reply's calls are contiguous: anything else ends the block
        if isinstance(item, ToolOutput):
            continue  # placed right after its call by close_calls (or an orphan: dropped)
        result.append(item)
    close_calls()
    return result


def to_prompt(view: list[Item], output_cap_chars: int | None) -> list[Item]:
    """Steps 3 and 4: cap long outputs, turn engine context into user-role messages."""
    prompt: list[Item] = []
    for item in view:
        if isinstance(item, RECORDS_ONLY):
            continue  # never sent (and never counted: the meter estimates raw items with this)
        if isinstance(item, ToolOutput) and output_cap_chars and len(item.output) > output_cap_chars:
            item = ToolOutput(item.call_id, cap_output(item.output, output_cap_chars, item.call_id), item.ok)
        elif isinstance(item, ContextMessage):
            images = (item.data or {}).get("images", []) if item.kind == TOOL_IMAGES else []
            item = UserMessage(item.text, list(images))
        elif isinstance(item, TurnAborted):
            item = UserMessage(ABORTED_NOTE.format(reason=item.reason))
        prompt.append(item)
    return prompt


def cap_output(text: str, cap: int, call_id: str) -> str:
    cap = max(cap, MIN_OUTPUT_CHARS)
    if len(text) <= cap:
        return text
    head = int(cap * 0.6)
    tail = cap - head
    cut = len(text) - head - tail
    return (f"{text[:head]}\n[... {cut} characters cut from the middle of this output; "
            f"recall with call_id={call_id!r} fetches all of it ...]\n{text[-tail:]}")


def latest_plan(items: Iterable[Item]) -> list[dict] | None:
    """The plan as the last successful update_plan call (or compaction) left it."""
    plan: list[dict] | None = None
    calls: dict[str, ToolCall] = {}
    for item in items:
        if isinstance(item, ToolCall) and item.name == "update_plan":
            calls[item.call_id] = item
        elif isinstance(item, ToolOutput) and item.ok and item.call_id in calls:
            try:
                plan = loads_bounded(calls[item.call_id].arguments).get("plan")
            except (ValueError, AttributeError):
                pass
        elif isinstance(item, Compaction) and item.plan is not None:
            plan = item.plan
    return plan
