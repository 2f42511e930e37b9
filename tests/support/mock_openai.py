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
import json
import signal
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Union

from tests.support.mock_http import (
    EXHAUSTED_MESSAGE,  # noqa: F401 - re-exported: part of this module's API
    MockHandler,
    MockServer,
    check_keys,
    compact_json,
    fragments,
    json_schema_format_problem,
    openai_tool_choice_problem,
    split_text,
    sse_event,
    wire_json,
)

__all__ = [
    "CHAT_PATH",
    "MODELS_PATH",
    "DEFAULT_MODEL",
    "Fault",
    "MockChatServer",
    "RecordedRequest",
    "Raw",
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

_USAGE_KEYS = frozenset(
    {"prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens", "reasoning_tokens"}
)


# --------------------------------------------------------------------------- #
# Script steps
# --------------------------------------------------------------------------- #


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
        return wire_json(self.arguments)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCall:
        check_keys(data, ("name", "arguments", "id"), "tool call")
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
            check_keys(self.usage, _USAGE_KEYS, "usage")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Reply:
        check_keys(
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
            check_keys(
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
            check_keys(data, ("fault", "message"), "context_length fault")
            return cls.context_length(data.get("message"))
        reply = Reply.from_dict(data["reply"]) if data.get("reply") is not None else None
        if kind == "drop":
            check_keys(data, ("fault", "after_chunks", "reply"), "drop fault")
            return cls.drop(int(data.get("after_chunks", 2)), reply)
        if kind == "hang":
            check_keys(data, ("fault", "after_chunks", "seconds", "reply"), "hang fault")
            return cls.hang(int(data.get("after_chunks", 1)), float(data.get("seconds", 30.0)), reply)
        raise ValueError(
            f"unknown fault {kind!r}; expected status, context_length, drop or hang"
        )


@dataclass
class Raw:
    """Stream exactly these chunks: a dict as an SSE ``data:`` line of compact JSON, a str as a raw SSE line
    (a ``: comment`` keep-alive, or a ``data:`` line that is not JSON), then
    ``[DONE]`` when ``done``. For recorded provider streams (see mock_provider_streams): nothing is
    completed or checked, so a stream that misbehaves is replayed as it misbehaved."""

    chunks: list[dict[str, Any] | str]
    done: bool = True
    hold: float = 0.0  # seconds the body stays open after the last chunk before it ends (a server slow to end it)


Step = Union[Reply, Fault, Raw, Callable[[dict], Union[Reply, Fault, Raw]]]


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
        check_keys(data, ("steps",), "script")
        data = data.get("steps", [])
    if not isinstance(data, list):
        raise ValueError("a script must be a JSON list of steps or {'steps': [...]}")
    return [step_from_dict(item) for item in data]


# --------------------------------------------------------------------------- #
# Wire format (pure functions, so tests can compare against them directly)
# --------------------------------------------------------------------------- #


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
        chunks += [
            chunk({"reasoning_content": part}) for part in split_text(reply.reasoning, size)
        ]
    chunks += [chunk({"content": part}) for part in split_text(reply.text, size)]
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
            for fragment in fragments(arguments, size)
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


def _error(message: str, kind: str, code: str | None, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def tool_choice_error(body: dict[str, Any]) -> dict[str, Any] | None:
    """The 400 body the real API answers for a ``tool_choice`` it rejects, or None."""
    if "tool_choice" in body and not body.get("tools"):
        return _error("Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are "
                      "specified.", "invalid_request_error", None, "tool_choice")
    problem = openai_tool_choice_problem(body, ("function", "name"))
    return _error(problem, "invalid_request_error", "invalid_value", "tool_choice") if problem else None


def response_format_error(body: dict[str, Any]) -> dict[str, Any] | None:
    """The 400 the real API answers for a ``response_format`` it rejects (a strict schema outside the
    strict subset, a missing name), or None."""
    fmt = body.get("response_format")
    if fmt is None or (isinstance(fmt, dict) and fmt.get("type") in ("text", "json_object")):
        return None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        return _error("Invalid value for 'response_format.type'.", "invalid_request_error", "invalid_value",
                      "response_format.type")
    problem = json_schema_format_problem(fmt.get("json_schema"), "response_format.json_schema")
    return _error(problem, "invalid_request_error", "invalid_value", "response_format") if problem else None


def tool_pairing_error(body: dict[str, Any]) -> dict[str, Any] | None:
    """The 400 the real API answers when tool calls and tool messages are not paired: every
    ``tool_calls`` id must be answered by the tool messages right after that assistant message, and
    a tool message must answer a call of the assistant message before it."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    pending: list[str] = []
    answerable: set[str] = set()
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in answerable:
                return _error("Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                              "message with 'tool_calls'.", "invalid_request_error", None, f"messages.[{index}].role")
            answerable.discard(call_id)
            if call_id in pending:
                pending.remove(call_id)
            continue
        if pending:
            return _unanswered(pending, index)
        calls = message.get("tool_calls") if role == "assistant" else None
        pending = [c.get("id") for c in calls or [] if isinstance(c, dict)]
        answerable = set(pending)
    return _unanswered(pending, len(messages)) if pending else None


def _unanswered(ids: list[str], index: int) -> dict[str, Any]:
    return _error("An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                  f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(ids)}",
                  "invalid_request_error", None, f"messages.[{index}].role")


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


class _Handler(MockHandler):
    """Chat Completions (and the model list) over the shared HTTP/1.1 plumbing."""

    server_version = "mock-openai/1.0"

    # -- the wire format's hooks ------------------------------------------- #

    def _invalid_request(self, message: str) -> dict[str, Any]:
        return _error(message, "invalid_request_error", None)

    def _server_error(self, message: str, code: str) -> dict[str, Any]:
        return _error(message, "server_error", code)

    def _default_error(self, status: int, model: str) -> dict[str, Any]:
        return default_error(status, model)

    def _id_headers(self) -> dict[str, str]:
        return {"x-request-id": f"req_{uuid.uuid4().hex}", "openai-processing-ms": "0"}

    # -- dispatch ---------------------------------------------------------- #

    def _handle(self, path: str, headers: dict[str, str], raw: bytes, body: Any) -> None:
        mock = self.server.mock
        record = RecordedRequest(
            path=path,
            headers=headers,
            body=body if isinstance(body, dict) else {},
            method=self.command,
            raw=raw,
            client_port=self.client_address[1],
        )
        if self.command == "POST" and path == CHAT_PATH:
            if not isinstance(body, dict):
                mock._record(record)  # a client bug, not a model call: keep the script
                self._send_json(
                    400, self._invalid_request("We could not parse the JSON body of your request.")
                )
                return
            rejection = (tool_choice_error(body) or tool_pairing_error(body) or response_format_error(body)
                         or mock._rejection(body))
            if rejection is not None:
                mock._record(record)  # what the real server refuses is not a model call: keep the script
                self._send_json(400, rejection)
                return
            self._chat(record, mock._record_and_take(record))
        elif f"{self.command} {path}" in mock._routes:
            mock._record(record)
            status, payload = mock._route(f"{self.command} {path}", record.body)
            self._send_json(status, payload)
        elif self.command == "GET" and path == MODELS_PATH:
            mock._record(record)
            self._send_json(200, mock._models_payload())
        else:
            mock._record(record)
            self._send_json(404, self._invalid_request(f"Invalid URL ({self.command} {path})"))

    # -- chat completions -------------------------------------------------- #

    def _chat(self, record: RecordedRequest, step: Step | None) -> None:
        mock = self.server.mock
        body = record.body
        model = str(body.get("model") or DEFAULT_MODEL)
        step = self._step_to_serve(step, body, model)
        if step is None:
            return
        if isinstance(step, Raw):
            mock._remember_reasoning(step.chunks)
            self._start_stream()
            for chunk in step.chunks:
                self._write_chunk(chunk.encode() + b"\n\n" if isinstance(chunk, str) else sse_event(chunk))
            if step.done:
                self._write_chunk(_SSE_DONE)
            if step.hold and not self._delay(step.hold):
                return
            self._end_chunks()
            return
        reply = step if isinstance(step, Reply) else (step.reply or Reply(text=_PARTIAL_TEXT))
        if not self._delay(reply.delay):
            return
        tool_calls = [
            (tc.id or f"call_{mock._next_id()}", tc.name, tc.arguments_json)
            for tc in reply.tool_calls
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
            events = [sse_event(c) for c in chunks] + [_SSE_DONE]
            self._start_stream()
            if isinstance(step, Fault):
                for event in events[: min(step.after_chunks, len(events) - 1)]:
                    self._write_chunk(event)
                self._fail(step)
                return
            for event in events:
                self._write_chunk(event)
            self._end_chunks()
            return

        payload = compact_json(
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
            self._send_headers(200, "application/json", len(payload))
            if step.kind == "drop":
                self.wfile.write(payload[: len(payload) // 2])
                self.wfile.flush()
            self._fail(step)
            return
        self._send_bytes(200, payload, "application/json")


class MockChatServer(MockServer[Step, RecordedRequest]):
    """A scripted OpenAI-compatible server on 127.0.0.1 (see the module docstring).

    With ``loop=True`` consumed steps are re-appended, so a short script serves
    an unbounded benchmark. Script, request log, lifecycle and error handling
    are :class:`~tests.support.mock_http.MockServer`'s.
    """

    _handler = _Handler
    _step_types = (Reply, Fault, Raw)
    _base_path = "/v1"
    _listen_backlog = 128  # benchmarks may open many connections at once

    def __init__(
        self,
        steps: Iterable[Step | Mapping[str, Any]] = (),
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        loop: bool = False,
        models: Iterable[str] = (DEFAULT_MODEL,),
        routes: Mapping[str, Any] | None = None,
        reasoning_back: Iterable[str] = (),
        reasoning_error: str = "The reasoning_content in the thinking mode must be passed back to the API.",
        reject_images: str | None = None,
    ) -> None:
        """``routes`` answers other endpoints (``"GET /v1/models"``, ``"POST /api/show"``) with a
        recorded payload, or a callable ``payload(body) -> (status, payload)``. ``reasoning_back`` names the
        fields (``reasoning_content``, ``reasoning``, ``reasoning_details``) a provider requires back, exactly
        as a :class:`Raw` stream sent them, on the assistant message of each tool call it made (DeepSeek's
        thinking mode answers 400 ``reasoning_error`` otherwise). ``reject_images`` makes every request
        with an image part fail with that 400 message, as a text-only model's server does."""
        self._models = list(models)
        self._routes = dict(routes or {})
        self._reasoning_back = tuple(reasoning_back)
        self._reasoning_error = reasoning_error
        self._reject_images = reject_images
        self._issued: dict[str, dict[str, Any]] = {}  # tool call id -> the reasoning fields it came with
        super().__init__(steps, host=host, port=port, loop=loop)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """Only the ``POST /v1/chat/completions`` requests."""
        return [r for r in self.requests if r.method == "POST" and r.path == CHAT_PATH]

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (no ``/v1``)."""
        return f"http://{self._host}:{self.port}"

    def _coerce(self, step: Any) -> Any:
        """Steps may also be given as data: a dict or str for :func:`step_from_dict`."""
        return step_from_dict(step) if isinstance(step, (Mapping, str)) else step

    def _route(self, key: str, body: dict[str, Any]) -> tuple[int, Any]:
        payload = self._routes[key]
        return payload(body) if callable(payload) else (200, payload)

    def _remember_reasoning(self, chunks: list[dict[str, Any] | str]) -> None:
        """What a replayed stream said, per tool call: the reasoning the provider will want back."""
        fields: dict[str, Any] = {}
        call_ids: list[str] = []
        for chunk in chunks:
            for choice in (chunk.get("choices") or []) if isinstance(chunk, dict) else []:
                delta = choice.get("delta") or {}
                for name in ("reasoning_content", "reasoning"):
                    if isinstance(delta.get(name), str):
                        fields[name] = fields.get(name, "") + delta[name]
                if isinstance(delta.get("reasoning_details"), list):
                    fields.setdefault("reasoning_details", []).extend(delta["reasoning_details"])
                call_ids += [c["id"] for c in delta.get("tool_calls") or [] if c.get("id")]
        with self._lock:
            for call_id in call_ids:
                self._issued[call_id] = fields

    def _rejection(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """The 400 body the real provider answers this request with, or None."""
        for message in body.get("messages") or []:
            if not isinstance(message, dict):
                continue
            content = message.get("content")
            images = [p for p in content if isinstance(p, dict) and p.get("type") == "image_url"] \
                if isinstance(content, list) else []
            if images and self._reject_images:
                return _error(self._reject_images, "invalid_request_error", "invalid_image")
            for part in images:  # as OpenAI: a URL, or a base64 data URL of a supported image type
                url = str((part.get("image_url") or {}).get("url") or "")
                if not url.startswith(("http://", "https://", "data:image/")) or \
                        (url.startswith("data:") and ";base64," not in url):
                    return _error("Invalid image URL: expected a URL or a base64 data URL.",
                                  "invalid_request_error", "invalid_image_url")
            if message.get("role") != "assistant" or not self._reasoning_back:
                continue
            for call in message.get("tool_calls") or []:
                with self._lock:
                    issued = self._issued.get(call.get("id"))
                for name in self._reasoning_back:
                    if issued is not None and name in issued and message.get(name) != issued[name]:
                        return _error(self._reasoning_error, "invalid_request_error", "invalid_request_error")
        return None

    def _models_payload(self) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {"id": name, "object": "model", "created": 1700000000, "owned_by": "mock"}
                for name in self._models
            ],
        }


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
