"""Replay provider: a model client that plays back recorded replies instead of calling a model.

A *cassette* is a JSONL file with one recorded model reply per line::

    # comments and blank lines are ignored
    {"text": "Running the tests first.", "tool_calls": [{"name": "shell", "arguments": {"command": "make test"}}]}
    {"text": "Fixed.", "usage": {"input_tokens": 1200, "output_tokens": 40}, "finish_reason": "stop"}

Keys: `text`, `reasoning` (strings), `tool_calls` (a list of `{"name", "arguments", "id"?}`; arguments
are a JSON object, or a string sent verbatim), `usage` (`input_tokens`, `output_tokens`, and optionally
`cached_input_tokens`, `reasoning_tokens`) and `finish_reason`. Every key is optional.

Each `stream()` call plays the next reply, whatever the request says, so the engine runs its real
tools against the real project: a past session (exported with `cassette_from_items` +
`dump_cassette`) can be re-run against a changed codebase, and demos and tests run with no network.
Every model call consumes a reply — turn replies, but also title and compaction-summary requests —
so replay with `generate_titles = false` (headless runs already do).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Sequence

from auger.models.base import (
    Completed, ModelError, ModelRequest, ReasoningDelta, StreamEvent, TextDelta, ToolCallReady, UsageReport,
)
from auger.protocol.events import Usage
from auger.protocol.jsontext import loads as loads_bounded
from auger.protocol.items import AssistantMessage, Item, Reasoning, ToolCall

_REPLY_KEYS = ("text", "reasoning", "tool_calls", "usage", "finish_reason")
_CALL_KEYS = ("name", "arguments", "id")
_USAGE_KEYS = ("input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens")


class ReplayError(ValueError):
    """A cassette that cannot be read or parsed; the message names the file and line."""


@dataclass
class RecordedCall:
    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)  # a str is sent verbatim
    id: str | None = None

    @property
    def arguments_json(self) -> str:
        """The raw JSON text the model "produced"."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False)


@dataclass
class RecordedReply:
    text: str = ""
    reasoning: str = ""
    tool_calls: list[RecordedCall] = field(default_factory=list)
    usage: Usage | None = None  # None: estimated when replayed
    finish_reason: str | None = None  # None: "tool_calls" when the reply calls tools, else "stop"


# -- cassette files ---------------------------------------------------------------------
def load_cassette(path: Path | str) -> list[RecordedReply]:
    """Read a JSONL cassette; raises ReplayError naming `file:line` for anything malformed."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ReplayError(f"{path}: cannot read cassette ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ReplayError(f"{path}: cassette is not UTF-8 text ({exc.reason})") from None
    return parse_cassette(text, str(path))


def parse_cassette(text: str, source: str = "<cassette>") -> list[RecordedReply]:
    """Parse cassette text; `source` names it in error messages."""
    replies = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise ReplayError(f"{source}:{number}: not valid JSON ({exc})") from None
        try:
            replies.append(_reply_from_json(data))
        except ValueError as exc:
            raise ReplayError(f"{source}:{number}: {exc}") from None
    return replies


def dump_cassette(replies: Sequence[RecordedReply], header: str | None = None) -> str:
    """Replies as cassette text (one JSON line each), optionally after `# header` comment lines."""
    lines = [f"# {line}".rstrip() for line in header.splitlines()] if header else []
    for reply in replies:
        data: dict[str, Any] = {}
        if reply.reasoning:
            data["reasoning"] = reply.reasoning
        if reply.text:
            data["text"] = reply.text
        if reply.tool_calls:
            data["tool_calls"] = [{"name": c.name, "arguments": c.arguments, **({"id": c.id} if c.id else {})}
                                  for c in reply.tool_calls]
        if reply.usage is not None:
            data["usage"] = {"input_tokens": reply.usage.input_tokens, "output_tokens": reply.usage.output_tokens,
                             "cached_input_tokens": reply.usage.cached_input_tokens,
                             "reasoning_tokens": reply.usage.reasoning_tokens}
        if reply.finish_reason is not None:
            data["finish_reason"] = reply.finish_reason
        lines.append(json.dumps(data, ensure_ascii=False))
    return "".join(line + "\n" for line in lines)


def cassette_from_items(items: Sequence[Item]) -> list[RecordedReply]:
    """Rebuild the model replies of a stored session from its items.

    A reply is a run of consecutive reasoning / assistant-message / tool-call items; any other item
    (a user message, tool outputs, context, compaction, rollback, an aborted-turn marker) ends it.
    Provider state (encrypted reasoning) and usage are not items, so they are not reproduced.
    """
    replies: list[RecordedReply] = []
    current: RecordedReply | None = None
    for item in items:
        if not isinstance(item, (Reasoning, AssistantMessage, ToolCall)):
            current = None
            continue
        if current is None:
            current = RecordedReply()
            replies.append(current)
        if isinstance(item, Reasoning):
            if item.text:
                current.reasoning = f"{current.reasoning}\n\n{item.text}" if current.reasoning else item.text
        elif isinstance(item, AssistantMessage):
            current.text += item.text
        else:
            current.tool_calls.append(RecordedCall(item.name, _readable_arguments(item.arguments), item.call_id))
    return replies


def _readable_arguments(raw: str) -> dict[str, Any] | str:
    """A JSON object when that re-encodes to exactly `raw` (readable and lossless), else `raw` itself."""
    try:
        value = loads_bounded(raw)
    except ValueError:
        return raw
    if isinstance(value, dict) and json.dumps(value, ensure_ascii=False) == raw:
        return value
    return raw


def _reply_from_json(data: Any) -> RecordedReply:
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object (one recorded reply), got {type(data).__name__}")
    _check_keys(data, _REPLY_KEYS, "reply")
    text = _string(data, "text")
    reasoning = _string(data, "reasoning")
    finish = data.get("finish_reason")
    if finish is not None and not isinstance(finish, str):
        raise ValueError("'finish_reason' must be a string")
    raw_calls = data.get("tool_calls", [])
    if not isinstance(raw_calls, list):
        raise ValueError("'tool_calls' must be a list")
    calls = [_call_from_json(raw, n) for n, raw in enumerate(raw_calls)]
    usage = None
    if data.get("usage") is not None:
        raw_usage = data["usage"]
        if not isinstance(raw_usage, dict):
            raise ValueError("'usage' must be an object")
        _check_keys(raw_usage, _USAGE_KEYS, "usage")
        for key in ("input_tokens", "output_tokens"):
            if key not in raw_usage:
                raise ValueError(f"'usage' needs '{key}'")
        counts = {}
        for key, value in raw_usage.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"usage '{key}' must be a non-negative integer, got {value!r}")
            counts[key] = value
        usage = Usage(**counts)
    return RecordedReply(text, reasoning, calls, usage, finish)


def _call_from_json(raw: Any, index: int) -> RecordedCall:
    where = f"tool_calls[{index}]"
    if not isinstance(raw, dict):
        raise ValueError(f"{where} must be an object with 'name' and 'arguments'")
    _check_keys(raw, _CALL_KEYS, where)
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where} needs a 'name' string")
    arguments = raw.get("arguments", {})
    if not isinstance(arguments, (dict, str)):
        raise ValueError(f"{where} 'arguments' must be a JSON object or a string, got {type(arguments).__name__}")
    call_id = raw.get("id")
    if call_id is not None and (not isinstance(call_id, str) or not call_id):
        raise ValueError(f"{where} 'id' must be a non-empty string")
    return RecordedCall(name, arguments, call_id)


def _check_keys(data: dict, allowed: Sequence[str], what: str) -> None:
    """A typo must not silently become a default."""
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(map(repr, unknown))} in {what}; allowed: {', '.join(allowed)}")


def _string(data: dict, key: str) -> str:
    value = data.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"'{key}' must be a string, got {type(value).__name__}")
    return value


# -- the client ----------------------------------------------------------------------------
class ReplayClient:
    """A ModelClient that answers each request with the next recorded reply."""

    def __init__(self, *, replies: list[RecordedReply], provider: str = "replay", model: str = "replay",
                 delay: float = 0.0) -> None:
        self.provider = provider
        self.model = model
        self.delay = delay
        self._replies = list(replies)
        self._next = 0  # index of the next reply to play
        self._ids = 0  # ids handed to calls recorded without one

    @property
    def remaining(self) -> int:
        """Replies not played yet."""
        return len(self._replies) - self._next

    async def aclose(self) -> None:
        pass

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        if self._next >= len(self._replies):
            count = len(self._replies)
            raise ModelError(f"replay cassette exhausted after {count} repl{'y' if count == 1 else 'ies'}: the "
                             "session asked the model for more than was recorded", retryable=False)
        reply = self._replies[self._next]
        self._next += 1
        first = True
        for event in self._events(reply, request):
            if not first and self.delay > 0:
                await asyncio.sleep(self.delay)
            first = False
            yield event

    def _events(self, reply: RecordedReply, request: ModelRequest) -> list[StreamEvent]:
        events: list[StreamEvent] = [ReasoningDelta(chunk) for chunk in _chunks(reply.reasoning)]
        events += [TextDelta(chunk) for chunk in _chunks(reply.text)]
        for call in reply.tool_calls:
            call_id = call.id
            if not call_id:
                self._ids += 1
                call_id = f"replay_{self._ids}"
            events.append(ToolCallReady(call_id, call.name, call.arguments_json))
        usage = reply.usage
        if usage is None:  # the engine's own estimate: UTF-8 bytes / 4
            produced = reply.text + reply.reasoning + "".join(c.arguments_json for c in reply.tool_calls)
            usage = Usage(input_tokens=_estimate(_request_text(request)), output_tokens=_estimate(produced))
        events.append(UsageReport(usage))
        events.append(Completed(reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")))
        return events


def _chunks(text: str) -> list[str]:
    """Split text at spaces into pieces of ~24+ characters (at most ~16), so streaming shows."""
    if not text:
        return []
    size = max(24, len(text) // 16)
    chunks = []
    start = 0
    while start < len(text):
        end = start + size
        if end < len(text):
            space = text.find(" ", end)
            end = len(text) if space == -1 else space + 1
        chunks.append(text[start:end])
        start = end
    return chunks


def _request_text(request: ModelRequest) -> str:
    items = json.dumps([item.to_json() for item in request.items], ensure_ascii=False)
    tools = json.dumps([[t.name, t.description, t.parameters] for t in request.tools])
    return request.instructions + items + tools


def _estimate(text: str) -> int:
    return (len(text.encode("utf-8")) + 3) // 4
