"""OpenAI Chat Completions over httpx + SSE: OpenAI, OpenRouter, vLLM, Ollama, llama.cpp, LM Studio, DeepSeek,
Mistral.

The servers behind this wire differ in ways a client must follow, or a tool loop breaks:

* Reasoning comes as `reasoning_content` (DeepSeek, vLLM), `reasoning` (Ollama, OpenRouter, newer vLLM),
  OpenRouter's structured `reasoning_details`, or Mistral's `thinking` content parts. DeepSeek's thinking
  mode answers 400 when an assistant tool-call turn comes back without its `reasoning_content`, and
  OpenRouter asks for `reasoning_details` back verbatim, so the reply's reasoning is recorded with the field
  it came in (provider "openai_chat") and sent back under that same field.
* `content` is a string, or (Mistral, Magistral) a list of typed parts: `text` and `thinking`.
* A refusal (`delta.refusal`) or a `content_filter` finish is the model's answer: shown, recorded, warned.
* An error inside a 200 stream (OpenRouter's `{"error": {"code": 400, ...}}` chunk) is classified like the
  same error over HTTP: a 400 is not retried.
* Calls stream one after another, their fragments keyed by `index`: a call is complete when the next index
  starts (or the reply finishes), and is handed on then, so the engine can start a read while the rest of the
  reply streams. A fragment that adds to a call after a later one began is a malformed stream (retried).

Every streamed piece is collected in a list and joined once: a multi-megabyte tool argument in tiny fragments
assembles in linear time.
"""

from __future__ import annotations

import json
from dataclasses import field
from typing import Any, AsyncIterator

import httpx
from httpx_sse import ServerSentEvent

from auger.ids import new_hex
from auger.lazy_dataclass import Deferred, dataclass
from auger.models.base import (
    Completed, ModelError, ModelRequest, ReasoningDelta, ReasoningDone, StreamEvent, TextDelta, ToolCallReady,
    UsageReport,
)
from auger.models.http import SseModelClient, openai_usage, stream_error, stream_json
from auger.models.images import ImageError, attachments
from auger.protocol.items import AssistantMessage, Reasoning, ToolCall, ToolOutput, UserMessage

WIRE = "openai_chat"  # the `provider` stamped on Reasoning items this client can send back
_REASONING_FIELDS = ("reasoning_content", "reasoning")


class OpenAIChatClient(SseModelClient):
    def __init__(self, *, provider: str, model: str, base_url: str, api_key: str | None,
                 key_env: str | None = None, idle_timeout: float = 300.0, structured_output: bool = True) -> None:
        super().__init__(provider=provider, model=model, url=base_url.rstrip("/") + "/chat/completions",
                         headers={"authorization": f"Bearer {api_key}"} if api_key else {}, key_env=key_env,
                         idle_timeout=idle_timeout)
        self.base_url = base_url.rstrip("/")  # where models/context_window.py asks for the model's window
        # whether the server takes `response_format: json_schema` (OpenAI, vLLM, llama.cpp, Ollama, LM Studio
        # do; some servers answer 400): the provider's `structured_output` says (models/registry.py)
        self.structured_output = structured_output

    def parse_stream(self, response: httpx.Response, events: AsyncIterator[ServerSentEvent]
                     ) -> AsyncIterator[StreamEvent]:
        return _parse_stream(response, events, self.url, self.model, self._key_env)

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        """The request body. Raises ModelError (not retryable) for an image that cannot be sent."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": to_messages(request),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = [
                {"type": "function",
                 "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
                for t in request.tools
            ]
            body["tool_choice"] = request.tool_choice
            if not request.parallel_tools:  # sent only then: not every compatible server knows the field
                body["parallel_tool_calls"] = False
        if request.output is not None and self.structured_output:
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": request.output.name, "schema": request.output.schema, "strict": request.output.strict}}
        return body


@dataclass
class _Call(Deferred):
    id: str = ""
    name: list[str] = field(default_factory=list)
    arguments: list[str] = field(default_factory=list)


@dataclass
class _Reasoning(Deferred):
    """The reply's reasoning and how to send it back: the field it came in, OpenRouter's details."""

    parts: list[str] = field(default_factory=list)
    source: str | None = None  # the delta field it came in
    details: list[Any] = field(default_factory=list)

    def done(self) -> ReasoningDone | None:
        if self.source is None and not self.details:
            return None  # nothing this wire can send back (Mistral's thinking): recorded as plain reasoning
        state: dict[str, Any] = {"field": self.source}
        if self.details:
            state["details"] = self.details
        return ReasoningDone("".join(self.parts), encrypted=json.dumps(state, ensure_ascii=False), provider=WIRE)


async def _parse_stream(response: httpx.Response, events: AsyncIterator[ServerSentEvent], url: str, model: str,
                        key_env: str | None) -> AsyncIterator[StreamEvent]:
    calls: dict[int, _Call] = {}
    ready: set[int] = set()  # indexes of the calls handed on
    reasoning = _Reasoning()
    refused = False
    answered = False  # a chunk carried a choice
    finish: str | None = None
    done = False
    ctype = response.headers.get("content-type", "")
    if "text/event-stream" not in ctype:
        raise ModelError(f"{url} answered with {ctype or 'no content type'} instead of an event stream; "
                         "is the base URL an OpenAI-compatible /v1 endpoint?", retryable=False)
    async for sse in events:
        data = sse.data.strip()
        if not data:
            continue
        if data == "[DONE]":
            done = True
            break
        chunk = stream_json(data, url)
        if chunk.get("error"):  # some servers report failures inside a 200 stream
            raise _chunk_error(chunk["error"], url, model, key_env)
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            yield UsageReport(openai_usage(usage, "prompt_tokens", "completion_tokens"))
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            answered = True
            delta = choice.get("delta") or {}
            for event in _reasoning_deltas(delta, reasoning):
                yield event
            for kind, text in _content_parts(delta.get("content")):
                if kind == "text":
                    yield TextDelta(text)
                else:
                    reasoning.parts.append(text)
                    yield ReasoningDelta(text)
            if isinstance(delta.get("refusal"), str) and delta["refusal"]:
                refused = True  # the refusal is the model's answer: shown and recorded as its text
                yield TextDelta(delta["refusal"])
            for frag in delta.get("tool_calls") or []:
                index = frag.get("index", len(calls))
                fn = frag.get("function") or {}
                if index in ready and (fn.get("name") or fn.get("arguments")):
                    raise ModelError(f"malformed stream event from {url} (tool call {index} continued after a "
                                     "later one began)", retryable=True)
                for earlier in sorted(i for i in calls if i < index and i not in ready):
                    ready.add(earlier)  # the next call began: this one is complete
                    yield _ready(calls[earlier])
                slot = calls.setdefault(index, _Call())
                if frag.get("id"):
                    slot.id = frag["id"]
                if fn.get("name"):
                    slot.name.append(fn["name"])
                if fn.get("arguments"):
                    slot.arguments.append(fn["arguments"])
            if choice.get("finish_reason"):
                finish = choice["finish_reason"]
                if finish == "error":  # an error chunk without an error object (OpenRouter)
                    raise stream_error(None, None, "the provider ended the reply with finish_reason 'error'",
                                       url, model=model, key_env=key_env)
                for index in sorted(set(calls) - ready):  # the reply is finished: so is every call
                    ready.add(index)
                    yield _ready(calls[index])
    if not done and finish is None:
        raise ModelError(f"the model stream from {url} ended before the reply was complete", retryable=True)
    if not answered:  # only empty `choices`: no reply at all, not an empty one
        raise ModelError(f"the model stream from {url} ended without a reply (no choice in any chunk)",
                         retryable=True)
    state = reasoning.done()
    if state is not None:
        yield state
    for index in sorted(set(calls) - ready):
        yield _ready(calls[index])
    yield Completed(finish or "stop", _ending_warning(finish, refused))


def _ready(slot: _Call) -> ToolCallReady:
    """`slot` is complete: the call as the engine gets it (an id made up where the server sent none)."""
    if not slot.id:
        slot.id = f"call_{new_hex(12)}"
    return ToolCallReady(slot.id, "".join(slot.name), "".join(slot.arguments))


def _chunk_error(err: Any, url: str, model: str, key_env: str | None) -> ModelError:
    """An error chunk: `{"error": {"code": 400, "message": ...}}` (OpenRouter), or a bare message."""
    if not isinstance(err, dict):
        return stream_error(None, None, str(err), url, model=model, key_env=key_env)
    code = err.get("code")
    kind = err.get("type") or (code if isinstance(code, str) and not code.isdigit() else None)
    status = int(code) if isinstance(code, str) and code.isdigit() else code
    return stream_error(status, kind, err.get("message") or str(err)[:300], url, model=model, key_env=key_env)


def _reasoning_deltas(delta: dict[str, Any], reasoning: _Reasoning) -> list[ReasoningDelta]:
    """Reasoning text as `reasoning_content` / `reasoning`, and OpenRouter's `reasoning_details` kept verbatim.

    OpenRouter sends the same text both as `reasoning` and inside the details; it is shown once."""
    shown: list[ReasoningDelta] = []
    for name in _REASONING_FIELDS:
        text = delta.get(name)
        if isinstance(text, str) and text:
            reasoning.source = reasoning.source or name
            reasoning.parts.append(text)
            shown.append(ReasoningDelta(text))
            break
    details = delta.get("reasoning_details")
    if isinstance(details, list):
        reasoning.details.extend(details)
        if not shown:
            for detail in details:
                text = detail.get("text") or detail.get("summary") if isinstance(detail, dict) else None
                if isinstance(text, str) and text:
                    reasoning.parts.append(text)
                    shown.append(ReasoningDelta(text))
    return shown


def _content_parts(content: Any) -> list[tuple[str, str]]:
    """("text" | "thinking", text) pieces of a delta's content: a string, or Mistral's list of typed parts
    (`{"type": "text", "text": ...}`, `{"type": "thinking", "thinking": [{"type": "text", "text": ...}]}`)."""
    if isinstance(content, str):
        return [("text", content)] if content else []
    if not isinstance(content, list):
        return []
    pieces: list[tuple[str, str]] = []
    for part in content:
        if isinstance(part, str):
            pieces.append(("text", part))
        elif isinstance(part, dict) and part.get("type") == "thinking":
            inner = part.get("thinking")
            inner = inner if isinstance(inner, list) else [{"text": inner}]
            pieces += [("thinking", p["text"]) for p in inner if isinstance(p, dict) and isinstance(p.get("text"), str)]
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            pieces.append(("text", part["text"]))
    return [(kind, text) for kind, text in pieces if text]


def _ending_warning(finish: str | None, refused: bool) -> str | None:
    if refused:
        return "the model refused the request (its refusal is shown as the reply)"
    if finish == "content_filter":
        return "the provider's content filter stopped the reply (finish_reason: content_filter)"
    return None


def to_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """History items → Chat Completions messages; an assistant's reasoning, text and tool calls share one
    message, the reasoning under the field it came in."""
    items = request.items
    messages: list[dict[str, Any]] = [{"role": "system", "content": request.instructions}]
    last_user = max((i for i, item in enumerate(items) if isinstance(item, UserMessage)), default=-1)
    assistant: dict[str, Any] | None = None
    for index, item in enumerate(items):
        if isinstance(item, (AssistantMessage, ToolCall, Reasoning)):
            if assistant is None:
                assistant = {"role": "assistant", "content": None}
                messages.append(assistant)
            if isinstance(item, AssistantMessage):
                assistant["content"] = (assistant["content"] or "") + item.text
            elif isinstance(item, ToolCall):
                assistant.setdefault("tool_calls", []).append(
                    {"id": item.call_id, "type": "function",
                     "function": {"name": item.name, "arguments": item.arguments}})
            else:
                _add_reasoning(assistant, item)
            continue
        assistant = None
        if isinstance(item, ToolOutput):
            messages.append({"role": "tool", "tool_call_id": item.call_id, "content": item.output})
        elif isinstance(item, UserMessage):
            messages.append({"role": "user", "content": _user_content(item, strict=index == last_user)})
    for message in messages:
        if message["role"] == "assistant" and not message.get("tool_calls"):
            for name in (*_REASONING_FIELDS, "reasoning_details"):  # needed back only around tool calls
                message.pop(name, None)
    # An assistant message made only of reasoning carries nothing the API accepts.
    return [m for m in messages if not (m["role"] == "assistant" and m["content"] is None
                                        and not m.get("tool_calls"))]


def _add_reasoning(assistant: dict[str, Any], item: Reasoning) -> None:
    """Reasoning this wire recorded goes back as it came; any other (another wire's, plain text) is dropped.

    Only a reply that called tools keeps it (see to_messages): DeepSeek and OpenRouter require it there and
    ignore it elsewhere, and a local server would spend context on it."""
    if item.provider != WIRE or not item.encrypted:
        return
    try:
        state = json.loads(item.encrypted)
    except ValueError:
        return
    if not isinstance(state, dict):
        return
    name = state.get("field")
    if name in _REASONING_FIELDS:
        assistant[name] = assistant.get(name, "") + item.text
    details = state.get("details")
    if isinstance(details, list) and details:
        assistant.setdefault("reasoning_details", []).extend(details)


def _user_content(item: UserMessage, *, strict: bool) -> str | list[dict[str, Any]]:
    """Plain text, or with images: the text part, then `image_url` parts carrying data URLs."""
    if not item.images:
        return item.text
    try:
        images, notes = attachments(item.images, strict=strict)
    except ImageError as exc:
        raise ModelError(f"cannot attach image: {exc}", retryable=False) from None
    text = "\n".join([*notes, item.text] if item.text else notes)
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    parts += [{"type": "image_url", "image_url": {"url": f"data:{media};base64,{data}"}} for media, data in images]
    return parts or item.text

