"""OpenAI Chat Completions over httpx + SSE: OpenAI, OpenRouter, vLLM, Ollama, llama.cpp, LM Studio."""

from __future__ import annotations

import json
import uuid
from typing import Any, AsyncIterator

import httpx
from httpx_sse import EventSource

from auger.models.base import (
    Completed, ModelError, ModelRequest, ReasoningDelta, StreamEvent, TextDelta, ToolCallReady, UsageReport,
)
from auger.models.http import SseModelClient, openai_usage
from auger.protocol.items import AssistantMessage, Reasoning, ToolCall, ToolOutput, UserMessage


class OpenAIChatClient(SseModelClient):
    def __init__(self, *, provider: str, model: str, base_url: str, api_key: str | None,
                 key_env: str | None = None, idle_timeout: float = 300.0) -> None:
        super().__init__(provider=provider, model=model, url=base_url.rstrip("/") + "/chat/completions",
                         headers={"authorization": f"Bearer {api_key}"} if api_key else {}, key_env=key_env,
                         idle_timeout=idle_timeout)

    def parse_stream(self, response: httpx.Response) -> AsyncIterator[StreamEvent]:
        return _parse_stream(response, self.url)

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
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
        return body


async def _parse_stream(response: httpx.Response, url: str) -> AsyncIterator[StreamEvent]:
    calls: dict[int, dict[str, str]] = {}
    finish: str | None = None
    done = False
    source = EventSource(response)
    ctype = response.headers.get("content-type", "")
    if "text/event-stream" not in ctype:
        raise ModelError(f"{url} answered with {ctype or 'no content type'} instead of an event stream; "
                         "is the base URL an OpenAI-compatible /v1 endpoint?", retryable=False)
    async for sse in source.aiter_sse():
        data = sse.data.strip()
        if not data:
            continue
        if data == "[DONE]":
            done = True
            break
        try:
            chunk = json.loads(data)
        except ValueError:
            raise ModelError(f"malformed stream chunk from {url}: {data[:200]}", retryable=True) from None
        if "error" in chunk:  # some servers report failures inside a 200 stream
            err = chunk["error"]
            message = err.get("message", str(err)) if isinstance(err, dict) else str(err)
            raise ModelError(f"{url}: {message}", retryable=True)
        usage = chunk.get("usage")
        if usage:
            yield UsageReport(openai_usage(usage, "prompt_tokens", "completion_tokens"))
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if reasoning:
                yield ReasoningDelta(reasoning)
            if delta.get("content"):
                yield TextDelta(delta["content"])
            for frag in delta.get("tool_calls") or []:
                slot = calls.setdefault(frag.get("index", len(calls)), {"id": "", "name": "", "arguments": ""})
                if frag.get("id"):
                    slot["id"] = frag["id"]
                fn = frag.get("function") or {}
                if fn.get("name"):
                    slot["name"] += fn["name"]
                if fn.get("arguments"):
                    slot["arguments"] += fn["arguments"]
            if choice.get("finish_reason"):
                finish = choice["finish_reason"]
    if not done and finish is None:
        raise ModelError(f"the model stream from {url} ended before the reply was complete", retryable=True)
    for index in sorted(calls):
        slot = calls[index]
        yield ToolCallReady(slot["id"] or f"call_{uuid.uuid4().hex[:12]}", slot["name"], slot["arguments"])
    yield Completed(finish or "stop")



def to_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """History items → Chat Completions messages; an assistant text and its tool calls share one message."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": request.instructions}]
    assistant: dict[str, Any] | None = None
    for item in request.items:
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
            continue  # reasoning text is not sent back over Chat Completions
        assistant = None
        if isinstance(item, ToolOutput):
            messages.append({"role": "tool", "tool_call_id": item.call_id, "content": item.output})
        elif isinstance(item, UserMessage):
            messages.append({"role": "user", "content": item.text})
    # An assistant message made only of reasoning carries nothing the API accepts.
    return [m for m in messages if not (m["role"] == "assistant" and m["content"] is None
                                        and not m.get("tool_calls"))]
