"""A scripted mock of the OpenAI Responses HTTP API (``POST /v1/responses``), for tests.

The companion of :mod:`tests.support.mock_openai` (Chat Completions), for the
same reason: the engine must be exercised over a real socket, through httpx,
the SSE parser and the retry logic, with the failures that happen in practice.

Usage::

    from tests.support.mock_responses import Fault, MockResponsesServer, Reply, ToolCall

    with MockResponsesServer([
        Reply(reasoning_summary="Plan: list files", tool_calls=[ToolCall("shell", {"command": "ls"})]),
        Fault.status(429, retry_after="1"),
        Reply(text="done"),
    ]) as server:
        client = OpenAIResponsesClient(provider="openai", model="m", base_url=server.base_url, api_key="k")
        ...
        assert server.requests[1].input[-1]["type"] == "function_call_output"

Every ``POST /v1/responses`` consumes the next *step* of the script:

* :class:`Reply` -- a response streamed as the real API streams it: ``event:
  <type>`` + ``data: <json>`` SSE events, each with its ``type`` and a
  ``sequence_number``, from ``response.created`` to ``response.completed`` (or
  ``response.incomplete``). Reasoning (a summary and/or encrypted content),
  text and function calls come out as separate output items, in that order.
  With ``"stream": false`` the final response object is returned as JSON.
* :class:`Fault` -- an HTTP error status, a ``response.failed`` or ``error``
  event inside a 200 stream, a stream dropped or ended early, or a stall.
* :class:`Raw` -- exactly the given events (for servers that stream less, or
  more, than OpenAI does: done-only items, unknown event types).
* a callable ``step(request_body) -> Reply | Fault | Raw`` -- computes the answer from
  what the client actually sent.

A :class:`Reply` may run hosted web searches first (``searches``: ``web_search_call`` output
items, with their sources when the request asked for ``web_search_call.action.sources``) and
cite pages in its text (``citations``: ``url_citation`` annotations), as the real API does when
the request offers the ``web_search`` tool; a reply that searches when the request offers no
such tool is a script error (500).

When the script runs out the server answers 500 ``"mock script exhausted"``.

The server also checks what the real API checks about a stateless request
(``validate=True``, the default) and answers with the real API's errors: a
``previous_response_id`` or an input item ``id`` with ``store: false`` (404, the
"Items are not persisted" error a client gets for sending reasoning ids back), a
reasoning input item without ``encrypted_content`` under ``store: false``, a
``function_call_output`` without its ``function_call`` and vice versa. A client
bug then fails the test like it would fail in production, instead of passing
against a lenient mock. Rejected requests do not consume a script step.

Standard library only.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Union

from tests.support.mock_http import (
    EXHAUSTED_MESSAGE,  # noqa: F401 - re-exported: part of this module's API
    MockHandler,
    MockServer,
    fragments,
    json_schema_format_problem,
    openai_tool_choice_problem,
    split_text,
    sse_event,
    wire_json,
)

__all__ = [
    "RESPONSES_PATH",
    "DEFAULT_MODEL",
    "Fault",
    "MockResponsesServer",
    "Raw",
    "RecordedRequest",
    "Reply",
    "Step",
    "Citation",
    "ToolCall",
    "WebSearch",
    "response_events",
    "validate_request",
]

RESPONSES_PATH = "/v1/responses"
DEFAULT_MODEL = "mock-model"

HOSTED_SEARCH = ("web_search", "web_search_preview")  # the hosted search tool's types
INCLUDES = ("reasoning.encrypted_content", "web_search_call.action.sources", "message.output_text.logprobs",
            "file_search_call.results", "code_interpreter_call.outputs")
_USAGE_KEYS = frozenset({"input_tokens", "output_tokens", "total_tokens", "cached_tokens", "reasoning_tokens"})
_INCOMPLETE_REASONS = ("max_output_tokens", "content_filter")


# --------------------------------------------------------------------------- #
# Script steps
# --------------------------------------------------------------------------- #


@dataclass
class ToolCall:
    """One function call the mock model makes.

    ``arguments`` given as a dict is JSON-encoded; a str is sent verbatim (so a
    test can send malformed JSON). ``call_id`` defaults to ``call_<n>``, numbered
    per server when the reply is served.
    """

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    call_id: str | None = None

    @property
    def arguments_json(self) -> str:
        return wire_json(self.arguments)


@dataclass
class WebSearch:
    """A hosted web search the mock model runs before it answers (a ``web_search_call`` item)."""

    query: str
    sources: list[str] = field(default_factory=list)  # the pages it found


@dataclass
class Citation:
    """A page the reply's text cites (a ``url_citation`` annotation over the whole text)."""

    url: str
    title: str = ""


@dataclass
class Reply:
    """A successful response.

    ``reasoning_summary`` (one string, or a list for several summary parts) and
    ``encrypted`` make a reasoning output item; ``encrypted`` defaults to an
    opaque blob whenever the reply reasons and the request asked for
    ``reasoning.encrypted_content``, as the real API does. ``usage`` may override
    ``input_tokens``, ``output_tokens``, ``total_tokens``, ``cached_tokens`` and
    ``reasoning_tokens``; the rest are estimated. ``incomplete`` ends the reply
    with ``response.incomplete`` and that reason instead of ``response.completed``.
    ``delay`` is slept before responding; ``chunk_chars`` sizes the deltas.
    """

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning_summary: str | list[str] | None = None
    encrypted: str | None = None
    usage: dict[str, int] | None = None
    incomplete: str | None = None
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
        if self.citations and not self.text:
            raise ValueError("citations need a text to annotate")
        if self.incomplete is not None and self.incomplete not in _INCOMPLETE_REASONS:
            raise ValueError(f"incomplete must be one of {_INCOMPLETE_REASONS}, got {self.incomplete!r}")
        if self.usage is not None and set(self.usage) - _USAGE_KEYS:
            raise ValueError(f"unknown usage key(s) {sorted(set(self.usage) - _USAGE_KEYS)}; "
                             f"allowed: {sorted(_USAGE_KEYS)}")

    @property
    def summary_parts(self) -> list[str]:
        if self.reasoning_summary is None:
            return []
        if isinstance(self.reasoning_summary, str):
            return [self.reasoning_summary]
        return list(self.reasoning_summary)


# Drops and hangs need *some* reply to cut short: long enough to give many events.
_PARTIAL = Reply(text="This reply is going to be cut off before it is complete, mid-stream.")


@dataclass
class Fault:
    """A failure to inject instead of a reply. Build with the class methods.

    * ``status``  -- an HTTP error with an OpenAI-shaped JSON body.
    * ``failed``  -- a 200 stream: ``after_events`` events of ``reply``, then
      ``response.failed`` whose ``response.error`` has ``code`` and ``message``.
    * ``error``   -- the same, but ending with a bare ``error`` event.
    * ``drop``    -- ``after_events`` events of ``reply``, then the socket closes.
    * ``end``     -- ``after_events`` events, then the body ends cleanly, without
      ``response.completed``/``incomplete``/``failed`` (a proxy cutting a stream at a message boundary).
    * ``hang``    -- ``after_events`` events, then silence for ``seconds`` (or
      until the server stops), then the socket closes.
    """

    kind: str
    code: int = 200
    body: dict[str, Any] | str | None = None
    message: str | None = None
    retry_after: str | int | float | None = None
    headers: dict[str, str] = field(default_factory=dict)
    error_code: str | None = None
    after_events: int = 0
    seconds: float = 0.0
    reply: Reply | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("status", "failed", "error", "drop", "end", "hang"):
            raise ValueError(f"unknown fault kind {self.kind!r}")
        if self.after_events < 0:
            raise ValueError("after_events must be >= 0")

    @classmethod
    def status(cls, code: int, body: dict[str, Any] | str | None = None,
               retry_after: str | int | float | None = None, headers: Mapping[str, str] | None = None, *,
               message: str | None = None) -> Fault:
        """Answer with HTTP ``code``; ``body`` None gives the real API's error body for that code."""
        if not 100 <= int(code) <= 599:
            raise ValueError(f"bad HTTP status {code!r}")
        return cls(kind="status", code=int(code), body=body, message=message, retry_after=retry_after,
                   headers=dict(headers or {}))

    @classmethod
    def context_length(cls, message: str | None = None, *, in_stream: bool = False) -> Fault:
        """The context-window overflow: the real API's HTTP 400, or (``in_stream``) a ``response.failed``."""
        message = message or ("Your input exceeds the context window of this model. "
                              "Please adjust your input and try again.")
        if in_stream:
            return cls.failed("context_length_exceeded", message)
        return cls.status(400, body={"error": {"message": message, "type": "invalid_request_error",
                                               "param": "input", "code": "context_length_exceeded"}})

    @classmethod
    def failed(cls, code: str | None = "server_error", message: str | None = None, *, after_events: int = 2,
               reply: Reply | None = None) -> Fault:
        """``response.failed`` after ``after_events`` events (``response.created`` and ``in_progress`` by default)."""
        return cls(kind="failed", error_code=code, message=message, after_events=after_events, reply=reply)

    @classmethod
    def error_event(cls, code: str | None = "server_error", message: str | None = None, *, after_events: int = 2,
                    reply: Reply | None = None) -> Fault:
        """A bare ``error`` event (``{"type": "error", "code", "message", "param"}``) ending the stream."""
        return cls(kind="error", error_code=code, message=message, after_events=after_events, reply=reply)

    @classmethod
    def drop(cls, after_events: int = 4, reply: Reply | None = None) -> Fault:
        """Close the connection after ``after_events`` SSE events."""
        return cls(kind="drop", after_events=after_events, reply=reply)

    @classmethod
    def end_early(cls, after_events: int = 4, reply: Reply | None = None) -> Fault:
        """End the body properly after ``after_events`` SSE events, before any terminal event."""
        return cls(kind="end", after_events=after_events, reply=reply)

    @classmethod
    def hang(cls, after_events: int = 2, seconds: float = 30.0, reply: Reply | None = None) -> Fault:
        """Stall after ``after_events`` SSE events; exercises the client's idle (read) timeout."""
        return cls(kind="hang", after_events=after_events, seconds=float(seconds), reply=reply)


@dataclass
class Raw:
    """Stream exactly these events (a ``sequence_number`` is added where missing), then end the body;
    a str is sent verbatim as an event's ``data:`` text (JSON no real server sends, or not JSON at all).

    Nothing is checked or completed: a script without a terminal event tests exactly that.
    """

    events: list[dict[str, Any] | str]


Step = Union[Reply, Fault, Raw, Callable[[dict], Union[Reply, Fault, Raw]]]


# --------------------------------------------------------------------------- #
# Wire format (pure functions, so tests can compare against them directly)
# --------------------------------------------------------------------------- #


def response_usage(reply: Reply, request_bytes: int) -> dict[str, Any]:
    """The Responses usage object; estimated (~4 chars per token) unless the reply overrides it."""
    override = reply.usage or {}
    generated = len(reply.text) + sum(len(tc.arguments_json) for tc in reply.tool_calls)
    reasoning = override.get("reasoning_tokens", sum(len(p) for p in reply.summary_parts) // 4)
    input_tokens = override.get("input_tokens", request_bytes // 4)
    output_tokens = override.get("output_tokens", generated // 4 + 1 + reasoning)
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": override.get("cached_tokens", 0)},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": override.get("total_tokens", input_tokens + output_tokens),
    }


def response_events(reply: Reply, *, response_id: str, model: str, created: int, call_ids: list[str],
                    include_encrypted: bool, usage: dict[str, Any],
                    include_sources: bool = False) -> list[dict[str, Any]]:
    """The events of one streamed response, in order, each with ``type`` and ``sequence_number``.

    ``call_ids`` are the resolved call ids of ``reply.tool_calls``. Item ids
    (``rs_``, ``msg_``, ``fc_``) are derived from ``response_id``.
    """
    events: list[dict[str, Any]] = []
    output: list[dict[str, Any]] = []
    final_status = "incomplete" if reply.incomplete else "completed"

    def emit(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": len(events), **fields})

    def response(status: str) -> dict[str, Any]:
        return {
            "id": response_id, "object": "response", "created_at": created, "status": status,
            "error": None,
            "incomplete_details": {"reason": reply.incomplete} if status == "incomplete" else None,
            "model": model, "output": [dict(item) for item in output] if status != "in_progress" else [],
            "parallel_tool_calls": True, "store": False, "tool_choice": "auto",
            "usage": usage if status in ("completed", "incomplete") else None,
        }

    emit("response.created", response=response("in_progress"))
    emit("response.in_progress", response=response("in_progress"))
    size = reply.chunk_chars
    suffix = response_id.removeprefix("resp_")

    parts = reply.summary_parts
    encrypted = reply.encrypted
    if encrypted is None and parts and include_encrypted:
        encrypted = f"gAAAAA-mock-encrypted-{suffix}"
    if parts or encrypted:
        index, item_id = len(output), f"rs_{suffix}"
        emit("response.output_item.added", output_index=index,
             item={"id": item_id, "type": "reasoning", "summary": []})
        for s, part in enumerate(parts):
            common = {"item_id": item_id, "output_index": index, "summary_index": s}
            emit("response.reasoning_summary_part.added", **common, part={"type": "summary_text", "text": ""})
            for delta in split_text(part, size):
                emit("response.reasoning_summary_text.delta", **common, delta=delta)
            emit("response.reasoning_summary_text.done", **common, text=part)
            emit("response.reasoning_summary_part.done", **common, part={"type": "summary_text", "text": part})
        item = {"id": item_id, "type": "reasoning", "summary": [{"type": "summary_text", "text": p} for p in parts]}
        if include_encrypted:
            item["encrypted_content"] = encrypted
        output.append(item)
        emit("response.output_item.done", output_index=index, item=item)

    for n, search in enumerate(reply.searches):
        index, item_id = len(output), f"ws_{suffix}_{n}"
        emit("response.output_item.added", output_index=index,
             item={"id": item_id, "type": "web_search_call", "status": "in_progress"})
        for stage in ("in_progress", "searching", "completed"):
            emit(f"response.web_search_call.{stage}", output_index=index, item_id=item_id)
        action: dict[str, Any] = {"type": "search", "query": search.query}
        if include_sources:
            action["sources"] = [{"type": "url", "url": url} for url in search.sources]
        item = {"id": item_id, "type": "web_search_call", "status": "completed", "action": action}
        output.append(item)
        emit("response.output_item.done", output_index=index, item=item)

    if reply.text:
        index, item_id = len(output), f"msg_{suffix}"
        emit("response.output_item.added", output_index=index,
             item={"id": item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []})
        common = {"item_id": item_id, "output_index": index, "content_index": 0}
        emit("response.content_part.added", **common, part={"type": "output_text", "text": "", "annotations": []})
        for delta in split_text(reply.text, size):
            emit("response.output_text.delta", **common, delta=delta, logprobs=[])
        annotations = [{"type": "url_citation", "start_index": 0, "end_index": len(reply.text), "url": c.url,
                        "title": c.title} for c in reply.citations]
        for n, annotation in enumerate(annotations):
            emit("response.output_text.annotation.added", **common, annotation_index=n, annotation=annotation)
        emit("response.output_text.done", **common, text=reply.text, logprobs=[])
        part = {"type": "output_text", "text": reply.text, "annotations": annotations}
        emit("response.content_part.done", **common, part=part)
        item = {"id": item_id, "type": "message", "status": final_status, "role": "assistant", "content": [part]}
        output.append(item)
        emit("response.output_item.done", output_index=index, item=item)

    for n, (call, call_id) in enumerate(zip(reply.tool_calls, call_ids)):
        index, item_id = len(output), f"fc_{suffix}_{n}"
        args = call.arguments_json
        emit("response.output_item.added", output_index=index,
             item={"id": item_id, "type": "function_call", "status": "in_progress", "arguments": "",
                   "call_id": call_id, "name": call.name})
        for delta in fragments(args, size):
            emit("response.function_call_arguments.delta", item_id=item_id, output_index=index, delta=delta)
        emit("response.function_call_arguments.done", item_id=item_id, output_index=index, arguments=args)
        item = {"id": item_id, "type": "function_call", "status": "completed", "arguments": args,
                "call_id": call_id, "name": call.name}
        output.append(item)
        emit("response.output_item.done", output_index=index, item=item)

    emit(f"response.{final_status}", response=response(final_status))
    return events


def validate_request(body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """``(status, error body)`` the real API would answer for a bad stateless request, or None."""
    if not body.get("model"):
        return 400, _error("Missing required parameter: 'model'.", "invalid_request_error",
                           "missing_required_parameter", "model")
    choice_problem = openai_tool_choice_problem(body, ("name",))
    if choice_problem:
        return 400, _error(choice_problem, "invalid_request_error", "invalid_value", "tool_choice")
    text_format = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
    if isinstance(text_format, dict) and text_format.get("type") == "json_schema":
        format_problem = json_schema_format_problem(text_format, "text.format")
        if format_problem:
            return 400, _error(format_problem, "invalid_request_error", "invalid_value", "text.format.schema")
    for n, tool in enumerate(body.get("tools") or []):
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind not in ("function", *HOSTED_SEARCH):
            return 400, _error(f"Invalid value: '{kind}'. Supported values are: 'function', 'web_search', ...",
                               "invalid_request_error", "invalid_value", f"tools[{n}].type")
        if kind == "function" and not tool.get("name"):
            return 400, _error(f"Missing required parameter: 'tools[{n}].name'.", "invalid_request_error",
                               "missing_required_parameter", f"tools[{n}].name")
    unknown = [i for i in body.get("include") or [] if i not in INCLUDES]
    if unknown:
        return 400, _error(f"Invalid value: '{unknown[0]}'.", "invalid_request_error", "invalid_value", "include")
    items = body.get("input")
    if not isinstance(items, list):
        return None  # a plain string input is valid
    stateless = body.get("store") is False
    if stateless and body.get("previous_response_id"):
        return 400, _error(f"Previous response with id '{body['previous_response_id']}' not found.",
                           "invalid_request_error", "previous_response_not_found", "previous_response_id")
    calls: set[str] = set()
    outputs: set[str] = set()
    for n, item in enumerate(items):
        if not isinstance(item, dict):
            return 400, _error(f"Invalid type for 'input[{n}]'.", "invalid_request_error", "invalid_type",
                               f"input[{n}]")
        kind = item.get("type", "message")
        if stateless and item.get("id"):
            return 404, _error(
                f"Item with id '{item['id']}' not found. Items are not persisted when `store` is set to false. "
                "Try again with `store` set to true, or remove this item from your input.",
                "invalid_request_error", None, "input")
        if kind == "reasoning" and stateless and not item.get("encrypted_content") and not item.get("content"):
            return 400, _error(f"Missing required parameter: 'input[{n}].encrypted_content' (reasoning items "
                               "need it when `store` is false).", "invalid_request_error",
                               "missing_required_parameter", f"input[{n}].encrypted_content")
        if kind == "function_call":
            calls.add(str(item.get("call_id")))
        elif kind == "function_call_output":
            call_id = str(item.get("call_id"))
            if call_id not in calls:
                return 400, _error(f"No tool call found for function call output with call_id {call_id}.",
                                   "invalid_request_error", None, "input")
            outputs.add(call_id)
    unanswered = sorted(calls - outputs)
    if unanswered:
        return 400, _error(f"No tool output found for function call {unanswered[0]}.", "invalid_request_error",
                           None, "input")
    return None


def default_error(code: int, model: str) -> dict[str, Any]:
    """The real API's error body for an HTTP status."""
    if code == 429:
        return _error(f"Rate limit reached for {model} on tokens per min (TPM). Please try again in 1s.",
                      "tokens", "rate_limit_exceeded")
    if code == 401:
        return _error("Incorrect API key provided. You can find your API key in your account settings.",
                      "invalid_request_error", "invalid_api_key")
    if code == 404:
        return _error(f"The model `{model}` does not exist or you do not have access to it.",
                      "invalid_request_error", "model_not_found")
    if code >= 500:
        return _error("The server had an error while processing your request. Sorry about that!", "server_error",
                      "server_error")
    return _error(f"Mock error {code}.", "invalid_request_error", None)


def _error(message: str, kind: str, code: str | None, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def _default_failure_message(code: str | None) -> str:
    if code == "rate_limit_exceeded":
        return "Rate limit reached. Please try again in 20ms."
    if code == "server_error" or code is None:
        return "An error occurred while processing your request. Please retry your request."
    return f"The request failed ({code})."


def _sse(event: dict[str, Any]) -> bytes:
    """Responses events are named after their ``type``."""
    return sse_event(event, str(event.get("type", "")))


# --------------------------------------------------------------------------- #
# Server
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class RecordedRequest:
    """One request as received: lower-case ``headers``, parsed JSON ``body`` ({} if none), ``raw`` bytes."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    method: str = "POST"
    raw: bytes = b""

    @property
    def input(self) -> list[dict[str, Any]]:
        items = self.body.get("input")
        return list(items) if isinstance(items, list) else []

    def items_of(self, kind: str) -> list[dict[str, Any]]:
        """The input items of one ``type`` (``message``, ``reasoning``, ``function_call``, ...)."""
        return [i for i in self.input if i.get("type", "message") == kind]


class _Handler(MockHandler):
    """The Responses API over the shared HTTP/1.1 plumbing."""

    server_version = "mock-responses/1.0"

    def _invalid_request(self, message: str) -> dict[str, Any]:
        return _error(message, "invalid_request_error", None)

    def _server_error(self, message: str, code: str) -> dict[str, Any]:
        return _error(message, "server_error", code)

    def _default_error(self, status: int, model: str) -> dict[str, Any]:
        return default_error(status, model)

    def _id_headers(self) -> dict[str, str]:
        return {"x-request-id": f"req_{uuid.uuid4().hex}"}

    def _handle(self, path: str, headers: dict[str, str], raw: bytes, body: Any) -> None:
        mock = self.server.mock
        record = RecordedRequest(path=path, headers=headers, body=body if isinstance(body, dict) else {},
                                 method=self.command, raw=raw)
        if self.command != "POST" or path != RESPONSES_PATH:
            mock._record(record)
            self._send_json(404, self._invalid_request(f"Invalid URL ({self.command} {path})"))
            return
        if not isinstance(body, dict):
            mock._record(record)
            self._send_json(400, self._invalid_request("We could not parse the JSON body of your request."))
            return
        rejection = validate_request(body) if mock.validate else None
        if rejection is not None:
            mock._record(record)  # a client bug, not a model call: keep the script
            self._send_json(*rejection)
            return
        self._respond(record, mock._record_and_take(record))

    def _respond(self, record: RecordedRequest, step: Step | None) -> None:
        mock = self.server.mock
        body = record.body
        model = str(body.get("model") or DEFAULT_MODEL)
        step = self._step_to_serve(step, body, model)
        if step is None:
            return
        if isinstance(step, Raw):
            self._start_stream()
            for n, event in enumerate(step.events):
                self._write_chunk(b"data: " + event.encode() + b"\n\n" if isinstance(event, str)
                                  else _sse({"sequence_number": n, **event}))
            self._end_chunks()
            return

        reply = step if isinstance(step, Reply) else (step.reply or _PARTIAL)
        if reply.searches and not any(isinstance(t, dict) and t.get("type") in HOSTED_SEARCH
                                      for t in body.get("tools") or []):
            self._send_json(500, self._server_error("mock script: the reply searches the web, but the request "
                                                    "offers no web_search tool", "server_error"))
            return
        if not self._delay(reply.delay):
            return
        include = body.get("include") or []
        events = response_events(
            reply, response_id=f"resp_{uuid.uuid4().hex[:24]}", model=model, created=int(time.time()),
            call_ids=[tc.call_id or f"call_{mock._next_id()}" for tc in reply.tool_calls],
            include_encrypted="reasoning.encrypted_content" in include,
            usage=response_usage(reply, len(record.raw)),
            include_sources="web_search_call.action.sources" in include)

        if not body.get("stream"):
            if isinstance(step, Fault):
                self._send_headers(200, "application/json", None)
                self._fail(step)
                return
            self._send_json(200, events[-1]["response"])
            return

        self._start_stream()
        if isinstance(step, Fault):
            sent = events[:min(step.after_events, len(events) - 1)]
            for event in sent:
                self._write_chunk(_sse(event))
            if step.kind in ("failed", "error"):
                self._write_chunk(_sse(self._failure_event(step, events[0]["response"], len(sent))))
                self._end_chunks()
            elif step.kind == "end":
                self._end_chunks()
            else:
                self._fail(step)
            return
        for event in events:
            self._write_chunk(_sse(event))
        self._end_chunks()

    @staticmethod
    def _failure_event(fault: Fault, response: dict[str, Any], sequence: int) -> dict[str, Any]:
        message = fault.message or _default_failure_message(fault.error_code)
        if fault.kind == "error":
            return {"type": "error", "sequence_number": sequence, "code": fault.error_code, "message": message,
                    "param": None}
        failed = {**response, "status": "failed", "error": {"code": fault.error_code, "message": message}}
        return {"type": "response.failed", "sequence_number": sequence, "response": failed}


class MockResponsesServer(MockServer[Step, RecordedRequest]):
    """A scripted Responses API server on 127.0.0.1 (see the module docstring).

    ``validate``: check requests as the real API does (on by default). Script,
    request log, lifecycle and error handling are
    :class:`~tests.support.mock_http.MockServer`'s.
    """

    _handler = _Handler
    _step_types = (Reply, Fault, Raw)
    _base_path = "/v1"

    def __init__(self, steps: Iterable[Step] = (), *, host: str = "127.0.0.1", port: int = 0,
                 validate: bool = True) -> None:
        self.validate = validate
        super().__init__(steps, host=host, port=port)

    @property
    def responses_requests(self) -> list[RecordedRequest]:
        """Only the ``POST /v1/responses`` requests."""
        return [r for r in self.requests if r.method == "POST" and r.path == RESPONSES_PATH]
