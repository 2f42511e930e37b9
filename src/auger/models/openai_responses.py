"""OpenAI Responses API (`POST /v1/responses`) over httpx + SSE, stateless.

Why stateless: every request carries the whole normalised history with
`store: false` and never a `previous_response_id`. The store is then the only
truth about a conversation, so a resumed session, a compacted history or a
history replayed against another server is sent exactly as recorded, and
nothing depends on OpenAI keeping a response around.

Reasoning survives that statelessness through `include:
["reasoning.encrypted_content"]`: each reasoning output item comes back with an
opaque `encrypted_content` blob, recorded as a `Reasoning` item
(provider "openai_responses") and sent back verbatim as a `reasoning` input item
on the next request, so the model keeps its chain of thought across tool calls.
The item's `id` is deliberately *not* sent back: with `store: false` the API
resolves ids against stored items and answers 404 "Item with id 'rs_…' not found.
Items are not persisted when `store` is set to false" (Codex CLI skips the id
when serialising reasoning items for the same reason).

Servers running open-weight reasoning models stream raw reasoning instead
(`response.reasoning_text.delta`, and `content: [{"type": "reasoning_text"}]` in
the finished item) and no encrypted content: that text is shown, recorded under
its own provider tag, and sent back as the reasoning item's `content`.

With `web_search` on, agentic requests (those offering tools) also offer the hosted `web_search`
tool: the search runs at OpenAI, the message's `url_citation` annotations and the search call's sources
come back as a `WebSources` event. Search calls are not sent back (a stateless request cannot refer to
them); the cited pages stay in the reply's text.

Retries live in the engine (models/retry.py); this module only classifies
failures (through models/http.py, like HTTP errors) with the server's delay hint
when it gives one. Every `response.incomplete` reason becomes a warning.
"""

from __future__ import annotations

import re
from typing import Any, AsyncIterator

import httpx
from httpx_sse import ServerSentEvent

from auger.ids import new_hex
from auger.models.base import (
    Completed, ModelError, ModelRequest, ReasoningDelta, ReasoningDone, StreamEvent,
    TextDelta, ToolCallReady, UsageReport, WebSource, WebSources,
)
from auger.models.http import SseModelClient, openai_usage, stream_error, stream_json
from auger.models.images import ImageError, attachments
from auger.protocol.items import AssistantMessage, Item, Reasoning, ToolCall, ToolOutput, UserMessage

WIRE = "openai_responses"  # the `provider` stamped on Reasoning items this client can send back
# Raw reasoning (`reasoning_text` content, from servers running open-weight reasoning models): recorded under
# its own provider tag, because it goes back as the item's `content`, not as a summary.
RAW_REASONING = "openai_responses.reasoning_text"

# Separates reasoning summary parts, both in the streamed deltas and in the recorded text, so what the
# user watched stream is exactly what is stored.
SUMMARY_SEPARATOR = "\n\n"

_TRY_AGAIN = re.compile(r"try again in\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|seconds?)\b", re.IGNORECASE)


class OpenAIResponsesClient(SseModelClient):
    """A ModelClient for the Responses API.

    `reasoning_effort` / `reasoning_summary` go into the request's `reasoning`
    object, which is sent whenever either is set. When both are None neither
    the `reasoning` object nor the `reasoning.encrypted_content` include is
    sent: that is the switch for models without reasoning, which reject the
    parameter (Codex CLI, too, asks for encrypted content only along with
    `reasoning`). The default summary "auto" asks reasoning models for
    readable summaries, streamed as reasoning deltas. A request's own `effort` and
    `summary` (the session's per-turn settings) override the configured ones.
    """

    def __init__(self, *, provider: str, model: str, base_url: str, api_key: str | None,
                 key_env: str | None = None, idle_timeout: float = 300.0, reasoning_effort: str | None = None,
                 reasoning_summary: str | None = "auto", max_output_tokens: int | None = None,
                 structured_output: bool = True, web_search: bool = False) -> None:
        super().__init__(provider=provider, model=model, url=base_url.rstrip("/") + "/responses",
                         headers={"authorization": f"Bearer {api_key}"} if api_key else {}, key_env=key_env,
                         idle_timeout=idle_timeout)
        self._reasoning: dict[str, str] = {}
        if reasoning_effort is not None:
            self._reasoning["effort"] = reasoning_effort
        if reasoning_summary is not None:
            self._reasoning["summary"] = reasoning_summary
        self._max_output_tokens = max_output_tokens
        self.structured_output = structured_output  # send `text.format` (a server may not take it)
        self.web_search = web_search  # offer the hosted web_search tool with the function tools

    def parse_stream(self, response: httpx.Response, events: AsyncIterator[ServerSentEvent]
                     ) -> AsyncIterator[StreamEvent]:
        return _parse_stream(response, events, self.url, self.model, self._key_env)

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        """The request body. Raises ModelError (not retryable) for an image that cannot be sent."""
        body: dict[str, Any] = {
            "model": self.model,
            "instructions": request.instructions,
            "input": to_input(request.items),
            "stream": True,
            "store": False,  # stateless: see the module docstring
        }
        if request.tools:
            body["tools"] = [
                {"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters,
                 "strict": False}  # strict mode would demand every property be required; our schemas aren't
                for t in request.tools
            ]
            if self.web_search:
                body["tools"].append({"type": "web_search"})
            body["tool_choice"] = request.tool_choice
            body["parallel_tool_calls"] = request.parallel_tools
        reasoning = dict(self._reasoning)
        if request.effort is not None:
            reasoning["effort"] = request.effort
        if request.summary == "none":
            reasoning.pop("summary", None)
        elif request.summary is not None:
            reasoning["summary"] = request.summary
        include = []
        if reasoning:
            body["reasoning"] = reasoning
            include.append("reasoning.encrypted_content")
        if self.web_search and request.tools:
            include.append("web_search_call.action.sources")
        if include:
            body["include"] = include
        if self._max_output_tokens is not None:
            body["max_output_tokens"] = self._max_output_tokens
        if request.output is not None and self.structured_output:
            body["text"] = {"format": {"type": "json_schema", "name": request.output.name,
                                       "schema": request.output.schema, "strict": request.output.strict}}
        return body


# --------------------------------------------------------------------------- #
# History items → Responses input items
# --------------------------------------------------------------------------- #


def to_input(items: list[Item]) -> list[dict[str, Any]]:
    """Normalised history → `input` items, in order.

    Reasoning is sent back only when it is this wire API's own and carries its
    encrypted content: another provider's reasoning (an Anthropic signature, a
    Chat Completions model's plain text) means nothing here, and without
    `encrypted_content` a reasoning item cannot be resolved when `store` is false.
    """
    out: list[dict[str, Any]] = []
    last_user = max((i for i, item in enumerate(items) if isinstance(item, UserMessage)), default=-1)
    for index, item in enumerate(items):
        if isinstance(item, UserMessage):
            out.append({"type": "message", "role": "user", "content": _user_content(item, strict=index == last_user)})
        elif isinstance(item, AssistantMessage):
            out.append({"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": item.text}]})
        elif isinstance(item, Reasoning):
            if item.provider == WIRE and item.encrypted:
                summary = [{"type": "summary_text", "text": item.text}] if item.text else []
                out.append({"type": "reasoning", "summary": summary, "encrypted_content": item.encrypted})
            elif item.provider == RAW_REASONING and item.text:
                out.append({"type": "reasoning", "summary": [],
                            "content": [{"type": "reasoning_text", "text": item.text}]})
        elif isinstance(item, ToolCall):
            out.append({"type": "function_call", "call_id": item.call_id, "name": item.name,
                        "arguments": item.arguments})
        elif isinstance(item, ToolOutput):
            out.append({"type": "function_call_output", "call_id": item.call_id, "output": item.output})
    return out


def _user_content(item: UserMessage, *, strict: bool) -> list[dict[str, Any]]:
    """The text, then `input_image` parts carrying data URLs (an image that is no longer available: a note)."""
    try:
        images, notes = attachments(item.images, strict=strict)
    except ImageError as exc:
        # The same history would fail the same way on every attempt: not retryable.
        raise ModelError(f"cannot attach image: {exc}", retryable=False) from None
    text = "\n".join([*notes, item.text] if item.text else notes)
    content: list[dict[str, Any]] = []
    if text or not images:
        content.append({"type": "input_text", "text": text})
    content += [{"type": "input_image", "image_url": f"data:{media};base64,{data}"} for media, data in images]
    return content


# --------------------------------------------------------------------------- #
# Streaming events → internal stream events
# --------------------------------------------------------------------------- #


async def _parse_stream(response: httpx.Response, events: AsyncIterator[ServerSentEvent], url: str, model: str,
                        key_env: str | None) -> AsyncIterator[StreamEvent]:
    """Translate one Responses event stream.

    Text and reasoning summaries are forwarded delta by delta; tool calls and
    reasoning items are taken whole from `response.output_item.done`, which
    carries the final arguments / summary / encrypted content. A message whose
    text never arrived as deltas (some compatible servers send only the
    finished item) is forwarded from its done item, so no text is lost.
    """
    ctype = response.headers.get("content-type", "")
    if "text/event-stream" not in ctype:
        raise ModelError(f"{url} answered with {ctype or 'no content type'} instead of an event stream; "
                         "is the base URL an OpenAI Responses API /v1 endpoint?", retryable=False)
    streamed_text: set[Any] = set()  # message item ids whose text arrived as deltas
    arguments: dict[str, list[str]] = {}  # function call item id → argument deltas so far (joined once)
    saw_call = False
    refused = False
    sources: list[WebSource] = []  # pages a hosted web search returned or cited
    reasoned = False  # a summary delta was streamed: the next summary part starts a new paragraph
    async for sse in events:
        data = sse.data.strip()
        if not data:
            continue
        event = stream_json(data, url)
        kind = event.get("type") or sse.event

        if kind == "response.output_text.delta" or kind == "response.refusal.delta":
            # A refusal is the model's answer too; dropping it would leave an empty, puzzling reply.
            if event.get("delta"):
                refused = refused or kind == "response.refusal.delta"
                streamed_text.add(event.get("item_id"))
                yield TextDelta(event["delta"])
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            if event.get("delta"):
                reasoned = True
                yield ReasoningDelta(event["delta"])
        elif kind == "response.reasoning_summary_part.added":
            if reasoned:  # a later part of this item, or the first part of a later reasoning item
                yield ReasoningDelta(SUMMARY_SEPARATOR)
        elif kind == "response.function_call_arguments.delta":
            arguments.setdefault(str(event.get("item_id")), []).append(str(event.get("delta") or ""))
        elif kind == "response.output_item.done":
            item = event.get("item") or {}
            kind_of_item = item.get("type")
            if kind_of_item == "function_call":
                saw_call = True
                yield ToolCallReady(item.get("call_id") or f"call_{new_hex(12)}", item.get("name", ""),
                                    item.get("arguments") or "".join(arguments.get(str(item.get("id")), [])))
            elif kind_of_item == "reasoning":
                done = _reasoning_done(item)
                if done is not None:
                    yield done
            elif kind_of_item == "web_search_call":
                sources += _search_sources(item)
            elif kind_of_item == "message":
                parts = [part for part in item.get("content") or [] if isinstance(part, dict)]
                sources += _citations(parts)
                if not _was_streamed(item.get("id"), streamed_text):
                    refused = refused or any(part.get("type") == "refusal" for part in parts)
                    text = "".join(part.get("text") or part.get("refusal") or "" for part in parts)
                    if text:
                        yield TextDelta(text)
        elif kind == "response.completed":
            if sources:
                yield WebSources(sources)
            usage = (event.get("response") or {}).get("usage")
            if usage:
                yield UsageReport(openai_usage(usage, "input_tokens", "output_tokens"))
            yield Completed("tool_calls" if saw_call else "stop",
                            "the model refused the request (its refusal is shown as the reply)" if refused else None)
            return
        elif kind == "response.incomplete":
            if sources:
                yield WebSources(sources)
            body = event.get("response") or {}
            if body.get("usage"):
                yield UsageReport(openai_usage(body["usage"], "input_tokens", "output_tokens"))
            reason = str((body.get("incomplete_details") or {}).get("reason") or "max_output_tokens")
            yield Completed("length" if reason == "max_output_tokens" else reason, _incomplete_warning(reason))
            return
        elif kind in ("response.failed", "error"):
            if kind == "error":
                error = found if isinstance(found := event.get("error"), dict) else event
            else:
                error = (event.get("response") or {}).get("error") or {}
            message = str(error.get("message") or "the model response failed")
            raise stream_error(None, error.get("code"), message, url, model=model, key_env=key_env,
                               retry_after=_suggested_delay(message))
        # Everything else (created, in_progress, output_item.added, content_part.*, *.done that repeat what
        # the deltas said, and event types newer than this client) carries nothing we need.
    raise ModelError(f"the model stream from {url} ended before the reply was complete", retryable=True)


def _citations(parts: list[dict[str, Any]]) -> list[WebSource]:
    """The pages a message's text cites (`url_citation` annotations)."""
    return [WebSource(str(note["url"]), str(note.get("title") or ""), cited=True)
            for part in parts for note in part.get("annotations") or []
            if isinstance(note, dict) and note.get("type") == "url_citation" and isinstance(note.get("url"), str)]


def _search_sources(item: dict[str, Any]) -> list[WebSource]:
    """The pages a web search call returned (its action's `sources`, when the request included them)."""
    action = item.get("action")
    found = action.get("sources") if isinstance(action, dict) else None
    return [WebSource(str(source["url"])) for source in found or []
            if isinstance(source, dict) and isinstance(source.get("url"), str)]


def _was_streamed(item_id: Any, streamed: set[Any]) -> bool:
    # Without an id to match on, any streamed text is taken to be this item's: better than doubling it.
    return item_id in streamed if item_id else bool(streamed)


def _reasoning_done(item: dict[str, Any]) -> ReasoningDone | None:
    """A finished reasoning item, or None when it holds nothing worth recording or sending back.

    An item with raw `reasoning_text` content and no encrypted content (open-weight models behind a
    compatible server) is recorded with that text, to go back as the item's `content`."""
    parts = [p.get("text", "") for p in item.get("summary") or [] if isinstance(p, dict)]
    text = SUMMARY_SEPARATOR.join(p for p in parts if p)
    encrypted = item.get("encrypted_content")
    raw = "".join(str(p.get("text") or "") for p in item.get("content") or []
                  if isinstance(p, dict) and p.get("type") == "reasoning_text")
    if raw and not encrypted:
        return ReasoningDone(raw, provider=RAW_REASONING, item_id=item.get("id"))
    if not text and not encrypted:
        return None
    return ReasoningDone(text, encrypted=encrypted, provider=WIRE, item_id=item.get("id"))


def _incomplete_warning(reason: str) -> str:
    """Every way a response can end incomplete is named: a cut-off or a filter is never silent."""
    if reason == "max_output_tokens":
        return "the model's reply was cut off at its output token limit (incomplete: max_output_tokens)"
    if reason == "content_filter":
        return "the provider's content filter stopped the reply (incomplete: content_filter)"
    return f"the model's reply is incomplete (reason: {reason})"


def _suggested_delay(message: str) -> float | None:
    match = _TRY_AGAIN.search(message)
    if not match:
        return None
    value = float(match.group(1))
    return value / 1000 if match.group(2).lower() == "ms" else value

