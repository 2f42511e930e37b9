"""A scripted mock of the OpenAI Chat Completions HTTP API, for tests and benchmarks.

Why a real HTTP server instead of patching the client library: the engine must
be exercised exactly as it runs in production -- over a socket, through the HTTP
client, the SSE parser and the retry logic -- and also as a subprocess CLI that
only knows a base URL. A loopback server covers both, and lets the tests inject
the failures that matter in practice (rate limits, dropped streams, stalls)
without a network or an API key.

Usage::

    from tests.support.mock_openai import MockChatServer, Reply, ToolCall, Fault

    with MockChatServer([
        Reply(tool_calls=[ToolCall("shell", {"command": "ls"})]),
        Fault.status(429, retry_after="1"),
        Reply(text="done"),
    ]) as server:
        run_engine(base_url=server.base_url)
        assert server.requests[0].headers["authorization"] == "Bearer sk-test"
        assert not server.remaining

Every ``POST /v1/chat/completions`` consumes the next *step* of the script:

* :class:`Reply` -- a normal completion, streamed (``"stream": true``) chunk by
  chunk in the exact shape the real API uses, or returned as one JSON object.
* :class:`Fault` -- an HTTP error status, a stream dropped mid-way, or a stall.
* a callable ``step(request_body) -> Reply | Fault`` -- computes the answer from
  what the client actually sent.

When the script runs out the server answers 500 ``"mock script exhausted"``, so
an engine that makes more calls than the test expects fails loudly.

Standard library only, so it also runs as a tiny standalone process for
benchmarks::

    python -m tests.support.mock_openai --script steps.json [--port 0] [--loop]

which prints ``READY <base_url>`` once listening and serves until killed.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import signal
import socket
import socketserver
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Union

__all__ = [
    "CHAT_PATH",
    "MODELS_PATH",
    "DEFAULT_MODEL",
    "Fault",
    "MockChatServer",
    "RecordedRequest",
    "Reply",
    "Step",
    "ToolCall",
    "chat_completion",
    "load_script",
    "main",
    "step_from_dict",
    "stream_chunks",
]

CHAT_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"
DEFAULT_MODEL = "mock-model"
EXHAUSTED_MESSAGE = "mock script exhausted"

_USAGE_KEYS = frozenset(
    {"prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens", "reasoning_tokens"}
)


# --------------------------------------------------------------------------- #
# Script steps
# --------------------------------------------------------------------------- #


def _check_keys(data: Mapping[str, Any], allowed: Iterable[str], what: str) -> None:
    """Reject unknown keys: a typo in a JSON script must not silently become a default."""
    unknown = set(data) - set(allowed)
    if unknown:
        raise ValueError(
            f"unknown key(s) for {what}: {sorted(unknown)}; allowed: {sorted(allowed)}"
        )


@dataclass
class ToolCall:
    """One function call the mock model makes.

    ``arguments`` given as a dict is JSON-encoded; a str is sent verbatim, so a
    test can hand the engine malformed or truncated JSON on purpose. ``id``
    defaults to ``call_<n>``, numbered per server when the reply is served.
    """

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    @property
    def arguments_json(self) -> str:
        """The exact ``function.arguments`` string put on the wire."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCall:
        _check_keys(data, ("name", "arguments", "id"), "tool call")
        if "name" not in data:
            raise ValueError(f"tool call needs a 'name': {dict(data)!r}")
        return cls(name=data["name"], arguments=data.get("arguments", {}), id=data.get("id"))


@dataclass
class Reply:
    """A successful completion.

    ``reasoning`` is streamed as ``reasoning_content`` deltas (the field vLLM,
    DeepSeek and OpenRouter use). ``usage`` may override any of
    ``prompt_tokens``, ``completion_tokens``, ``total_tokens``,
    ``cached_tokens``, ``reasoning_tokens``; the rest are estimated. ``delay`` is
    slept before responding (latency simulation; it ends early if the server
    stops). ``chunk_chars`` sets the size of streamed text/argument fragments.
    """

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: str | None = None
    usage: dict[str, int] | None = None
    delay: float = 0.0
    chunk_chars: int = 8

    def __post_init__(self) -> None:
        self.tool_calls = [
            tc if isinstance(tc, ToolCall) else ToolCall.from_dict(tc) for tc in self.tool_calls
        ]
        if self.chunk_chars < 1:
            raise ValueError("chunk_chars must be >= 1")
        if self.delay < 0:
            raise ValueError("delay must be >= 0")
        if self.usage is not None:
            _check_keys(self.usage, _USAGE_KEYS, "usage")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Reply:
        _check_keys(
            data,
            ("text", "tool_calls", "reasoning", "usage", "delay", "chunk_chars"),
            "reply",
        )
        return cls(
            text=data.get("text", ""),
            tool_calls=[ToolCall.from_dict(tc) for tc in data.get("tool_calls", [])],
            reasoning=data.get("reasoning"),
            usage=data.get("usage"),
            delay=float(data.get("delay", 0.0)),
            chunk_chars=int(data.get("chunk_chars", 8)),
        )


# A drop/hang needs *some* reply to cut short; long enough to yield many chunks.
_PARTIAL_TEXT = "This reply is going to be cut off before it is complete, mid-stream."


@dataclass
class Fault:
    """A failure to inject instead of a reply. Build with the class methods.

    * ``status`` -- an HTTP error with an OpenAI-shaped JSON body.
    * ``drop``   -- a 200 stream that sends ``after_chunks`` SSE events of
      ``reply`` and then closes the socket (no final chunk, no ``[DONE]``).
    * ``hang``   -- sends ``after_chunks`` events, then nothing for ``seconds``
      (or until the server stops), then closes the socket.

    For non-streaming requests ``drop`` sends half the JSON body and ``hang``
    only the headers, so both failure modes exist there too.
    """

    kind: str
    code: int = 200
    body: dict[str, Any] | str | None = None
    message: str | None = None
    retry_after: str | int | float | None = None
    headers: dict[str, str] = field(default_factory=dict)
    after_chunks: int = 0
    seconds: float = 0.0
    reply: Reply | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("status", "drop", "hang"):
            raise ValueError(f"unknown fault kind {self.kind!r}")
        if self.after_chunks < 0:
            raise ValueError("after_chunks must be >= 0")

    @classmethod
    def status(
        cls,
        code: int,
        body: dict[str, Any] | str | None = None,
        retry_after: str | int | float | None = None,
        headers: Mapping[str, str] | None = None,
        *,
        message: str | None = None,
    ) -> Fault:
        """Answer with HTTP ``code``.

        ``body``: None gives OpenAI's error shape with defaults per code (see
        :func:`default_error`); a dict is sent as JSON verbatim; a str is sent
        verbatim as text/plain (e.g. an HTML page from a misbehaving proxy).
        ``message`` only replaces the default error message.
        """
        if not 100 <= int(code) <= 599:
            raise ValueError(f"bad HTTP status {code!r}")
        return cls(
            kind="status",
            code=int(code),
            body=body,
            message=message,
            retry_after=retry_after,
            headers=dict(headers or {}),
        )

    @classmethod
    def context_length(cls, message: str | None = None) -> Fault:
        """The 400 the real API returns when the prompt is too long for the model."""
        return cls.status(
            400,
            body={
                "error": {
                    "message": message
                    or (
                        "This model's maximum context length is 128000 tokens. However, "
                        "your messages resulted in 131072 tokens. Please reduce the "
                        "length of the messages."
                    ),
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }
            },
        )

    @classmethod
    def drop(cls, after_chunks: int = 2, reply: Reply | None = None) -> Fault:
        """Break the stream after ``after_chunks`` SSE events (the role chunk counts)."""
        return cls(kind="drop", after_chunks=after_chunks, reply=reply)

    @classmethod
    def hang(
        cls, after_chunks: int = 1, seconds: float = 30.0, reply: Reply | None = None
    ) -> Fault:
        """Stall after ``after_chunks`` SSE events; exercises the client's read timeout."""
        return cls(kind="hang", after_chunks=after_chunks, seconds=float(seconds), reply=reply)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Fault:
        kind = data.get("fault")
        if kind == "status":
            _check_keys(
                data, ("fault", "code", "body", "message", "retry_after", "headers"), "status fault"
            )
            if "code" not in data:
                raise ValueError("status fault needs a 'code'")
            return cls.status(
                data["code"],
                body=data.get("body"),
                retry_after=data.get("retry_after"),
                headers=data.get("headers"),
                message=data.get("message"),
            )
        if kind == "context_length":
            _check_keys(data, ("fault", "message"), "context_length fault")
            return cls.context_length(data.get("message"))
        reply = Reply.from_dict(data["reply"]) if data.get("reply") is not None else None
        if kind == "drop":
            _check_keys(data, ("fault", "after_chunks", "reply"), "drop fault")
            return cls.drop(int(data.get("after_chunks", 2)), reply)
        if kind == "hang":
            _check_keys(data, ("fault", "after_chunks", "seconds", "reply"), "hang fault")
            return cls.hang(int(data.get("after_chunks", 1)), float(data.get("seconds", 30.0)), reply)
        raise ValueError(
            f"unknown fault {kind!r}; expected status, context_length, drop or hang"
        )


Step = Union[Reply, Fault, Callable[[dict], Union[Reply, Fault]]]


def step_from_dict(data: Mapping[str, Any] | str) -> Reply | Fault:
    """Build a step from plain JSON data (scripts for the CLI and benchmarks).

    ``{"fault": ...}`` gives a :class:`Fault`, any other mapping a
    :class:`Reply`; a bare string is shorthand for ``Reply(text=...)``.
    """
    if isinstance(data, str):
        return Reply(text=data)
    if not isinstance(data, Mapping):
        raise TypeError(f"a step must be a JSON object or string, got {type(data).__name__}")
    if "fault" in data:
        return Fault.from_dict(data)
    return Reply.from_dict(data)


def load_script(path: str) -> list[Reply | Fault]:
    """Read a JSON script file: a list of steps, or ``{"steps": [...]}``."""
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    if isinstance(data, Mapping):
        _check_keys(data, ("steps",), "script")
        data = data.get("steps", [])
    if not isinstance(data, list):
        raise ValueError("a script must be a JSON list of steps or {'steps': [...]}")
    return [step_from_dict(item) for item in data]


# --------------------------------------------------------------------------- #
# Wire format (pure functions, so tests can compare against them directly)
# --------------------------------------------------------------------------- #


def _split(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _argument_fragments(arguments: str, size: int) -> list[str]:
    """Split arguments so a client must really concatenate: never one piece if avoidable."""
    parts = _split(arguments, size)
    if len(parts) == 1 and len(arguments) > 1:
        middle = len(arguments) // 2
        parts = [arguments[:middle], arguments[middle:]]
    return parts


def completion_usage(
    reply: Reply, tool_calls: list[tuple[str, str, str]], request_bytes: int
) -> dict[str, Any]:
    """OpenAI's usage object; estimated (~4 chars per token) unless the reply overrides it."""
    override = reply.usage or {}
    prompt = override.get("prompt_tokens", request_bytes // 4)
    generated = len(reply.text) + sum(len(args) for _, _, args in tool_calls)
    completion = override.get("completion_tokens", generated // 4 + 1)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": override.get("total_tokens", prompt + completion),
        "prompt_tokens_details": {"cached_tokens": override.get("cached_tokens", 0)},
        "completion_tokens_details": {"reasoning_tokens": override.get("reasoning_tokens", 0)},
    }


def stream_chunks(
    reply: Reply,
    tool_calls: list[tuple[str, str, str]],
    *,
    completion_id: str,
    created: int,
    model: str,
    include_usage: bool,
    usage: dict[str, Any],
) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects of one streamed reply, in order.

    ``tool_calls`` are resolved ``(id, name, arguments_json)`` triples. As in
    the real API, when usage reporting is requested every chunk carries
    ``"usage": null`` and one extra chunk with ``"choices": []`` carries the
    totals; ``[DONE]`` is not included here.
    """

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }
        if include_usage:
            out["usage"] = None
        return out

    size = reply.chunk_chars
    chunks = [chunk({"role": "assistant", "content": ""})]
    if reply.reasoning:
        chunks += [chunk({"reasoning_content": part}) for part in _split(reply.reasoning, size)]
    chunks += [chunk({"content": part}) for part in _split(reply.text, size)]
    for index, (call_id, name, arguments) in enumerate(tool_calls):
        chunks.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
        )
        chunks += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
            for fragment in _argument_fragments(arguments, size)
        ]
    chunks.append(chunk({}, "tool_calls" if tool_calls else "stop"))
    if include_usage:
        chunks.append(
            {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [],
                "usage": usage,
            }
        )
    return chunks


def chat_completion(
    reply: Reply,
    tool_calls: list[tuple[str, str, str]],
    *,
    completion_id: str,
    created: int,
    model: str,
    usage: dict[str, Any],
) -> dict[str, Any]:
    """The non-streaming ``chat.completion`` object (content is null for pure tool calls)."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": reply.text if (reply.text or not tool_calls) else None,
    }
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    if tool_calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
            for call_id, name, args in tool_calls
        ]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if tool_calls else "stop",
            }
        ],
        "usage": usage,
    }


def default_error(code: int, model: str) -> dict[str, Any]:
    """OpenAI's error body for ``code``, with the messages the real API uses."""
    if code == 429:
        message = (
            f"Rate limit reached for {model} on requests per min (RPM). "
            "Please try again in 1s."
        )
        kind, err_code = "requests", "rate_limit_exceeded"
    elif code == 401:
        message = "Incorrect API key provided. You can find your API key in your account settings."
        kind, err_code = "invalid_request_error", "invalid_api_key"
    elif code == 404:
        message = f"The model `{model}` does not exist or you do not have access to it."
        kind, err_code = "invalid_request_error", "model_not_found"
    elif code == 503:
        message = "The engine is currently overloaded, please try again later."
        kind, err_code = "server_error", "overloaded"
    elif code >= 500:
        message = "The server had an error while processing your request. Sorry about that!"
        kind, err_code = "server_error", "server_error"
    else:
        message = f"Mock error {code}."
        kind, err_code = "invalid_request_error", None
    return {"error": {"message": message, "type": kind, "param": None, "code": err_code}}


def _error(message: str, kind: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _dumps(obj: Any) -> bytes:
    # Compact UTF-8 JSON, as the real API sends: clients must decode UTF-8 themselves.
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _sse(obj: Any) -> bytes:
    return b"data: " + _dumps(obj) + b"\n\n"


_SSE_DONE = b"data: [DONE]\n\n"


# --------------------------------------------------------------------------- #
# Server
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it (every path, not only chat calls).

    ``headers`` has lower-case keys; ``body`` is the parsed JSON object ({} when
    absent or not a JSON object -- see ``raw``); ``client_port`` identifies the
    TCP connection, which lets tests check keep-alive reuse.
    """

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    method: str = "POST"
    raw: bytes = b""
    client_port: int = 0

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # MockChatServer.stop() joins handlers itself, with a deadline.
    request_queue_size = 128  # benchmarks may open many connections at once

    def __init__(self, address: tuple[str, int], mock: MockChatServer) -> None:
        self.mock = mock
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls socket.getfqdn(), a reverse DNS lookup that can
        # take seconds on badly configured hosts; the name is never needed here.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = port

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hanging up mid-response are routine in fault tests; stay quiet then.
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    """Speaks just enough HTTP/1.1 (keep-alive, chunked) to look like the real API."""

    protocol_version = "HTTP/1.1"
    server_version = "mock-openai/1.0"
    sys_version = ""
    disable_nagle_algorithm = True  # TCP_NODELAY: each SSE event leaves at once.
    server: _HTTPServer

    # -- connection bookkeeping ------------------------------------------- #

    def setup(self) -> None:
        super().setup()
        self.server.mock._register(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.mock._unregister(self.connection)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base signature
        pass  # the test output is not the place for an access log

    # -- dispatch ---------------------------------------------------------- #

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        mock = self.server.mock
        try:
            raw = self._read_body()
        except (ValueError, OSError):
            self.close_connection = True
            self._send_json(400, _error("Malformed request body.", "invalid_request_error", None))
            return
        path = self.path.split("?", 1)[0]
        headers = {key.lower(): value for key, value in self.headers.items()}
        try:
            body = json.loads(raw) if raw else None
        except (ValueError, UnicodeDecodeError):
            body = None
        record = RecordedRequest(
            path=path,
            headers=headers,
            body=body if isinstance(body, dict) else {},
            method=self.command,
            raw=raw,
            client_port=self.client_address[1],
        )
        try:
            if self.command == "POST" and path == CHAT_PATH:
                if not isinstance(body, dict):
                    mock._record(record)  # a client bug, not a model call: keep the script
                    self._send_json(
                        400,
                        _error(
                            "We could not parse the JSON body of your request.",
                            "invalid_request_error",
                            None,
                        ),
                    )
                    return
                self._chat(record, mock._record_and_take(record))
            elif self.command == "GET" and path == MODELS_PATH:
                mock._record(record)
                self._send_json(200, mock._models_payload())
            else:
                mock._record(record)
                self._send_json(
                    404,
                    _error(f"Invalid URL ({self.command} {path})", "invalid_request_error", None),
                )
        except OSError:
            # The client went away (or stop() shut the socket); nothing left to say.
            self.close_connection = True

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline(65537).split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    # -- chat completions -------------------------------------------------- #

    def _chat(self, record: RecordedRequest, step: Step | None) -> None:
        mock = self.server.mock
        body = record.body
        model = str(body.get("model") or DEFAULT_MODEL)
        if step is None:
            self._send_json(500, _error(EXHAUSTED_MESSAGE, "server_error", "mock_script_exhausted"))
            return
        if not isinstance(step, (Reply, Fault)):
            try:
                step = step(body)
                if isinstance(step, (Mapping, str)):
                    step = step_from_dict(step)
                if not isinstance(step, (Reply, Fault)):
                    raise TypeError(f"a callable step must return Reply or Fault, got {step!r}")
            except Exception as exc:  # surfaced again by MockChatServer.__exit__
                mock._add_error(exc)
                self._send_json(
                    500, _error(f"mock step raised {exc!r}", "server_error", "mock_step_error")
                )
                return

        if isinstance(step, Fault) and step.kind == "status":
            self._send_status_fault(step, model)
            return

        reply = step if isinstance(step, Reply) else (step.reply or Reply(text=_PARTIAL_TEXT))
        if reply.delay and mock._stopping.wait(reply.delay):
            self._abort()
            return
        tool_calls = [
            (tc.id or mock._next_call_id(), tc.name, tc.arguments_json) for tc in reply.tool_calls
        ]
        completion_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        created = int(time.time())
        usage = completion_usage(reply, tool_calls, len(record.raw))

        if body.get("stream"):
            options = body.get("stream_options")
            include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
            chunks = stream_chunks(
                reply,
                tool_calls,
                completion_id=completion_id,
                created=created,
                model=model,
                include_usage=include_usage,
                usage=usage,
            )
            events = [_sse(c) for c in chunks] + [_SSE_DONE]
            self._start_stream()
            if isinstance(step, Fault):
                for event in events[: min(step.after_chunks, len(events) - 1)]:
                    self._write_chunk(event)
                self._fail(step)
                return
            for event in events:
                self._write_chunk(event)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return

        payload = _dumps(
            chat_completion(
                reply,
                tool_calls,
                completion_id=completion_id,
                created=created,
                model=model,
                usage=usage,
            )
        )
        if isinstance(step, Fault):
            self._send_headers(200, "application/json", len(payload), {})
            if step.kind == "drop":
                self.wfile.write(payload[: len(payload) // 2])
                self.wfile.flush()
            self._fail(step)
            return
        self._send_bytes(200, payload, "application/json", {})

    def _send_status_fault(self, fault: Fault, model: str) -> None:
        extra = dict(fault.headers)
        if fault.retry_after is not None:
            extra["Retry-After"] = str(fault.retry_after)
        if isinstance(fault.body, str):
            self._send_bytes(
                fault.code, fault.body.encode("utf-8"), "text/plain; charset=utf-8", extra
            )
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
        # FIN rather than RST: the client must still receive the bytes already sent,
        # and then see the body end early.
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # -- low-level writers ------------------------------------------------- #

    def _send_headers(
        self,
        status: int,
        content_type: str,
        length: int | None,
        extra: Mapping[str, str],
    ) -> None:
        self.send_response(status)
        overridden = {key.lower() for key in extra}
        defaults = {
            "Content-Type": content_type,
            "x-request-id": f"req_{uuid.uuid4().hex}",
            "openai-processing-ms": "0",
        }
        if length is None:
            defaults["Cache-Control"] = "no-cache"
            defaults["Transfer-Encoding"] = "chunked"
        else:
            defaults["Content-Length"] = str(length)
        for key, value in defaults.items():
            if key.lower() not in overridden:
                self.send_header(key, value)
        for key, value in extra.items():
            self.send_header(key, value)
        self.end_headers()

    def _send_bytes(
        self, status: int, payload: bytes, content_type: str, extra: Mapping[str, str]
    ) -> None:
        self._send_headers(status, content_type, len(payload), extra)
        self.wfile.write(payload)
        self.wfile.flush()

    def _send_json(self, status: int, obj: Any) -> None:
        self._send_bytes(status, _dumps(obj), "application/json", {})

    def _start_stream(self) -> None:
        self._send_headers(200, "text/event-stream; charset=utf-8", None, {})

    def _write_chunk(self, data: bytes) -> None:
        # One write (one send) per SSE event: chunk header, event, CRLF together.
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


class MockChatServer:
    """A scripted OpenAI-compatible server on 127.0.0.1 (see the module docstring).

    The script and the request log are shared by the handler threads (one per
    connection) and the test thread, so both are guarded by one lock. With
    ``loop=True`` consumed steps are re-appended, so a short script serves an
    unbounded benchmark.

    If a callable step raises, the client gets a 500 and the exception is
    re-raised when the ``with`` block exits (unless it is already failing), so
    an assertion inside a step fails the test instead of vanishing into a retry.
    """

    def __init__(
        self,
        steps: Iterable[Step | Mapping[str, Any]] = (),
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        loop: bool = False,
        models: Iterable[str] = (DEFAULT_MODEL,),
    ) -> None:
        self._host = host
        self._port = port
        self._loop = loop
        self._models = list(models)
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

    def add(self, *steps: Step | Mapping[str, Any]) -> MockChatServer:
        """Append steps (Reply, Fault, callable, or a dict for :func:`step_from_dict`)."""
        converted: list[Step] = []
        for step in steps:
            if isinstance(step, (Mapping, str)):
                step = step_from_dict(step)
            elif not isinstance(step, (Reply, Fault)) and not callable(step):
                raise TypeError(f"not a step: {step!r}")
            converted.append(step)
        with self._lock:
            self._script.extend(converted)
        return self

    @property
    def remaining(self) -> list[Step]:
        """The steps not yet consumed (a copy)."""
        with self._lock:
            return list(self._script)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """Only the ``POST /v1/chat/completions`` requests."""
        return [r for r in self.requests if r.method == "POST" and r.path == CHAT_PATH]

    @property
    def errors(self) -> list[BaseException]:
        """Exceptions raised by callable steps."""
        with self._lock:
            return list(self._errors)

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> bool:
        """Block until at least ``count`` requests arrived (for subprocess clients)."""
        with self._changed:
            return self._changed.wait_for(lambda: len(self._requests) >= count, timeout)

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return self._httpd.server_port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (no ``/v1``)."""
        return f"http://{self._host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What an OpenAI client takes as its base URL: ``http://127.0.0.1:<port>/v1``."""
        return f"{self.url}/v1"

    def start(self) -> MockChatServer:
        if self._httpd is not None:
            raise RuntimeError("server already started")
        self._stopping.clear()
        self._httpd = _HTTPServer((self._host, self._port), self)
        # A short poll interval bounds how long stop() waits for the accept loop.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"mock-openai:{self._httpd.server_port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self, timeout: float = 1.0) -> None:
        """Stop accepting, wake stalled handlers, close open connections.

        Waits at most about ``timeout`` seconds for handler threads; they are
        daemons, so a stuck one cannot keep the process alive anyway.
        """
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        self._stopping.set()  # wakes hangs and delays immediately
        _shutdown_promptly(httpd)
        httpd.server_close()
        with self._lock:
            connections = list(self._connections.items())
        for sock, _ in connections:
            # Also ends idle keep-alive connections: a stopped server must not keep
            # answering on sockets opened earlier.
            _shutdown(sock)
        deadline = time.monotonic() + timeout
        current = threading.current_thread()
        for _, handler in connections:
            if handler is not current:
                handler.join(max(0.0, deadline - time.monotonic()))
        if thread is not None:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._httpd = None
        self._thread = None

    def __enter__(self) -> MockChatServer:
        return self.start()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.stop()
        errors = self.errors
        if exc_type is None and errors:
            raise errors[0]

    def __repr__(self) -> str:
        where = self.base_url if self._httpd is not None else "stopped"
        return f"<MockChatServer {where} remaining={len(self._script)} requests={len(self._requests)}>"

    # -- used by the handler ----------------------------------------------- #

    def _register(self, sock: socket.socket) -> None:
        with self._lock:
            self._connections[sock] = threading.current_thread()
            stopping = self._stopping.is_set()
        if stopping:  # accepted just as stop() took its snapshot
            _shutdown(sock)

    def _unregister(self, sock: socket.socket) -> None:
        with self._lock:
            self._connections.pop(sock, None)

    def _record(self, record: RecordedRequest) -> None:
        with self._changed:
            self._requests.append(record)
            self._changed.notify_all()

    def _record_and_take(self, record: RecordedRequest) -> Step | None:
        # One critical section, so request i of the log is the one that got step i.
        with self._changed:
            self._requests.append(record)
            self._changed.notify_all()
            if not self._script:
                return None
            step = self._script.popleft()
            if self._loop:
                self._script.append(step)
            return step

    def _next_call_id(self) -> str:
        with self._lock:
            return f"call_{next(self._call_ids)}"

    def _add_error(self, exc: BaseException) -> None:
        with self._lock:
            self._errors.append(exc)

    def _models_payload(self) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {"id": name, "object": "model", "created": 1700000000, "owned_by": "mock"}
                for name in self._models
            ],
        }


def _shutdown_promptly(httpd: _HTTPServer) -> None:
    """``httpd.shutdown()`` without waiting out the accept loop's poll interval.

    ``shutdown()`` only sets a flag that ``serve_forever`` checks after its
    ``select`` returns; connecting to the listening socket makes it return now.
    Suites start a server per test, so shaving the poll wait off every stop adds up.
    """
    stopper = threading.Thread(target=httpd.shutdown, daemon=True)
    stopper.start()
    address = httpd.server_address[:2]
    while stopper.is_alive():
        try:
            socket.create_connection(address, timeout=0.1).close()
        except OSError:
            pass
        stopper.join(0.002)


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


# --------------------------------------------------------------------------- #
# CLI
# --------------------------------------------------------------------------- #


def main(argv: list[str] | None = None) -> int:
    """Serve a JSON script until killed; prints ``READY <base_url>`` when listening."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.mock_openai",
        description="Scripted mock OpenAI Chat Completions server.",
    )
    parser.add_argument(
        "--script", required=True, help='JSON file: a list of steps, or {"steps": [...]}'
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    parser.add_argument(
        "--loop", action="store_true", help="replay the script forever (benchmarks)"
    )
    args = parser.parse_args(argv)

    server = MockChatServer(load_script(args.script), host=args.host, port=args.port, loop=args.loop)

    def on_term(signum: int, frame: Any) -> None:
        raise SystemExit(0)

    # Both explicitly: a shell starts background jobs with SIGINT ignored, and
    # Python keeps an inherited "ignore", so `kill -INT` would otherwise do nothing.
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    server.start()
    print(f"READY {server.base_url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except SystemExit:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
