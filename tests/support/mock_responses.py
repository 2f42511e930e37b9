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

import collections
import itertools
import json
import socket
import socketserver
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Union

__all__ = [
    "RESPONSES_PATH",
    "DEFAULT_MODEL",
    "Fault",
    "MockResponsesServer",
    "Raw",
    "RecordedRequest",
    "Reply",
    "Step",
    "ToolCall",
    "response_events",
    "validate_request",
]

RESPONSES_PATH = "/v1/responses"
DEFAULT_MODEL = "mock-model"
EXHAUSTED_MESSAGE = "mock script exhausted"

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
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False)


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

    def __post_init__(self) -> None:
        self.tool_calls = [tc if isinstance(tc, ToolCall) else ToolCall(**tc) for tc in self.tool_calls]
        if self.chunk_chars < 1:
            raise ValueError("chunk_chars must be >= 1")
        if self.delay < 0:
            raise ValueError("delay must be >= 0")
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
    """Stream exactly these events (a ``sequence_number`` is added where missing), then end the body.

    Nothing is checked or completed: a script without a terminal event tests exactly that.
    """

    events: list[dict[str, Any]]


Step = Union[Reply, Fault, Raw, Callable[[dict], Union[Reply, Fault, Raw]]]


# --------------------------------------------------------------------------- #
# Wire format (pure functions, so tests can compare against them directly)
# --------------------------------------------------------------------------- #


def _split(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def _fragments(text: str, size: int) -> list[str]:
    """Never one piece if avoidable: a client must really concatenate."""
    parts = _split(text, size)
    if len(parts) == 1 and len(text) > 1:
        parts = [text[:len(text) // 2], text[len(text) // 2:]]
    return parts


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
                    include_encrypted: bool, usage: dict[str, Any]) -> list[dict[str, Any]]:
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
            for delta in _split(part, size):
                emit("response.reasoning_summary_text.delta", **common, delta=delta)
            emit("response.reasoning_summary_text.done", **common, text=part)
            emit("response.reasoning_summary_part.done", **common, part={"type": "summary_text", "text": part})
        item = {"id": item_id, "type": "reasoning", "summary": [{"type": "summary_text", "text": p} for p in parts]}
        if include_encrypted:
            item["encrypted_content"] = encrypted
        output.append(item)
        emit("response.output_item.done", output_index=index, item=item)

    if reply.text:
        index, item_id = len(output), f"msg_{suffix}"
        emit("response.output_item.added", output_index=index,
             item={"id": item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []})
        common = {"item_id": item_id, "output_index": index, "content_index": 0}
        emit("response.content_part.added", **common, part={"type": "output_text", "text": "", "annotations": []})
        for delta in _split(reply.text, size):
            emit("response.output_text.delta", **common, delta=delta, logprobs=[])
        emit("response.output_text.done", **common, text=reply.text, logprobs=[])
        part = {"type": "output_text", "text": reply.text, "annotations": []}
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
        for delta in _fragments(args, size):
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
        if kind == "reasoning" and stateless and not item.get("encrypted_content"):
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


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _sse(event: dict[str, Any]) -> bytes:
    return b"event: " + str(event.get("type", "")).encode() + b"\ndata: " + _dumps(event) + b"\n\n"


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


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # MockResponsesServer.stop() joins handlers itself, with a deadline.

    def __init__(self, address: tuple[str, int], mock: MockResponsesServer) -> None:
        self.mock = mock
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # Skip HTTPServer's reverse DNS lookup (socket.getfqdn), which can take seconds.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = port

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):
            return  # clients hanging up mid-response are routine in fault tests
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive and chunked streaming, like the real API."""

    protocol_version = "HTTP/1.1"
    server_version = "mock-responses/1.0"
    sys_version = ""
    disable_nagle_algorithm = True  # each SSE event leaves at once
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        self.server.mock._register(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.mock._unregister(self.connection)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base signature
        pass

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        mock = self.server.mock
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        path = self.path.split("?", 1)[0]
        try:
            body = json.loads(raw) if raw else None
        except (ValueError, UnicodeDecodeError):
            body = None
        record = RecordedRequest(path=path, headers={k.lower(): v for k, v in self.headers.items()},
                                 body=body if isinstance(body, dict) else {}, method=self.command, raw=raw)
        try:
            if self.command != "POST" or path != RESPONSES_PATH:
                mock._record(record)
                self._send_json(404, _error(f"Invalid URL ({self.command} {path})", "invalid_request_error", None))
                return
            if not isinstance(body, dict):
                mock._record(record)
                self._send_json(400, _error("We could not parse the JSON body of your request.",
                                            "invalid_request_error", None))
                return
            rejection = validate_request(body) if mock.validate else None
            if rejection is not None:
                mock._record(record)  # a client bug, not a model call: keep the script
                self._send_json(*rejection)
                return
            self._respond(record, mock._record_and_take(record))
        except OSError:
            self.close_connection = True  # the client went away, or stop() shut the socket

    def _respond(self, record: RecordedRequest, step: Step | None) -> None:
        mock = self.server.mock
        body = record.body
        model = str(body.get("model") or DEFAULT_MODEL)
        if step is None:
            self._send_json(500, _error(EXHAUSTED_MESSAGE, "server_error", "mock_script_exhausted"))
            return
        if not isinstance(step, (Reply, Fault, Raw)):
            try:
                step = step(body)
                if not isinstance(step, (Reply, Fault, Raw)):
                    raise TypeError(f"a callable step must return Reply, Fault or Raw, got {step!r}")
            except Exception as exc:  # re-raised by MockResponsesServer.__exit__
                mock._add_error(exc)
                self._send_json(500, _error(f"mock step raised {exc!r}", "server_error", "mock_step_error"))
                return
        if isinstance(step, Fault) and step.kind == "status":
            self._send_status_fault(step, model)
            return
        if isinstance(step, Raw):
            self._send_headers(200, "text/event-stream; charset=utf-8", None)
            for n, event in enumerate(step.events):
                self._write_chunk(_sse({"sequence_number": n, **event}))
            self._end_chunks()
            return

        reply = step if isinstance(step, Reply) else (step.reply or _PARTIAL)
        if reply.delay and mock._stopping.wait(reply.delay):
            self._abort()
            return
        include = body.get("include") or []
        events = response_events(
            reply, response_id=f"resp_{uuid.uuid4().hex[:24]}", model=model, created=int(time.time()),
            call_ids=[tc.call_id or mock._next_call_id() for tc in reply.tool_calls],
            include_encrypted="reasoning.encrypted_content" in include,
            usage=response_usage(reply, len(record.raw)))

        if not body.get("stream"):
            if isinstance(step, Fault):
                self._send_headers(200, "application/json", None)
                self._fail(step)
                return
            self._send_json(200, events[-1]["response"])
            return

        self._send_headers(200, "text/event-stream; charset=utf-8", None)
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

    def _send_status_fault(self, fault: Fault, model: str) -> None:
        extra = dict(fault.headers)
        if fault.retry_after is not None:
            extra["Retry-After"] = str(fault.retry_after)
        if isinstance(fault.body, str):
            self._send_bytes(fault.code, fault.body.encode("utf-8"), "text/plain; charset=utf-8", extra)
            return
        body = fault.body if fault.body is not None else default_error(fault.code, model)
        if fault.message is not None and isinstance(body.get("error"), dict):
            body = {**body, "error": {**body["error"], "message": fault.message}}
        self._send_bytes(fault.code, _dumps(body), "application/json", extra)

    def _fail(self, fault: Fault) -> None:
        """Finish a drop/hang: optionally stall, then close without completing the body."""
        if fault.kind == "hang":
            self.server.mock._stopping.wait(fault.seconds)
        self._abort()

    def _abort(self) -> None:
        # FIN rather than RST: the client still receives what was sent, then sees the body end early.
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _send_headers(self, status: int, content_type: str, length: int | None,
                      extra: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        extra = dict(extra or {})
        self.send_header("Content-Type", content_type)
        self.send_header("x-request-id", f"req_{uuid.uuid4().hex}")
        if length is None:
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(length))
        for key, value in extra.items():
            self.send_header(key, value)
        self.end_headers()

    def _send_bytes(self, status: int, payload: bytes, content_type: str, extra: Mapping[str, str]) -> None:
        self._send_headers(status, content_type, len(payload), extra)
        self.wfile.write(payload)
        self.wfile.flush()

    def _send_json(self, status: int, obj: Any) -> None:
        self._send_bytes(status, _dumps(obj), "application/json", {})

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))  # one send per SSE event
        self.wfile.flush()

    def _end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class MockResponsesServer:
    """A scripted Responses API server on 127.0.0.1 (see the module docstring).

    The script and request log are shared by handler threads and the test
    thread, so one lock guards both. If a callable step raises, the client gets
    a 500 and the exception is re-raised when the ``with`` block exits.
    """

    def __init__(self, steps: Iterable[Step] = (), *, host: str = "127.0.0.1", port: int = 0,
                 validate: bool = True) -> None:
        self.validate = validate
        self._host = host
        self._port = port
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._script: collections.deque[Step] = collections.deque()
        self._requests: list[RecordedRequest] = []
        self._errors: list[BaseException] = []
        self._call_ids = itertools.count(1)
        self._connections: dict[socket.socket, threading.Thread] = {}
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.add(*steps)

    # -- public API -------------------------------------------------------- #

    def add(self, *steps: Step) -> MockResponsesServer:
        for step in steps:
            if not isinstance(step, (Reply, Fault, Raw)) and not callable(step):
                raise TypeError(f"not a step: {step!r}")
        with self._lock:
            self._script.extend(steps)
        return self

    @property
    def remaining(self) -> list[Step]:
        with self._lock:
            return list(self._script)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received, in arrival order (rejected ones included)."""
        with self._lock:
            return list(self._requests)

    @property
    def responses_requests(self) -> list[RecordedRequest]:
        """Only the ``POST /v1/responses`` requests."""
        return [r for r in self.requests if r.method == "POST" and r.path == RESPONSES_PATH]

    @property
    def errors(self) -> list[BaseException]:
        with self._lock:
            return list(self._errors)

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: len(self._requests) >= count, timeout)

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return self._httpd.server_port

    @property
    def base_url(self) -> str:
        """What a Responses client takes as its base URL: ``http://127.0.0.1:<port>/v1``."""
        return f"http://{self._host}:{self.port}/v1"

    def start(self) -> MockResponsesServer:
        if self._httpd is not None:
            raise RuntimeError("server already started")
        self._stopping.clear()
        self._httpd = _HTTPServer((self._host, self._port), self)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"mock-responses:{self._httpd.server_port}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 1.0) -> None:
        """Stop accepting, wake stalled handlers, close open connections (waits about ``timeout`` at most)."""
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        self._stopping.set()  # wakes hangs and delays at once
        stopper = threading.Thread(target=httpd.shutdown, daemon=True)
        stopper.start()
        while stopper.is_alive():  # a connection makes serve_forever's select return now
            try:
                socket.create_connection(httpd.server_address[:2], timeout=0.1).close()
            except OSError:
                pass
            stopper.join(0.002)
        httpd.server_close()
        with self._lock:
            connections = list(self._connections.items())
        for sock, _ in connections:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        deadline = time.monotonic() + timeout
        for _, handler in connections:
            if handler is not threading.current_thread():
                handler.join(max(0.0, deadline - time.monotonic()))
        if thread is not None:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._httpd = None
        self._thread = None

    def __enter__(self) -> MockResponsesServer:
        return self.start()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.stop()
        errors = self.errors
        if exc_type is None and errors:
            raise errors[0]

    def __repr__(self) -> str:
        where = self.base_url if self._httpd is not None else "stopped"
        return f"<MockResponsesServer {where} remaining={len(self._script)} requests={len(self._requests)}>"

    # -- used by the handler ----------------------------------------------- #

    def _register(self, sock: socket.socket) -> None:
        with self._lock:
            self._connections[sock] = threading.current_thread()
            stopping = self._stopping.is_set()
        if stopping:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _unregister(self, sock: socket.socket) -> None:
        with self._lock:
            self._connections.pop(sock, None)

    def _record(self, record: RecordedRequest) -> None:
        with self._changed:
            self._requests.append(record)
            self._changed.notify_all()

    def _record_and_take(self, record: RecordedRequest) -> Step | None:
        # One critical section, so the i-th accepted request is the one that got step i.
        with self._changed:
            self._requests.append(record)
            self._changed.notify_all()
            return self._script.popleft() if self._script else None

    def _next_call_id(self) -> str:
        with self._lock:
            return f"call_{next(self._call_ids)}"

    def _add_error(self, exc: BaseException) -> None:
        with self._lock:
            self._errors.append(exc)
