"""The session's last line before the store and the event stream: every item recorded and every event
emitted passes here (engine/session/session.py `record` and `emit_for`, a sub-agent's host), whoever made it.

What each text gets:

    text from outside the model         full redaction: known values and shapes
        (a tool's output, a diff, context read from files, a warning or error a program wrote)
    everything else                     known values (and those this session learned): what the model or
        (the model's words and calls, the user's own messages)   the user writes is theirs, but a value
                                        auger knows is secret is never kept or shown, whoever wrote it

The tool runtime has already redacted a call's output where it arrived (engine/turn/tool_runtime.py); here it is
found clean again at little cost. Streamed text (a command's output as it runs, the model's deltas) is
redacted per stream, holding back what could be the start of a secret until the next piece or the end of
the stream (the event that ends it: item_ended, tool_call_ended, turn_ended), so a value split across
two deltas is never shown in parts.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any, TypeVar

from auger.protocol import events as ev
from auger.protocol import items as it
from auger.secrets.redact import Redactor, StreamRedactor

T = TypeVar("T")

# The fields that hold text from outside the model, by record type: redacted in full.
_OUTSIDE: dict[type, frozenset[str]] = {
    it.ToolOutput: frozenset({"output"}),
    it.ContextMessage: frozenset({"text"}),
    it.TurnChanges: frozenset({"diff"}),
    it.WorktreeChanges: frozenset({"diff"}),
    ev.ToolCallEnded: frozenset({"output"}),
    ev.ToolOutputDelta: frozenset({"text"}),
    ev.WarningEvent: frozenset({"message"}),
    ev.TurnEnded: frozenset({"message"}),
    ev.TurnDiff: frozenset({"diff"}),
    ev.ApprovalDetails: frozenset({"diff"}),
    ev.Diagnostic: frozenset({"message"}),  # a language server's words about the project
    ev.ExitedReviewMode: frozenset({"error"}),
}
_SKIPPED = frozenset({"encrypted", "images", "digest"})  # opaque provider state, data URLs, HMACs
_REPORTED: dict[type, str] = {ev.WarningEvent: "warning", ev.TurnEnded: "error", ev.ApprovalRequest: "approval",
                              ev.TurnDiff: "diff"}
_WHERE: dict[type, str] = {it.UserMessage: "user_message", it.ToolOutput: "tool_output", it.ContextMessage: "context",
                           it.TurnChanges: "diff", it.WorktreeChanges: "diff"}


class Scrubber:
    """One per session, over its redactor; keeps the state of its event streams."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self._streams: dict[tuple[str, ...], tuple[StreamRedactor, ev.Event]] = {}

    # -- items ---------------------------------------------------------------------------------------------
    def item(self, item: T, turn_id: str | None = None) -> tuple[T, ev.SecretRedacted | None]:
        """The item as it may be kept, and the event that says what was redacted in it (None: nothing)."""
        if not self.redactor.enabled or isinstance(item, it.SecretMarker):
            return item, None
        counts: Counter[str] = Counter()
        scrubbed = self._record(item, counts)
        return scrubbed, self._report(counts, turn_id, None, _WHERE.get(type(item), "message"))

    def text(self, text: str, *, outside: bool) -> str:
        """A lone text kept or shown outside an item or event (a title, a stored full output)."""
        return self.redactor.redact(text, shapes=outside).text

    def outside(self, value: T, counts: Counter[str]) -> T:
        """A value from outside the model (text, or lists and dicts of it: an agent's tool arguments) with every
        secret value in it redacted; what was replaced is added to `counts`."""
        return self._value(value, True, counts)

    # -- events --------------------------------------------------------------------------------------------
    def event(self, event: ev.Event) -> list[ev.Event]:
        """The events to emit for `event`: itself as it may be shown (a delta: what its stream lets out now,
        perhaps nothing), preceded by what a stream it ends held back, followed by a secret_redacted when
        something was replaced in it."""
        if not self.redactor.enabled:
            return [event]
        if isinstance(event, (ev.MessageDelta, ev.ReasoningDelta, ev.ToolOutputDelta)):
            return self._delta(event)
        out = self._ending(event)
        counts: Counter[str] = Counter()
        out.append(self._record(event, counts))
        where = _REPORTED.get(type(event))
        report = self._report(counts, getattr(event, "turn_id", None), None, where) if where else None
        if report is not None:
            out.append(report)
        return out

    def _delta(self, event: ev.MessageDelta | ev.ReasoningDelta | ev.ToolOutputDelta) -> list[ev.Event]:
        key: tuple[str, ...]
        if isinstance(event, ev.ToolOutputDelta):
            key, text, outside = ("output", event.call_id, event.stream), event.text, True
        else:
            key, text, outside = (event.TYPE, event.item_id), event.delta, False
        held = self._streams.get(key)
        stream = held[0] if held is not None else self.redactor.stream(shapes=outside)
        self._streams[key] = (stream, event)
        shown = stream.feed(text).text
        return [_with_text(event, shown)] if shown else []

    def _ending(self, event: ev.Event) -> list[ev.Event]:
        """What the streams `event` ends held back, as their last deltas."""
        if isinstance(event, ev.ItemEnded):
            keys = [k for k in self._streams if k[1:] == (event.item_id,) and k[0] != "output"]
        elif isinstance(event, ev.ToolCallEnded):
            keys = [k for k in self._streams if k[0] == "output" and k[1] == event.call_id]
        elif isinstance(event, (ev.TurnEnded, ev.ShutdownComplete)):
            keys = list(self._streams)
        else:
            return []
        out: list[ev.Event] = []
        for key in keys:
            stream, last = self._streams.pop(key)
            rest = stream.flush().text
            if rest:
                out.append(_with_text(last, rest))
        return out

    # -- walking records -----------------------------------------------------------------------------------
    def _record(self, record: T, counts: Counter[str]) -> T:
        outside = _OUTSIDE.get(type(record), frozenset())
        changes: dict[str, Any] = {}
        for f in dataclasses.fields(record):  # type: ignore[arg-type]  # called with dataclasses only
            if f.name in _SKIPPED:
                continue
            value = getattr(record, f.name)
            new = self._value(value, f.name in outside, counts)
            if new is not value:
                changes[f.name] = new
        return dataclasses.replace(record, **changes) if changes else record  # type: ignore[type-var]

    def _value(self, value: Any, outside: bool, counts: Counter[str]) -> Any:
        if isinstance(value, str):
            if len(value) < 8 or value.startswith("data:"):
                return value
            redaction = self.redactor.redact(value, shapes=outside)
            counts.update(redaction.kinds)
            return redaction.text
        if isinstance(value, list):
            items = [self._value(v, outside, counts) for v in value]
            return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
        if isinstance(value, dict):
            entries = {k: self._value(v, outside, counts) for k, v in value.items()}
            return entries if any(entries[k] is not value[k] for k in value) else value
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self._record(value, counts)
        return value

    @staticmethod
    def _report(counts: Counter[str], turn_id: str | None, call_id: str | None, where: str | None
                ) -> ev.SecretRedacted | None:
        if not counts or where is None:
            return None
        return ev.SecretRedacted(turn_id, call_id, sorted(counts), sum(counts.values()), where)


def report(kinds: Counter[str], turn_id: str | None, call_id: str | None, where: str) -> ev.SecretRedacted | None:
    """The secret_redacted event for what a redaction replaced (None: nothing)."""
    return Scrubber._report(kinds, turn_id, call_id, where)


def _with_text(event: ev.Event, text: str) -> ev.Event:
    field = "text" if isinstance(event, ev.ToolOutputDelta) else "delta"
    return dataclasses.replace(event, **{field: text})  # type: ignore[type-var]
