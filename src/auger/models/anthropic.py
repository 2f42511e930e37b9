"""Anthropic Messages API over httpx + SSE (no vendor SDK: importing it costs ~1.3 s).

Wire rules this module keeps, and why:

* Base URL: ``https://api.anthropic.com`` by default. The client posts to ``{root}/v1/messages``
  where ``root`` is the configured base URL without a trailing ``/`` and without a trailing
  ``/v1`` -- so ``https://api.anthropic.com``, ``https://api.anthropic.com/`` and
  ``https://api.anthropic.com/v1`` all work. Anthropic's own SDKs take the root, OpenAI-style
  configuration habits add ``/v1``; accepting both avoids a ``/v1/v1/messages`` 404.
* Prompt caching: ``cache_control: ephemeral`` breakpoints on the stable prefix (the last tool
  definition, the last system block) and on the last block of the two most recent user messages.
  The newest one writes the grown conversation to the cache; the previous one is where the last
  request wrote it, so it is always read back even when a reply added more than the ~20 blocks the
  API looks back from a breakpoint (many parallel tool calls). Never more than the API's 4.
* History: a reply's thinking, text and tool_use blocks form one assistant message; tool results and
  a following user text form one user message (tool_result blocks first, as the API requires).
  Thinking blocks are sent back verbatim with their signature, because a tool-use loop with
  thinking enabled is rejected without them; reasoning recorded by another wire API has nothing
  Anthropic can verify and is dropped.
* Streaming: the reply is complete only at ``message_stop``; a stream that ends earlier is a
  retryable error so the engine asks again instead of acting on half a reply.
* Hosted web search (``web_search``): agentic requests offer the ``web_search_20250305`` server tool,
  which runs at Anthropic. Its ``server_tool_use`` and ``web_search_tool_result`` blocks are not calls
  for the engine; the results' URLs and the text's ``web_search_result_location`` citations come back
  as one ``WebSources`` event, and the blocks are not sent back (the cited pages stay in the text).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, AsyncIterator

import httpx
from httpx_sse import ServerSentEvent

from auger.ids import new_hex
from auger.models.base import (
    Completed, ModelError, ModelRequest, ReasoningDelta, ReasoningDone, StreamEvent,
    TextDelta, ToolCallReady, UsageReport, WebSource, WebSources,
)
from auger.models.http import SseModelClient, stream_error, stream_json
from auger.models.images import ImageError, attachments
from auger.protocol.events import Usage
from auger.protocol.items import AssistantMessage, Item, Reasoning, ToolCall, ToolOutput, UserMessage
from auger.protocol.jsontext import loads as loads_bounded

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
PROVIDER = "anthropic"  # the `provider` recorded on Reasoning items this client can send back
MIN_THINKING_BUDGET = 1024  # the API rejects smaller budgets
MAX_CACHE_BREAKPOINTS = 4  # the API rejects requests with more cache_control blocks
WEB_SEARCH_TOOL = {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}
_EPHEMERAL = {"type": "ephemeral"}

_FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
}
_FINISH_WARNINGS = {
    "refusal": "the model refused the request (stop_reason: refusal)",
    "pause_turn": "the provider paused a long hosted search turn (stop_reason: pause_turn); ask it to continue",
}

# Sent in place of a conversation that would otherwise open with the assistant (the API requires a
# user message first); only reachable with hand-edited or truncated histories.
_OPENING_PLACEHOLDER = "(continuing an earlier conversation)"


def messages_url(base_url: str) -> str:
    """``{root}/v1/messages`` for a base URL given with or without a trailing ``/v1`` (see module doc)."""
    root = (base_url or DEFAULT_BASE_URL).rstrip("/")
    if root.endswith("/v1"):
        root = root[: -len("/v1")]
    return root + "/v1/messages"


class AnthropicClient(SseModelClient):
    """A ModelClient for the Anthropic Messages API (streaming only).

    ``max_output_tokens`` bounds the visible reply. With ``thinking_budget`` set, extended thinking
    is enabled and the budget is added on top (``max_tokens = max_output_tokens + thinking_budget``)
    because the API counts thinking against ``max_tokens`` and requires it to exceed the budget;
    adding rather than clamping keeps the room left for the answer independent of the budget.
    """

    def __init__(self, *, provider: str, model: str, base_url: str, api_key: str | None,
                 key_env: str | None = None, idle_timeout: float = 300.0, max_output_tokens: int = 8192,
                 thinking_budget: int | None = None, web_search: bool = False) -> None:
        if thinking_budget is not None and thinking_budget < MIN_THINKING_BUDGET:
            raise ValueError(f"thinking_budget must be at least {MIN_THINKING_BUDGET} tokens (the API minimum), "
                             f"got {thinking_budget}")
        if max_output_tokens < 1:
            raise ValueError(f"max_output_tokens must be positive, got {max_output_tokens}")
        headers = {"anthropic-version": API_VERSION, "content-type": "application/json"}
        if api_key:
            headers["x-api-key"] = api_key
        super().__init__(provider=provider, model=model, url=messages_url(base_url), headers=headers,
                         key_env=key_env, idle_timeout=idle_timeout)
        self.max_output_tokens = max_output_tokens
        self.thinking_budget = thinking_budget
        self.web_search = web_search  # offer the hosted web search with the function tools

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body for one request. Raises ModelError (not retryable) for an unsendable image."""
        messages = to_messages(request.items)
        body: dict[str, Any] = {"model": self.model, "max_tokens": self.max_output_tokens, "stream": True}
        if request.instructions:
            body["system"] = [{"type": "text", "text": request.instructions}]
        body["messages"] = messages
        if request.tools:
            body["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.parameters}
                             for t in request.tools]
            if self.web_search:  # first: the cache breakpoint stays on the last function tool
                body["tools"].insert(0, dict(WEB_SEARCH_TOOL))
            if request.tool_choice != "auto":  # the API's default is auto; "none" is {"type": "none"}
                body["tool_choice"] = {"type": request.tool_choice}
            elif not request.parallel_tools:  # a model described as taking one call at a time
                body["tool_choice"] = {"type": "auto", "disable_parallel_tool_use": True}
        if self.thinking_budget is not None and _thinking_allowed(messages):
            body["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
            body["max_tokens"] = self.max_output_tokens + self.thinking_budget
        mark_cache_breakpoints(body)
        return body

    def parse_stream(self, response: httpx.Response, events: AsyncIterator[ServerSentEvent]
                     ) -> AsyncIterator[StreamEvent]:
        return _parse_stream(response, events, self.url, self.model, self._key_env)


# --------------------------------------------------------------------------------------------- #
# Items → messages
# --------------------------------------------------------------------------------------------- #


def to_messages(items: list[Item]) -> list[dict[str, Any]]:
    """Normalised history items → Messages API ``messages`` (see the module doc for the rules).

    Images of the latest user message must load (an error there is the user's to fix now and ends
    the turn); an image of an earlier message that no longer loads (a deleted screenshot, a resumed
    session on another machine) becomes a text note, so one lost file cannot make a session unusable.
    """
    last_user = max((i for i, item in enumerate(items) if isinstance(item, UserMessage)), default=-1)
    messages: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})

    for index, item in enumerate(items):
        if isinstance(item, UserMessage):
            add("user", _user_blocks(item, strict=index == last_user))
        elif isinstance(item, AssistantMessage):
            if item.text:  # the API rejects empty text blocks
                add("assistant", [{"type": "text", "text": item.text}])
        elif isinstance(item, Reasoning):
            block = _thinking_block(item)
            if block is not None:
                _add_thinking(messages, block)
        elif isinstance(item, ToolCall):
            add("assistant", [{"type": "tool_use", "id": item.call_id, "name": item.name,
                               "input": tool_input(item.arguments)}])
        elif isinstance(item, ToolOutput):
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": item.call_id,
                                      "is_error": not item.ok}
            if item.output:  # content is optional; an empty text would be rejected
                result["content"] = item.output
            add("user", [result])
        # Other items (turn_aborted) never reach a prompt: History.for_prompt rewrites them.
    if messages and messages[0]["role"] != "user":
        messages.insert(0, {"role": "user", "content": [{"type": "text", "text": _OPENING_PLACEHOLDER}]})
    return messages


def tool_input(arguments: str) -> dict[str, Any]:
    """The ``input`` object of a tool_use block.

    The API only accepts a JSON object; arguments that do not parse as one (a truncated reply, a
    model that produced bad JSON) are sent as ``{}``. The engine already answered such a call with
    an error output quoting the problem, so the model still learns what went wrong.
    """
    if not arguments.strip():
        return {}
    try:
        parsed = loads_bounded(arguments)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _user_blocks(item: UserMessage, *, strict: bool) -> list[dict[str, Any]]:
    """Images first, then the text: Anthropic recommends images before the question about them."""
    try:
        images, notes = attachments(item.images, strict=strict)
    except ImageError as exc:
        raise ModelError(f"cannot attach image: {exc}", retryable=False) from None
    blocks: list[dict[str, Any]] = [{"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}
                                    for media, data in images]
    text = "\n".join([*notes, item.text] if item.text else notes)
    if text:
        blocks.append({"type": "text", "text": text})
    return blocks


def _thinking_block(item: Reasoning) -> dict[str, Any] | None:
    """The block that returns a thinking item to the API, or None when there is nothing it can verify."""
    if item.provider != PROVIDER or not item.encrypted:
        return None  # another wire API's reasoning, or a thinking block that never got its signature
    if item.redacted:
        return {"type": "redacted_thinking", "data": item.encrypted}
    return {"type": "thinking", "thinking": item.text, "signature": item.encrypted}


def _add_thinking(messages: list[dict[str, Any]], block: dict[str, Any]) -> None:
    """Thinking goes first in its assistant message (after earlier thinking), as the API returned it."""
    if not messages or messages[-1]["role"] != "assistant":
        messages.append({"role": "assistant", "content": [block]})
        return
    content = messages[-1]["content"]
    position = 0
    while position < len(content) and content[position]["type"] in ("thinking", "redacted_thinking"):
        position += 1
    content.insert(position, block)


def _thinking_allowed(messages: list[dict[str, Any]]) -> bool:
    """False when enabling thinking would make the API reject the request.

    With thinking enabled, an assistant message answered by the final tool results must start with
    a thinking block. A tool-use loop begun by another provider (or with thinking off) has none to
    send, so that one request goes without thinking; the next reply brings its own.
    """
    if len(messages) < 2 or messages[-1]["role"] != "user":
        return True
    if not any(block["type"] == "tool_result" for block in messages[-1]["content"]):
        return True
    previous = messages[-2]
    if previous["role"] != "assistant":
        return True
    return previous["content"][0]["type"] in ("thinking", "redacted_thinking")


def mark_cache_breakpoints(body: dict[str, Any]) -> None:
    """Put ``cache_control`` on the last tool, the last system block and the last block of the two
    most recent user messages, most valuable first, never exceeding the API's limit of 4."""
    targets: list[dict[str, Any]] = []
    if body.get("tools"):
        targets.append(body["tools"][-1])
    if body.get("system"):
        targets.append(body["system"][-1])
    users = [m for m in body.get("messages", []) if m["role"] == "user" and m["content"]]
    targets += [m["content"][-1] for m in reversed(users[-2:])]
    for block in targets[:MAX_CACHE_BREAKPOINTS]:
        block["cache_control"] = dict(_EPHEMERAL)


# --------------------------------------------------------------------------------------------- #
# Streaming
# --------------------------------------------------------------------------------------------- #


@dataclass
class _Block:
    """One content block being streamed, accumulated until its content_block_stop."""

    type: str
    id: str = ""
    name: str = ""
    parts: list[str] = field(default_factory=list)  # thinking text or tool input JSON fragments
    signature: str = ""
    data: str = ""  # redacted_thinking payload


@dataclass
class _Usage:
    input: int = 0
    cache_read: int = 0
    cache_creation: int = 0
    output: int = 0

    def update(self, raw: dict[str, Any] | None) -> None:
        """Take every count present: message_start has them all, message_delta the final ones."""
        if not raw:
            return
        for attr, key in (("input", "input_tokens"), ("cache_read", "cache_read_input_tokens"),
                          ("cache_creation", "cache_creation_input_tokens"), ("output", "output_tokens")):
            if raw.get(key) is not None:
                setattr(self, attr, int(raw[key]))

    def report(self) -> Usage:
        # Anthropic's input_tokens excludes cached tokens; the engine counts all input, cached as a subset.
        return Usage(input_tokens=self.input + self.cache_read + self.cache_creation,
                     cached_input_tokens=self.cache_read, output_tokens=self.output)


async def _parse_stream(response: httpx.Response, events: AsyncIterator[ServerSentEvent], url: str, model: str,
                        key_env: str | None) -> AsyncIterator[StreamEvent]:
    ctype = response.headers.get("content-type", "")
    if "text/event-stream" not in ctype:
        raise ModelError(f"{url} answered with {ctype or 'no content type'} instead of an event stream; "
                         "is the base URL an Anthropic Messages API endpoint?", retryable=False)
    blocks: dict[int, _Block] = {}
    sources: list[WebSource] = []  # pages a hosted web search returned or cited
    usage = _Usage()
    stop_reason: str | None = None
    complete = False
    async for sse in events:
        if not sse.data.strip():
            continue
        data = stream_json(sse.data, url)
        kind = data.get("type") or sse.event
        if kind == "message_start":
            usage.update((data.get("message") or {}).get("usage"))
        elif kind == "content_block_start":
            raw = data.get("content_block") or {}
            block = _Block(type=str(raw.get("type", "")), id=str(raw.get("id") or ""),
                           name=str(raw.get("name") or ""), data=str(raw.get("data") or ""),
                           signature=str(raw.get("signature") or ""))
            blocks[int(data.get("index", 0))] = block
            if block.type == "web_search_tool_result":
                sources += _search_results(raw.get("content"))
            if block.type == "text" and raw.get("text"):
                yield TextDelta(raw["text"])
            elif block.type == "thinking" and raw.get("thinking"):
                block.parts.append(raw["thinking"])
                yield ReasoningDelta(raw["thinking"])
        elif kind == "content_block_delta":
            delta = data.get("delta") or {}
            if delta.get("type") == "citations_delta":
                sources += _citation(delta.get("citation"))
            for event in _delta(blocks.get(int(data.get("index", 0))), delta):
                yield event
        elif kind == "content_block_stop":
            done = _finish_block(blocks.pop(int(data.get("index", 0)), None))
            if done is not None:
                yield done
        elif kind == "message_delta":
            stop_reason = (data.get("delta") or {}).get("stop_reason") or stop_reason
            usage.update(data.get("usage"))
        elif kind == "message_stop":
            complete = True
            break
        elif kind == "error":
            err = found if isinstance(found := data.get("error"), dict) else {}
            raise stream_error(None, err.get("type") or "api_error", err.get("message"), url, model=model,
                               key_env=key_env)
        # "ping" and event types added after this client was written are ignored, as the API's
        # versioning policy asks of clients.
    if not complete:
        raise ModelError(f"the model stream from {url} ended before the reply was complete", retryable=True)
    if sources:
        yield WebSources(sources)
    yield UsageReport(usage.report())
    yield Completed(_FINISH_REASONS.get(stop_reason or "end_turn", stop_reason or "stop"),
                    _FINISH_WARNINGS.get(stop_reason or ""))


def _search_results(content: Any) -> list[WebSource]:
    """The pages of a ``web_search_tool_result`` block (an error result has none)."""
    if not isinstance(content, list):
        return []
    return [WebSource(str(r["url"]), str(r.get("title") or "")) for r in content
            if isinstance(r, dict) and r.get("type") == "web_search_result" and isinstance(r.get("url"), str)]


def _citation(citation: Any) -> list[WebSource]:
    if isinstance(citation, dict) and citation.get("type") == "web_search_result_location" \
            and isinstance(citation.get("url"), str):
        return [WebSource(citation["url"], str(citation.get("title") or ""), cited=True)]
    return []


def _delta(block: _Block | None, delta: dict[str, Any]) -> list[StreamEvent]:
    kind = delta.get("type")
    if kind == "text_delta":
        return [TextDelta(delta["text"])] if delta.get("text") else []
    if block is None:  # a delta for a block that never started: nothing to accumulate into
        return []
    if kind == "thinking_delta" and delta.get("thinking"):
        block.parts.append(delta["thinking"])
        return [ReasoningDelta(delta["thinking"])]
    if kind == "signature_delta":
        block.signature += delta.get("signature") or ""
    elif kind == "input_json_delta":
        block.parts.append(delta.get("partial_json") or "")
    return []  # citations and future delta types carry nothing the engine uses


def _finish_block(block: _Block | None) -> StreamEvent | None:
    if block is None:
        return None
    if block.type == "tool_use":
        arguments = "".join(block.parts)
        return ToolCallReady(block.id or f"toolu_{new_hex(24)}", block.name,
                             arguments if arguments.strip() else "{}")
    if block.type == "thinking":
        return ReasoningDone("".join(block.parts), encrypted=block.signature or None, provider=PROVIDER)
    if block.type == "redacted_thinking":
        return ReasoningDone("", encrypted=block.data or None, provider=PROVIDER, redacted=True)
    return None  # text was streamed as it came
