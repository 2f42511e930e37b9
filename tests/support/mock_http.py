"""The HTTP plumbing under the scripted mock model servers in this folder.

:mod:`~tests.support.mock_openai` (Chat Completions),
:mod:`~tests.support.mock_responses` (Responses) and
:mod:`~tests.support.mock_anthropic` (Messages) differ only in their wire
format: what a reply, a fault and an error look like, and which requests the real
API rejects. What lies under that must behave the same in all three, or a client
fix proven against one mock could still fail against another: a loopback
HTTP/1.1 server that sends every SSE event at once, a script consumed one step
per model call, a request log a test can wait on, and a ``stop()`` that returns
promptly even while handlers stall. It lives here, once.

A mock subclasses :class:`MockServer` (its script, log and lifecycle) and
:class:`MockHandler` (one connection), and supplies the wire format through the
handler's hooks. Standard library only, like the mocks.
"""

from __future__ import annotations

import collections
import itertools
import json
import re
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Generic, Self, TypeVar

EXHAUSTED_MESSAGE = "mock script exhausted"

StepT = TypeVar("StepT")
RecordT = TypeVar("RecordT")


# --------------------------------------------------------------------------- #
# Helpers for scripts and wire formats
# --------------------------------------------------------------------------- #


def check_keys(data: Mapping[str, Any], allowed: Iterable[str], what: str) -> None:
    """Reject unknown keys: a typo in a script must not silently become a default."""
    unknown = set(data) - set(allowed)
    if unknown:
        raise ValueError(f"unknown key(s) for {what}: {sorted(unknown)}; allowed: {sorted(allowed)}")


def split_text(text: str, size: int) -> list[str]:
    """``text`` in pieces of ``size`` characters (none for an empty string)."""
    return [text[i : i + size] for i in range(0, len(text), size)]


def fragments(text: str, size: int) -> list[str]:
    """Like :func:`split_text`, but never one piece when two are possible, so a
    client must really concatenate."""
    parts = split_text(text, size)
    if len(parts) == 1 and len(text) > 1:
        middle = len(text) // 2
        parts = [text[:middle], text[middle:]]
    return parts


OPENAI_TOOL_CHOICES = ("none", "auto", "required")


def openai_tool_choice_problem(body: Mapping[str, Any], named: Iterable[str]) -> str | None:
    """Why the OpenAI APIs reject this body's ``tool_choice``, or None (absent or valid).

    Both OpenAI wires take the same strings; an object must be ``{"type": "function", ...}`` and name
    the function where ``named`` says (Chat: ``function.name``, Responses: ``name``). The Responses API's
    hosted-tool choices are not modelled: no client here sends them.
    """
    choice = body.get("tool_choice")
    if choice is None:
        return None
    if isinstance(choice, str):
        if choice not in OPENAI_TOOL_CHOICES:
            return f"Invalid value: '{choice}'. Supported values are: 'none', 'auto', and 'required'."
        return None
    if not isinstance(choice, dict) or choice.get("type") != "function":
        return "Invalid value for 'tool_choice': expected 'none', 'auto', 'required' or a function object."
    target: Any = choice
    for key in named:
        target = target.get(key) if isinstance(target, dict) else None
    if not isinstance(target, str) or not target:
        return "Missing required parameter: 'tool_choice' must name the function to call."
    return None


# What OpenAI's strict structured outputs refuse (besides an object that is not closed or does not require
# every property): keywords outside the supported subset.
_STRICT_UNSUPPORTED = ("minLength", "maxLength", "uniqueItems", "patternProperties", "allOf", "not", "if", "then",
                       "else", "oneOf", "dependentRequired", "dependentSchemas", "minProperties", "maxProperties",
                       "contains", "unevaluatedProperties", "propertyNames")


def json_schema_format_problem(spec: Any, where: str) -> str | None:
    """Why the OpenAI APIs reject a ``json_schema`` output format (Chat's ``response_format.json_schema``,
    Responses' ``text.format``), or None. Strict mode takes only its subset: every object closed with
    ``additionalProperties: false`` and every property required, and no unsupported keyword."""
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or not spec["name"]:
        return f"Missing required parameter: '{where}.name'."
    schema = spec.get("schema")
    if not isinstance(schema, dict):
        return f"Missing required parameter: '{where}.schema'."
    if not spec.get("strict"):
        return None
    if schema.get("type") != "object":
        return (f"Invalid schema for response_format '{spec['name']}': schema must be a JSON Schema of "
                "'type: \"object\"'.")
    stack: list[tuple[Any, str]] = [(schema, "()")]
    while stack:
        node, context = stack.pop()
        if not isinstance(node, dict):
            continue
        for keyword in _STRICT_UNSUPPORTED:
            if keyword in node:
                return (f"Invalid schema for response_format '{spec['name']}': In context={context}, '{keyword}' is "
                        "not permitted.")
        if node.get("type") == "object" or "properties" in node:
            if node.get("additionalProperties") is not False:
                return (f"Invalid schema for response_format '{spec['name']}': In context={context}, "
                        "'additionalProperties' is required to be supplied and to be false.")
            missing = sorted(set(node.get("properties", {})) - set(node.get("required", [])))
            if missing:
                return (f"Invalid schema for response_format '{spec['name']}': In context={context}, 'required' is "
                        f"required to be supplied and to be an array including every key in properties. Missing "
                        f"'{missing[0]}'.")
            stack += [(sub, f"{context}, 'properties', '{key}'") for key, sub in node.get("properties", {}).items()]
        if "items" in node:
            stack.append((node["items"], f"{context}, 'items'"))
        stack += [(sub, f"{context}, 'anyOf', '{i}'") for i, sub in enumerate(node.get("anyOf", []))]
        stack += [(sub, f"{context}, '$defs', '{k}'") for k, sub in (node.get("$defs") or {}).items()]
    return None


def compact_json(obj: Any) -> bytes:
    """Compact UTF-8 JSON, as the real APIs send: clients must decode UTF-8 themselves."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    # A lone surrogate is legal JSON only as its \uXXXX escape, which is how a real API sends one.
    return re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")


def sse_event(data: Any, event: str | None = None) -> bytes:
    """One SSE event: an optional ``event:`` line, then ``data:`` with compact JSON."""
    head = b"" if event is None else b"event: " + event.encode() + b"\n"
    return head + b"data: " + compact_json(data) + b"\n\n"


# --------------------------------------------------------------------------- #
# Server
# --------------------------------------------------------------------------- #


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # MockServer.stop() joins handlers itself, with a deadline.

    def __init__(self, address: tuple[str, int], mock: MockServer[Any, Any]) -> None:
        self.mock = mock
        self.request_queue_size = mock._listen_backlog  # read when the socket starts listening
        super().__init__(address, mock._handler)

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


class MockHandler(BaseHTTPRequestHandler):
    """Speaks just enough HTTP/1.1 (keep-alive, chunked streaming) to look like a real API.

    A subclass sets ``server_version`` and implements the wire-format hooks (the
    first methods below); the rest -- body reading, step resolution, status
    faults, drops and stalls, framing -- is the same for every API.
    """

    protocol_version = "HTTP/1.1"
    sys_version = ""
    disable_nagle_algorithm = True  # TCP_NODELAY: each SSE event leaves at once.
    #: Send the default header names and Retry-After in lower case (the Anthropic
    #: mock always has; header names are case-insensitive, the bytes are kept).
    lowercase_headers = False
    server: _HTTPServer

    # -- hooks: the wire format ------------------------------------------- #

    def _handle(self, path: str, headers: dict[str, str], raw: bytes, body: Any) -> None:
        """Answer one request: ``headers`` has lower-case keys, ``body`` is the parsed
        JSON (None when absent or not JSON)."""
        raise NotImplementedError

    def _invalid_request(self, message: str) -> dict[str, Any]:
        """The API's 400 error body with ``message``."""
        raise NotImplementedError

    def _server_error(self, message: str, code: str) -> dict[str, Any]:
        """The API's 500 error body with ``message`` (``code`` names the mock's own failure)."""
        raise NotImplementedError

    def _default_error(self, status: int, model: str) -> dict[str, Any]:
        """The API's error body for an HTTP ``status`` fault that gives none."""
        raise NotImplementedError

    def _id_headers(self) -> dict[str, str]:
        """Headers every answer carries after Content-Type, such as a request id."""
        raise NotImplementedError

    def _encode_json(self, obj: Any) -> bytes:
        """The bytes of a whole JSON body."""
        return compact_json(obj)

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
        try:
            try:
                raw = self._read_body()
            except ValueError:  # a malformed body: the connection cannot be reused
                self.close_connection = True
                self._send_json(400, self._invalid_request("Malformed request body."))
                return
            headers = {key.lower(): value for key, value in self.headers.items()}
            try:
                body = json.loads(raw) if raw else None
            except (ValueError, UnicodeDecodeError):
                body = None
            self._handle(self.path.split("?", 1)[0], headers, raw, body)
        except OSError:
            self.close_connection = True  # the client went away, or stop() shut the socket

    def _read_body(self) -> bytes:
        """The request body, sized by Content-Length or sent chunked (clients may do either)."""
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

    # -- script steps ------------------------------------------------------ #

    def _step_to_serve(self, step: Any, body: dict[str, Any], model: str) -> Any:
        """The step the wire format still has to serve, or None once it was answered here.

        Answered here, alike for every API: the script running out (None), a
        callable step that fails, and an HTTP status fault (every mock's Fault has
        a ``kind``). A callable step runs here; whatever it raises is kept for the
        server's ``__exit__`` and answered with a 500, so an assertion inside a step
        fails the test instead of vanishing into a retry.
        """
        mock = self.server.mock
        if step is None:
            self._send_json(500, self._server_error(EXHAUSTED_MESSAGE, "mock_script_exhausted"))
            return None
        if not isinstance(step, mock._step_types):
            try:
                step = mock._coerce(step(body))
                if not isinstance(step, mock._step_types):
                    names = [kind.__name__ for kind in mock._step_types]
                    raise TypeError(
                        f"a callable step must return {', '.join(names[:-1])} or {names[-1]}, got {step!r}"
                    )
            except Exception as exc:  # re-raised by MockServer.__exit__
                mock._add_error(exc)
                self._send_json(500, self._server_error(f"mock step raised {exc!r}", "mock_step_error"))
                return None
        if getattr(step, "kind", None) == "status":
            self._send_status_fault(step, model)
            return None
        return step

    def _delay(self, seconds: float) -> bool:
        """Simulate ``seconds`` of latency before answering; False if ``stop()`` cut it
        short, and the connection is then closed."""
        if seconds and self.server.mock._stopping.wait(seconds):
            self._abort()
            return False
        return True

    def _send_status_fault(self, fault: Any, model: str) -> None:
        """Answer with a status fault: ``body`` None gives the API's error for the code, a
        dict is sent as JSON, a str verbatim as text/plain; ``message`` replaces the
        default message only."""
        extra = dict(fault.headers)
        if fault.retry_after is not None:
            extra[self._header_name("Retry-After")] = str(fault.retry_after)
        if isinstance(fault.body, str):
            self._send_bytes(fault.code, fault.body.encode("utf-8"), "text/plain; charset=utf-8", extra)
            return
        body = fault.body if fault.body is not None else self._default_error(fault.code, model)
        if fault.message is not None and isinstance(body.get("error"), dict):
            body = {**body, "error": {**body["error"], "message": fault.message}}
        self._send_bytes(fault.code, self._encode_json(body), "application/json", extra)

    def _fail(self, fault: Any) -> None:
        """Finish a drop/hang: optionally stall, then close without completing the body."""
        if fault.kind == "hang":
            self.server.mock._stopping.wait(fault.seconds)
        self._abort()

    def _abort(self) -> None:
        # FIN rather than RST: the client must still receive the bytes already sent,
        # and then see the body end early.
        self.close_connection = True
        _shutdown(self.connection)

    # -- low-level writers ------------------------------------------------- #

    def _header_name(self, name: str) -> str:
        return name.lower() if self.lowercase_headers else name

    def _send_headers(
        self, status: int, content_type: str, length: int | None, extra: Mapping[str, str] | None = None
    ) -> None:
        """The status line and headers; ``length`` None means a chunked body.

        A header in ``extra`` replaces the default of the same name, so a fault can
        send, say, a wrong Content-Type.
        """
        extra = extra or {}
        self.send_response(status)
        defaults = {"Content-Type": content_type, **self._id_headers()}
        if length is None:
            defaults["Cache-Control"] = "no-cache"
            defaults["Transfer-Encoding"] = "chunked"
        else:
            defaults["Content-Length"] = str(length)
        overridden = {key.lower() for key in extra}
        for key, value in defaults.items():
            if key.lower() not in overridden:
                self.send_header(self._header_name(key), value)
        for key, value in extra.items():
            self.send_header(key, value)
        self.end_headers()

    def _send_bytes(
        self, status: int, payload: bytes, content_type: str, extra: Mapping[str, str] | None = None
    ) -> None:
        self._send_headers(status, content_type, len(payload), extra)
        self.wfile.write(payload)
        self.wfile.flush()

    def _send_json(self, status: int, obj: Any) -> None:
        self._send_bytes(status, self._encode_json(obj), "application/json")

    def _start_stream(self) -> None:
        self._send_headers(200, "text/event-stream; charset=utf-8", None, self.server.mock.stream_headers)

    def _write_chunk(self, data: bytes) -> None:
        pace = self.server.mock.pace
        if pace is not None:
            pace(data)
        # One write (one send) per SSE event: chunk header, event, CRLF together.
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class MockServer(Generic[StepT, RecordT]):
    """A scripted server on 127.0.0.1: its script, request log and lifecycle.

    The script and the request log are shared by the handler threads (one per
    connection) and the test thread, so one lock guards both, and a Condition
    on it lets :meth:`wait_for_requests` block. If a callable step raises, the
    client gets a 500 and the exception is re-raised when the ``with`` block
    exits (unless it is already failing), so an assertion inside a step fails
    the test instead of vanishing into a retry.

    A subclass sets ``_handler``, ``_step_types`` (what a step or a callable
    step's result may be) and ``_base_path`` (appended to the origin for
    :attr:`base_url`).
    """

    _handler: type[MockHandler]
    _step_types: tuple[type, ...]
    _base_path: str
    #: socketserver's default accept backlog; a mock serving benchmarks raises it.
    _listen_backlog = ThreadingHTTPServer.request_queue_size

    def __init__(
        self, steps: Iterable[Any] = (), *, host: str = "127.0.0.1", port: int = 0, loop: bool = False
    ) -> None:
        self._host = host
        self._port = port
        self._loop = loop
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._script: collections.deque[StepT] = collections.deque()
        self._requests: list[RecordT] = []
        self._errors: list[BaseException] = []
        self._ids = itertools.count(1)
        self._connections: dict[socket.socket, threading.Thread] = {}
        self._opened = 0  # connections clients have opened, all told
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        #: Headers every streamed answer carries (a provider's rate-limit headers, say); set by a test.
        self.stream_headers: dict[str, str] = {}
        #: Called (on the handler's thread) with each streamed event before it is written: a test can hold
        #: a stream at a point of its choosing, or pace it.
        self.pace: Callable[[bytes], None] | None = None
        self.add(*steps)

    # -- public API -------------------------------------------------------- #

    def add(self, *steps: Any) -> Self:
        """Append steps to the script (see the mock's module docstring for what a step is)."""
        converted: list[StepT] = []
        for step in steps:
            step = self._coerce(step)
            if not isinstance(step, self._step_types) and not callable(step):
                raise TypeError(f"not a step: {step!r}")
            converted.append(step)
        with self._lock:
            self._script.extend(converted)
        return self

    @property
    def remaining(self) -> list[StepT]:
        """The steps not yet consumed (a copy)."""
        with self._lock:
            return list(self._script)

    @property
    def requests(self) -> list[RecordT]:
        """Every request received so far, in arrival order (a copy), rejected ones included."""
        with self._lock:
            return list(self._requests)

    @property
    def errors(self) -> list[BaseException]:
        """Exceptions raised by callable steps."""
        with self._lock:
            return list(self._errors)

    @property
    def connections_opened(self) -> int:
        """How many connections clients opened (a client that keeps its connection alive opens one)."""
        with self._lock:
            return self._opened

    @property
    def connections_open(self) -> int:
        """How many client connections are open now."""
        with self._lock:
            return len(self._connections)

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
    def base_url(self) -> str:
        """What the API's client takes as its base URL: ``http://127.0.0.1:<port>`` + ``_base_path``."""
        return f"http://{self._host}:{self.port}{self._base_path}"

    def start(self) -> Self:
        if self._httpd is not None:
            raise RuntimeError("server already started")
        self._stopping.clear()
        self._httpd = _HTTPServer((self._host, self._port), self)
        # A short poll interval bounds how long stop() waits for the accept loop.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"{self._handler.server_version.partition('/')[0]}:{self._httpd.server_port}",
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

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.stop()
        errors = self.errors
        if exc_type is None and errors:
            raise errors[0]

    def __repr__(self) -> str:
        where = self.base_url if self._httpd is not None else "stopped"
        return (
            f"<{type(self).__name__} {where} remaining={len(self._script)} "
            f"requests={len(self._requests)}>"
        )

    # -- used by the handler ----------------------------------------------- #

    def _coerce(self, step: Any) -> Any:
        """A step given as data, made into a step object; the base takes objects only."""
        return step

    def _register(self, sock: socket.socket) -> None:
        with self._lock:
            self._connections[sock] = threading.current_thread()
            self._opened += 1
            stopping = self._stopping.is_set()
        if stopping:  # accepted just as stop() took its snapshot
            _shutdown(sock)

    def _unregister(self, sock: socket.socket) -> None:
        with self._lock:
            self._connections.pop(sock, None)

    def _record(self, record: RecordT) -> None:
        with self._changed:
            self._requests.append(record)
            self._changed.notify_all()

    def _record_and_take(self, record: RecordT) -> StepT | None:
        # One critical section, so the i-th accepted request is the one that got step i.
        with self._changed:
            self._requests.append(record)
            self._changed.notify_all()
            if not self._script:
                return None
            step = self._script.popleft()
            if self._loop:
                self._script.append(step)
            return step

    def _next_id(self) -> int:
        """Numbers the tool calls a server makes up ids for: 1, 2, ..."""
        with self._lock:
            return next(self._ids)

    def _add_error(self, exc: BaseException) -> None:
        with self._lock:
            self._errors.append(exc)


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


def wire_json(value: Any) -> str:
    """Tool arguments as sent: a str verbatim (so a test can send malformed JSON on purpose), else JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
