"""A scripted mock of the Anthropic Messages HTTP API, for tests.

Why a real HTTP server (as in ``mock_openai``): the client must be exercised
exactly as it runs in production -- over a socket, through httpx, the SSE parser
and the engine's retry logic -- with the failures that matter in practice
(rate limits, 529 overload, dropped and stalled streams, ``error`` events inside
a 200 stream, a prompt too long for the model) injected on demand.

Usage::

    from tests.support.mock_anthropic import MockAnthropicServer, Reply, ToolCall, Fault

    with MockAnthropicServer([
        Reply(thinking="plan", signature="sig-1", tool_calls=[ToolCall("shell", {"command": "ls"})]),
        Fault.overloaded(),
        Reply(text="done"),
    ]) as server:
        client = AnthropicClient(provider="anthropic", model="claude-test",
                                 base_url=server.base_url, api_key="k")
        ...
        assert server.message_requests[0].headers["x-api-key"] == "k"
        assert not server.remaining

Every ``POST /v1/messages`` consumes the next *step* of the script:

* :class:`Reply` -- a message streamed in the real event sequence (``message_start``,
  ``ping``, ``content_block_start``/``_delta``/``_stop`` per block, ``message_delta``,
  ``message_stop``) with text, thinking and tool input split into several deltas,
  or returned as one Message object when the request has no ``"stream": true``.
* :class:`Fault` -- an HTTP error status, a stream dropped/truncated/stalled part-way,
  or an ``error`` event mid-stream.
* :class:`Raw` -- exactly the given events (hostile or malformed ones included).
* a callable ``step(request_body) -> Reply | Fault | Raw`` -- computes the answer from what
  the client actually sent (an exception in it becomes a 500 and is re-raised when
  the ``with`` block exits, so assertions inside steps fail the test).

A :class:`Reply` may run hosted web searches first (``searches``: a ``server_tool_use`` block and
its ``web_search_tool_result``, per search) and cite pages in its text (``citations``, streamed as
``citations_delta``), as the real API does when the request offers the ``web_search_20250305``
server tool; a reply that searches when the request offers no such tool is a script error (500).

Requests the real API would reject for their *shape* (first message not from the
user, a tool_use without its tool_result right after, tool results after text,
empty text blocks, more than 4 cache breakpoints, thinking without a signature or
missing before the last tool results, ``max_tokens`` not above the thinking budget,
a missing ``anthropic-version`` header...) get the API's 400 ``invalid_request_error``
with a message starting ``mock:``; they are recorded but consume no step, so a
client bug shows up as itself rather than as a shifted script. When the script runs
out the server answers 500 ``"mock script exhausted"``.

Standard library only.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Union

from tests.support.mock_http import (
    EXHAUSTED_MESSAGE,  # noqa: F401 - re-exported: part of this module's API
    MockHandler,
    MockServer,
    check_keys,
    fragments,
    sse_event,
    wire_json,
)

__all__ = [
    "DEFAULT_MODEL",
    "MESSAGES_PATH",
    "Fault",
    "MockAnthropicServer",
    "Raw",
    "RecordedRequest",
    "Reply",
    "Step",
    "ToolCall",
    "WebSearch",
    "Citation",
    "default_error",
    "message_object",
    "stream_events",
    "validate_request",
]

MESSAGES_PATH = "/v1/messages"
DEFAULT_MODEL = "claude-test"
MAX_CACHE_BREAKPOINTS = 4
MIN_THINKING_BUDGET = 1024

_USAGE_KEYS = frozenset(
    {"input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"}
)
_STOP_REASONS = frozenset({"end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal"})
_THINKING_TYPES = ("thinking", "redacted_thinking")
WEB_SEARCH_TOOL = "web_search_20250305"


# --------------------------------------------------------------------------- #
# Script steps
# --------------------------------------------------------------------------- #


@dataclass
class ToolCall:
    """One tool_use block the mock model emits.

    ``input`` given as a dict is JSON-encoded and streamed as ``input_json_delta``
    fragments; a str is streamed verbatim, so a test can hand the client malformed
    or truncated JSON. ``id`` defaults to ``toolu_mock_<n>``, numbered per server.
    """

    name: str
    input: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    @property
    def input_json(self) -> str:
        """The exact JSON text streamed for this call's input."""
        return wire_json(self.input)


@dataclass
class WebSearch:
    """A hosted web search the mock model runs before its text: the pages it found, as (url, title)."""

    query: str
    results: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Citation:
    """A page the reply's text cites (a ``web_search_result_location`` citation)."""

    url: str
    title: str = ""


@dataclass
class Reply:
    """A successful message.

    Blocks are streamed in the order the real API uses: ``thinking`` (with
    ``signature``, default a fake derived from the text), ``redacted`` (the
    ``data`` of a redacted_thinking block), ``text``, then ``tool_calls``.
    ``usage`` may override any of ``input_tokens``, ``output_tokens``,
    ``cache_read_input_tokens``, ``cache_creation_input_tokens``; the rest are
    estimated. ``stop_reason`` defaults to ``tool_use`` with tool calls, else
    ``end_turn``. ``delay`` is slept before answering; ``chunk_chars`` sets the
    size of streamed text/thinking/input fragments.
    """

    text: str = ""
    thinking: str | None = None
    signature: str | None = None
    redacted: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: dict[str, int] | None = None
    stop_reason: str | None = None
    delay: float = 0.0
    chunk_chars: int = 8
    searches: list[WebSearch] = field(default_factory=list)
    citations: list[Citation] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tool_calls = [tc if isinstance(tc, ToolCall) else ToolCall(**tc) for tc in self.tool_calls]
        if self.chunk_chars < 1:
            raise ValueError("chunk_chars must be >= 1")
        if self.delay < 0:
            raise ValueError("delay must be >= 0")
        if self.usage is not None:
            check_keys(self.usage, _USAGE_KEYS, "usage")
        if self.stop_reason is not None and self.stop_reason not in _STOP_REASONS:
            raise ValueError(f"unknown stop_reason {self.stop_reason!r}; expected one of {sorted(_STOP_REASONS)}")
        if self.thinking is not None and self.signature is None:
            self.signature = f"mocksig-{uuid.uuid5(uuid.NAMESPACE_OID, self.thinking).hex}"

    @property
    def resolved_stop_reason(self) -> str:
        return self.stop_reason or ("tool_use" if self.tool_calls else "end_turn")


# A drop/hang/truncate needs *some* reply to cut short; long enough for many events.
_PARTIAL_TEXT = "This reply is going to be cut off before it is complete, mid-stream."


@dataclass
class Fault:
    """A failure to inject instead of a reply. Build with the class methods.

    * ``status``      -- an HTTP error with Anthropic's JSON error body.
    * ``drop``        -- a 200 stream that sends ``after_events`` SSE events of ``reply``,
      then closes the socket mid-body (the client sees a broken transfer).
    * ``truncate``    -- sends ``after_events`` events, then ends the HTTP body cleanly,
      without ``message_stop`` (what a proxy cutting the stream produces).
    * ``hang``        -- sends ``after_events`` events, then nothing for ``seconds``
      (or until the server stops), then closes the socket.
    * ``error_event`` -- sends ``after_events`` events, then an ``event: error`` with
      ``error_type``/``message``, and ends the stream (as the real API does).
    """

    kind: str
    code: int = 200
    body: dict[str, Any] | str | None = None
    message: str | None = None
    retry_after: str | int | float | None = None
    headers: dict[str, str] = field(default_factory=dict)
    after_events: int = 0
    seconds: float = 0.0
    reply: Reply | None = None
    error_type: str = "overloaded_error"

    def __post_init__(self) -> None:
        if self.kind not in ("status", "drop", "truncate", "hang", "error_event"):
            raise ValueError(f"unknown fault kind {self.kind!r}")
        if self.after_events < 0:
            raise ValueError("after_events must be >= 0")

    @classmethod
    def status(cls, code: int, body: dict[str, Any] | str | None = None,
               retry_after: str | int | float | None = None, headers: Mapping[str, str] | None = None,
               *, message: str | None = None) -> Fault:
        """Answer with HTTP ``code``: ``body`` None gives Anthropic's error shape for the
        code (see :func:`default_error`); a dict is sent as JSON, a str as text/plain.
        ``message`` only replaces the default error message."""
        if not 100 <= int(code) <= 599:
            raise ValueError(f"bad HTTP status {code!r}")
        return cls(kind="status", code=int(code), body=body, message=message, retry_after=retry_after,
                   headers=dict(headers or {}))

    @classmethod
    def overloaded(cls, retry_after: str | int | float | None = None) -> Fault:
        """The 529 the real API returns when it is overloaded."""
        return cls.status(529, retry_after=retry_after)

    @classmethod
    def context_length(cls, message: str | None = None) -> Fault:
        """The 400 the real API returns when the prompt does not fit the model."""
        return cls.status(400, body=_error_body(
            "invalid_request_error", message or "prompt is too long: 214315 tokens > 200000 maximum"))

    @classmethod
    def drop(cls, after_events: int = 3, reply: Reply | None = None) -> Fault:
        return cls(kind="drop", after_events=after_events, reply=reply)

    @classmethod
    def truncate(cls, after_events: int = 3, reply: Reply | None = None) -> Fault:
        return cls(kind="truncate", after_events=after_events, reply=reply)

    @classmethod
    def hang(cls, after_events: int = 1, seconds: float = 30.0, reply: Reply | None = None) -> Fault:
        return cls(kind="hang", after_events=after_events, seconds=float(seconds), reply=reply)

    @classmethod
    def error_event(cls, error_type: str = "overloaded_error", message: str | None = None,
                    after_events: int = 3, reply: Reply | None = None) -> Fault:
        return cls(kind="error_event", error_type=error_type, message=message, after_events=after_events,
                   reply=reply)


@dataclass
class Raw:
    """Stream exactly these events, then end the body: a dict as an event named by its ``type``, a str
    verbatim as an event's ``data:`` text (JSON the real API never sends, or not JSON at all). Nothing
    is checked or completed: a script without ``message_stop`` tests exactly that."""

    events: list[dict[str, Any] | str]


Step = Union[Reply, Fault, Raw, Callable[[dict], Union[Reply, Fault, Raw]]]


# --------------------------------------------------------------------------- #
# Wire format (pure functions, so tests can compare against them directly)
# --------------------------------------------------------------------------- #


def message_usage(reply: Reply, tool_calls: list[tuple[str, str, str]], request_bytes: int) -> dict[str, int]:
    """Anthropic's usage counts; estimated (~4 chars per token) unless the reply overrides them."""
    override = reply.usage or {}
    generated = len(reply.text) + len(reply.thinking or "") + sum(len(args) for _, _, args in tool_calls)
    return {
        "input_tokens": override.get("input_tokens", request_bytes // 4),
        "cache_creation_input_tokens": override.get("cache_creation_input_tokens", 0),
        "cache_read_input_tokens": override.get("cache_read_input_tokens", 0),
        "output_tokens": override.get("output_tokens", generated // 4 + 1),
    }


def _content_blocks(reply: Reply, tool_calls: list[tuple[str, str, str]]) -> list[dict[str, Any]]:
    """The complete content blocks of a reply, in wire order."""
    blocks: list[dict[str, Any]] = []
    if reply.thinking is not None:
        blocks.append({"type": "thinking", "thinking": reply.thinking, "signature": reply.signature})
    if reply.redacted is not None:
        blocks.append({"type": "redacted_thinking", "data": reply.redacted})
    for n, search in enumerate(reply.searches):
        search_id = f"srvtoolu_mock_{n}"
        blocks.append({"type": "server_tool_use", "id": search_id, "name": "web_search",
                       "input": json.dumps({"query": search.query})})
        blocks.append({"type": "web_search_tool_result", "tool_use_id": search_id, "content": [
            {"type": "web_search_result", "url": url, "title": title, "encrypted_content": "mock-enc",
             "page_age": None} for url, title in search.results]})
    if reply.text:
        blocks.append({"type": "text", "text": reply.text, "citations": [
            {"type": "web_search_result_location", "url": c.url, "title": c.title, "cited_text": reply.text[:40],
             "encrypted_index": "mock-idx"} for c in reply.citations] or None})
    for call_id, name, arguments in tool_calls:
        blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": arguments})
    return blocks


def stream_events(reply: Reply, tool_calls: list[tuple[str, str, str]], *, message_id: str, model: str,
                  usage: dict[str, int]) -> list[tuple[str, dict[str, Any]]]:
    """The ``(event name, data)`` pairs of one streamed message, in order.

    ``tool_calls`` are resolved ``(id, name, input_json)`` triples. As in the real
    API, ``message_start`` carries the input usage (and ``output_tokens`` 1), every
    block opens empty and fills through deltas (tool input starts with an empty
    ``partial_json``), the signature arrives as one ``signature_delta`` just before
    the thinking block stops, and ``message_delta`` carries the final output count.
    """
    start_usage = {**usage, "output_tokens": 1}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": {
            "id": message_id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": start_usage}}),
        ("ping", {"type": "ping"}),
    ]
    size = reply.chunk_chars
    for index, block in enumerate(_content_blocks(reply, tool_calls)):
        kind = block["type"]
        deltas: list[dict[str, Any]] = []
        if kind == "thinking":
            start = {"type": "thinking", "thinking": ""}
            deltas = [{"type": "thinking_delta", "thinking": part} for part in fragments(block["thinking"], size)]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "redacted_thinking":
            start = dict(block)
        elif kind == "text":
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": part} for part in fragments(block["text"], size)]
            deltas += [{"type": "citations_delta", "citation": c} for c in block["citations"] or []]
        elif kind == "server_tool_use":
            start = {"type": "server_tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": part} for part in fragments(block["input"], size)]
        elif kind == "web_search_tool_result":
            start = dict(block)
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": part}
                      for part in ["", *fragments(block["input"], size)]]
        events.append(("content_block_start",
                       {"type": "content_block_start", "index": index, "content_block": start}))
        events += [("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
                   for d in deltas]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": reply.resolved_stop_reason, "stop_sequence": None},
                                     "usage": {"output_tokens": usage["output_tokens"]}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def message_object(reply: Reply, tool_calls: list[tuple[str, str, str]], *, message_id: str, model: str,
                   usage: dict[str, int]) -> dict[str, Any]:
    """The non-streaming Message object (tool input parsed back to an object, as the API sends it)."""
    content = []
    for block in _content_blocks(reply, tool_calls):
        if block["type"] in ("tool_use", "server_tool_use"):
            try:
                block = {**block, "input": json.loads(block["input"] or "{}")}
            except ValueError:
                block = {**block, "input": {}}
        content.append(block)
    return {"id": message_id, "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": reply.resolved_stop_reason, "stop_sequence": None, "usage": usage}


def _error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def default_error(code: int, model: str) -> dict[str, Any]:
    """Anthropic's error body for ``code``, with the types and messages the real API uses."""
    kinds = {
        400: ("invalid_request_error", "Invalid request."),
        401: ("authentication_error", "invalid x-api-key"),
        403: ("permission_error", "Your API key does not have permission to use the specified resource."),
        404: ("not_found_error", f"model: {model}"),
        413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
        429: ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit."),
        500: ("api_error", "Internal server error"),
        529: ("overloaded_error", "Overloaded"),
    }
    kind, message = kinds.get(code, ("api_error" if code >= 500 else "invalid_request_error",
                                     f"Mock error {code}."))
    return _error_body(kind, message)


# --------------------------------------------------------------------------- #
# Request validation: the shape rules the real API enforces
# --------------------------------------------------------------------------- #


# The Messages API's top-level fields; any other is refused.
_BODY_KEYS = frozenset({"model", "messages", "max_tokens", "system", "tools", "tool_choice", "stream", "temperature",
                        "top_p", "top_k", "stop_sequences", "metadata", "thinking", "service_tier", "container",
                        "mcp_servers", "context_management"})


def validate_request(body: Any, headers: Mapping[str, str]) -> str | None:
    """The first reason the real API would reject this request's shape, or None."""
    if "anthropic-version" not in headers:
        return "anthropic-version: header is required"
    if not isinstance(body, dict):
        return "the request body is not a JSON object"
    if not isinstance(body.get("model"), str):
        return "model: Field required"
    extra = sorted(set(body) - _BODY_KEYS)
    if extra:  # what another wire sends (`response_format`, `text`) is an error here, not ignored
        return f"{extra[0]}: Extra inputs are not permitted"
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or max_tokens < 1:
        return "max_tokens: Field required (a positive integer)"
    problem = (_validate_system(body.get("system")) or _validate_tools(body.get("tools"))
               or _validate_tool_choice(body) or _validate_messages(body.get("messages"))
               or _validate_thinking(body, max_tokens))
    if problem:
        return problem
    breakpoints = _count_cache_control(body)
    if breakpoints > MAX_CACHE_BREAKPOINTS:
        return f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. Found {breakpoints}."
    return None


def _validate_system(system: Any) -> str | None:
    if system is None or isinstance(system, str):
        return None
    if not isinstance(system, list):
        return "system: must be a string or a list of text blocks"
    for i, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            return f"system.{i}: must be a text block"
        if not block.get("text"):
            return f"system.{i}: text content blocks must be non-empty"
    return None


def _validate_tools(tools: Any) -> str | None:
    if tools is None:
        return None
    if not isinstance(tools, list):
        return "tools: must be a list"
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            return f"tools.{i}.name: Field required"
        if tool.get("type") == WEB_SEARCH_TOOL:
            if tool["name"] != "web_search" or "input_schema" in tool:
                return f"tools.{i}: the {WEB_SEARCH_TOOL} server tool is named web_search and takes no input_schema"
            continue
        if tool.get("type") not in (None, "custom"):
            return f"tools.{i}.type: unknown tool type {tool.get('type')!r}"
        if not isinstance(tool.get("input_schema"), dict):
            return f"tools.{i}.input_schema: Field required"
    return None


TOOL_CHOICE_TYPES = ("auto", "any", "tool", "none")


def _validate_tool_choice(body: dict[str, Any]) -> str | None:
    """The API takes only an object: ``{"type": "auto"|"any"|"none"}`` or ``{"type": "tool", "name": ...}``;
    extended thinking allows only auto and none."""
    choice = body.get("tool_choice")
    if choice is None:
        return None
    if not isinstance(choice, dict):
        return "tool_choice: Input should be a valid dictionary or object to extract fields from"
    kind = choice.get("type")
    if kind not in TOOL_CHOICE_TYPES:
        return (f"tool_choice.type: Input should be {', '.join(repr(t) for t in TOOL_CHOICE_TYPES[:-1])} "
                f"or {TOOL_CHOICE_TYPES[-1]!r}")
    if kind == "tool" and not isinstance(choice.get("name"), str):
        return "tool_choice.tool.name: Field required"
    thinking = body.get("thinking")
    if kind in ("any", "tool") and isinstance(thinking, dict) and thinking.get("type") == "enabled":
        return "Thinking may not be enabled when tool_choice forces tool use."
    return None


def _validate_messages(messages: Any) -> str | None:
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    if not isinstance(messages[0], dict) or messages[0].get("role") != "user":
        return "messages: the first message must use the \"user\" role"
    merged = _merge_roles(messages)
    if isinstance(merged, str):
        return merged
    seen_ids: set[str] = set()
    for i, (role, blocks) in enumerate(merged):
        for j, block in enumerate(blocks):
            where = f"messages.{i}.content.{j}"
            kind = block.get("type")
            if kind == "text" and not block.get("text"):
                return f"{where}: text content blocks must be non-empty"
            if kind in _THINKING_TYPES and role != "assistant":
                return f"{where}: {kind} blocks are only allowed in assistant messages"
            if kind == "thinking" and not isinstance(block.get("signature"), str):
                return f"{where}.signature: Field required"
            if kind == "redacted_thinking" and not isinstance(block.get("data"), str):
                return f"{where}.data: Field required"
            if kind == "tool_use":
                if role != "assistant":
                    return f"{where}: tool_use blocks are only allowed in assistant messages"
                if not isinstance(block.get("input"), dict):
                    return f"{where}.input: Input should be a valid dictionary"
                if block.get("id") in seen_ids:
                    return f"{where}: tool_use ids must be unique"
                seen_ids.add(block.get("id"))
            if kind == "tool_result":
                if role != "user":
                    return f"{where}: tool_result blocks are only allowed in user messages"
                if any(b.get("type") != "tool_result" for b in blocks[:j]):
                    return f"{where}: tool_result blocks must come first in the user message content"
        uses = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
        following = merged[i + 1][1] if i + 1 < len(merged) else []
        answered = [b.get("tool_use_id") for b in following if b.get("type") == "tool_result"]
        missing = [u for u in uses if u not in answered]
        if missing and i + 1 < len(merged):
            return (f"messages.{i + 1}: tool_use ids were found without tool_result blocks immediately "
                    f"after: {', '.join(map(str, missing))}")
        if role == "user":
            previous = merged[i - 1][1] if i > 0 else []
            offered = {b.get("id") for b in previous if b.get("type") == "tool_use"}
            for b in blocks:
                if b.get("type") == "tool_result" and b.get("tool_use_id") not in offered:
                    return (f"messages.{i}: unexpected tool_use_id {b.get('tool_use_id')!r} in tool_result "
                            "blocks; each tool_result must answer a tool_use in the previous message")
    return None


def _merge_roles(messages: list[Any]) -> list[tuple[str, list[dict[str, Any]]]] | str:
    """Messages as (role, blocks), consecutive same-role messages merged as the API merges them."""
    merged: list[tuple[str, list[dict[str, Any]]]] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        content = message.get("content")
        if isinstance(content, str):
            if not content:
                return f"messages.{i}: text content must be non-empty"
            blocks = [{"type": "text", "text": content}]
        elif isinstance(content, list) and content and all(isinstance(b, dict) for b in content):
            blocks = list(content)
        else:
            return f"messages.{i}.content: must be a non-empty string or list of content blocks"
        if merged and merged[-1][0] == message["role"]:
            merged[-1][1].extend(blocks)
        else:
            merged.append((message["role"], blocks))
    return merged


def _validate_thinking(body: dict[str, Any], max_tokens: int) -> str | None:
    thinking = body.get("thinking")
    if thinking is None or thinking.get("type") == "disabled":
        return None
    budget = thinking.get("budget_tokens")
    if thinking.get("type") != "enabled" or not isinstance(budget, int):
        return "thinking: expected {type: enabled, budget_tokens: int}"
    if budget < MIN_THINKING_BUDGET:
        return f"thinking.budget_tokens: Input should be greater than or equal to {MIN_THINKING_BUDGET}"
    if max_tokens <= budget:
        return "`max_tokens` must be greater than `thinking.budget_tokens`"
    merged = _merge_roles(body["messages"])
    assert not isinstance(merged, str)  # validated before
    if (len(merged) >= 2 and merged[-1][0] == "user"
            and any(b.get("type") == "tool_result" for b in merged[-1][1])
            and merged[-2][1][0].get("type") not in _THINKING_TYPES):
        return ("messages.{}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{}`. "
                "When `thinking` is enabled, a final `assistant` message must start with a thinking block."
                .format(len(merged) - 2, merged[-2][1][0].get("type")))
    return None


def _count_cache_control(body: dict[str, Any]) -> int:
    blocks: list[Any] = list(body.get("tools") or [])
    if isinstance(body.get("system"), list):
        blocks += body["system"]
    for message in body.get("messages") or []:
        if isinstance(message.get("content"), list):
            blocks += message["content"]
    return sum(1 for b in blocks if isinstance(b, dict) and b.get("cache_control"))


# --------------------------------------------------------------------------- #
# Server
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it.

    ``headers`` has lower-case keys; ``body`` is the parsed JSON object ({} when
    absent or not an object -- see ``raw``); ``rejected`` is the ``mock:`` 400
    message when the request failed validation, else None.
    """

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    method: str = "POST"
    raw: bytes = b""
    client_port: int = 0
    rejected: str | None = None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])


class _Handler(MockHandler):
    """The Messages API over the shared HTTP/1.1 plumbing."""

    server_version = "mock-anthropic/1.0"
    lowercase_headers = True

    def _invalid_request(self, message: str) -> dict[str, Any]:
        return _error_body("invalid_request_error", message)

    def _server_error(self, message: str, code: str) -> dict[str, Any]:
        return _error_body("api_error", message)

    def _default_error(self, status: int, model: str) -> dict[str, Any]:
        return default_error(status, model)

    def _id_headers(self) -> dict[str, str]:
        return {"request-id": f"req_mock_{uuid.uuid4().hex[:20]}"}

    def _encode_json(self, obj: Any) -> bytes:
        """``json.dumps`` with its default (ASCII, spaced) output: unlike the compact SSE
        data, whole bodies from this mock have always looked like that."""
        return json.dumps(obj).encode()

    def _handle(self, path: str, headers: dict[str, str], raw: bytes, body: Any) -> None:
        mock = self.server.mock
        record = RecordedRequest(path=path, headers=headers, body=body if isinstance(body, dict) else {},
                                 method=self.command, raw=raw, client_port=self.client_address[1])
        if self.command != "POST" or path != MESSAGES_PATH:
            mock._record(record)
            self._send_json(404, _error_body("not_found_error", f"Not found: {self.command} {path}"))
            return
        if mock.api_key is not None and headers.get("x-api-key") != mock.api_key:
            mock._record(record)
            self._send_json(401, _error_body("authentication_error", "invalid x-api-key"))
            return
        problem = validate_request(body, headers)
        if problem:
            mock._record(dataclasses.replace(record, rejected=f"mock: {problem}"))
            self._send_json(400, self._invalid_request(f"mock: {problem}"))
            return
        self._messages(record, mock._record_and_take(record))

    def _messages(self, record: RecordedRequest, step: Step | None) -> None:
        mock = self.server.mock
        body = record.body
        model = str(body.get("model") or DEFAULT_MODEL)
        step = self._step_to_serve(step, body, model)
        if step is None:
            return
        if isinstance(step, Raw):
            self._start_stream()
            for event in step.events:
                self._write_chunk(b"data: " + event.encode() + b"\n\n" if isinstance(event, str)
                                  else sse_event(event, str(event.get("type", "message"))))
            self._end_chunks()
            return
        reply = step if isinstance(step, Reply) else (step.reply or Reply(text=_PARTIAL_TEXT))
        if reply.searches and not any(isinstance(t, dict) and t.get("type") == WEB_SEARCH_TOOL
                                      for t in body.get("tools") or []):
            self._send_json(500, self._server_error("mock script: the reply searches the web, but the request "
                                                    "offers no web_search tool", "api_error"))
            return
        if not self._delay(reply.delay):
            return
        tool_calls = [(tc.id or f"toolu_mock_{mock._next_id():04d}", tc.name, tc.input_json)
                      for tc in reply.tool_calls]
        message_id = f"msg_mock_{uuid.uuid4().hex[:20]}"
        usage = message_usage(reply, tool_calls, len(record.raw))

        if not body.get("stream"):
            payload = self._encode_json(message_object(reply, tool_calls, message_id=message_id, model=model,
                                                       usage=usage))
            if isinstance(step, Fault):
                self._send_headers(200, "application/json", len(payload))
                if step.kind in ("drop", "truncate"):
                    self.wfile.write(payload[: len(payload) // 2])
                    self.wfile.flush()
                self._fail(step)
                return
            self._send_bytes(200, payload, "application/json")
            return

        events = [sse_event(data, name) for name, data in
                  stream_events(reply, tool_calls, message_id=message_id, model=model, usage=usage)]
        self._start_stream()
        if not isinstance(step, Fault):
            for event in events:
                self._write_chunk(event)
            self._end_chunks()
            return
        for event in events[: min(step.after_events, len(events) - 1)]:  # never the final message_stop
            self._write_chunk(event)
        if step.kind == "error_event":
            message = step.message or ("Overloaded" if step.error_type == "overloaded_error"
                                       else f"mock {step.error_type}")
            self._write_chunk(sse_event(_error_body(step.error_type, message), "error"))
            self._end_chunks()
        elif step.kind == "truncate":
            self._end_chunks()
        else:
            self._fail(step)


class MockAnthropicServer(MockServer[Step, RecordedRequest]):
    """A scripted Anthropic Messages API on 127.0.0.1 (see the module docstring).

    ``api_key``: when set, requests without that ``x-api-key`` get the real API's 401
    and consume no step. Script, request log, lifecycle and error handling are
    :class:`~tests.support.mock_http.MockServer`'s.
    """

    _handler = _Handler
    _step_types = (Reply, Fault, Raw)
    _base_path = ""  # an Anthropic client takes the root and adds /v1 itself

    def __init__(self, steps: Iterable[Step] = (), *, host: str = "127.0.0.1", port: int = 0,
                 api_key: str | None = None) -> None:
        self.api_key = api_key
        super().__init__(steps, host=host, port=port)

    @property
    def message_requests(self) -> list[RecordedRequest]:
        """The ``POST /v1/messages`` requests that passed validation (each consumed a step)."""
        return [r for r in self.requests
                if r.method == "POST" and r.path == MESSAGES_PATH and r.rejected is None]

    @property
    def rejections(self) -> list[str]:
        """The ``mock:`` messages of requests rejected for their shape."""
        return [r.rejected for r in self.requests if r.rejected]
