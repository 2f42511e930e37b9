"""Shared HTTP plumbing for the wire clients: one client per model client, errors made readable."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.util
import json
import logging
import sys
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable

import httpx
from httpx_sse import EventSource, ServerSentEvent

from auger import start_gc
from auger.models import tls
from auger.models.base import (
    ContextWindowExceeded, ImageRejected, ModelError, ModelRequest, RateLimitReport, StreamEvent,
)
from auger.models.rate_limits import read_rate_limits
from auger.protocol.events import Usage
from auger.protocol.jsontext import dumps as json_dumps
from auger.protocol.jsontext import loads as loads_bounded
from auger.models.retry import parse_retry_after

if TYPE_CHECKING:
    import ssl

log = logging.getLogger("auger.models")

IDLE_RELEASE = 60.0  # seconds a client keeps its connection with no request before it lets the connection go
REST_WAIT = 0.2  # seconds a reply's body may take to end after its last event before its connection is dropped
REST_EVENTS = 4  # events after the last one read (and ignored) before it is dropped
_CONTEXT_MARKERS = ("context_length_exceeded", "context length", "maximum context", "too many tokens",
                    "prompt is too long", "context window", "context_window_exceeded")


def make_http_client(base_url: str, headers: dict[str, str], idle_timeout: float) -> httpx.AsyncClient:
    _note_sniffio_absent()
    # built once, maybe ahead (tls.py); a plain-HTTP client's is never used, and is shared
    verify: Any = tls.context() if base_url.startswith("https:") else _unverified_context()
    return httpx.AsyncClient(
        headers=headers,
        timeout=httpx.Timeout(connect=15.0, read=idle_timeout, write=30.0, pool=30.0),
        verify=verify,
        http2=False,
    )


@functools.cache
def _unverified_context() -> ssl.SSLContext:
    """What httpx would build for `verify=False`, made once: every client of a plain-HTTP server (a local
    one, a hundred sessions' worth) would otherwise build its own."""
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _note_sniffio_absent() -> None:
    """httpcore imports sniffio each time it sets up a lock, which is every request; anyio no longer
    needs sniffio, and where it is not installed each of those imports searched all of sys.path before
    failing. Recording once that it is absent makes them fail at once, as Python's import system does for
    a None in sys.modules; an installed sniffio is left alone."""
    if "sniffio" not in sys.modules and importlib.util.find_spec("sniffio") is None:
        sys.modules["sniffio"] = None  # type: ignore[assignment]


def transport_error(exc: httpx.HTTPError, url: str) -> ModelError:
    """Connection-level failures, each with a message naming the endpoint: retryable, except a
    certificate the process does not trust (no retry makes it trusted)."""
    if _untrusted_certificate(exc):
        return ModelError(f"cannot connect to {url}: the server's TLS certificate is not trusted ({exc}); if it "
                          "comes from a private CA, point SSL_CERT_FILE at that CA's certificate", retryable=False)
    if isinstance(exc, httpx.ConnectError):
        return ModelError(f"cannot connect to {url}: {exc or 'connection refused'}", retryable=True)
    if isinstance(exc, httpx.ReadTimeout):
        return ModelError(f"model stream from {url} went idle (no data within the idle timeout)",
                          retryable=True)
    if isinstance(exc, httpx.TimeoutException):
        return ModelError(f"timed out talking to {url}: {type(exc).__name__}", retryable=True)
    return ModelError(f"connection to {url} failed: {type(exc).__name__}: {exc}", retryable=True)


def _untrusted_certificate(exc: BaseException) -> bool:
    import ssl

    seen: BaseException | None = exc
    for _ in range(8):  # httpx wraps httpcore's error, which wraps ssl's
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLCertVerificationError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


# Error kinds named inside a stream (Anthropic `error.type`, Responses `code`), as the HTTP status the
# same failure gets when it comes as a response: one classifier then decides for both.
_KIND_STATUS = {
    "invalid_request_error": 400, "context_length_exceeded": 400, "authentication_error": 401,
    "permission_error": 403, "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429,
    "rate_limit_exceeded": 429, "insufficient_quota": 429, "api_error": 500, "server_error": 500,
    "server_is_overloaded": 503, "overloaded": 503, "overloaded_error": 529,
}


def status_error(response: httpx.Response, body: bytes, url: str, *, model: str, key_env: str | None) -> ModelError:
    """Map an HTTP error status to a ModelError: what failed, why, and what to do; with the rate limits
    its headers state (a 429's say when the used-up limit refills)."""
    message, code = _error_detail(body)
    error = classify_error(response.status_code, message, code, where=f"{url} (HTTP {response.status_code})",
                           model=model, key_env=key_env, retry_after=parse_retry_after(response.headers))
    limits = read_rate_limits(response.headers, response.status_code)
    if limits is not None:
        error.rate_limits = limits
        error.reset_after = limits.reset_after() if response.status_code == 429 else None
    return error


def stream_error(status: Any, kind: Any, message: Any, url: str, *, model: str, key_env: str | None = None,
                 retry_after: float | None = None) -> ModelError:
    """A failure reported inside a 200 stream, classified exactly as the same failure over HTTP.

    `status` is the numeric code when the server gives one (OpenRouter's error chunks); otherwise the
    error's `kind` maps to one. An error with neither is most likely the server's trouble: retried."""
    kind = str(kind) if kind not in (None, "") else None
    code = status if isinstance(status, int) and not isinstance(status, bool) and 100 <= status <= 599 else None
    if code is None:
        code = _KIND_STATUS.get(kind or "", 500 if kind is None else 400)
    text = str(message or kind or "the model response failed")
    where = f"{url} ({kind or code}, in the stream)"
    return classify_error(code, text, kind, where=where, model=model, key_env=key_env, retry_after=retry_after)


def classify_error(status: int, message: str, code: str | None, *, where: str, model: str, key_env: str | None,
                   retry_after: float | None = None) -> ModelError:
    """The one rule for every failed model call, HTTP or in-stream: 4xx is the request's fault and is not
    retried (except 408 timeout, 409 conflict, 429 rate limit), 5xx is the server's and is; a context
    overflow and a rejected image are their own errors, so the engine can compact or drop the image."""
    lowered = f"{code} {message}".lower()
    if status in (401, 403):
        hint = f"; check {key_env}" if key_env else ""
        return ModelError(f"authentication failed at {where}: {message}{hint}", retryable=False,
                          status=status, code=code)
    if status == 404:
        return ModelError(f"model '{model}' or endpoint not found at {where}: {message}",
                          retryable=False, status=status, code=code)
    if status in (400, 413, 422) and any(m in lowered for m in _CONTEXT_MARKERS):
        return ContextWindowExceeded(f"the conversation no longer fits the model's context window: {message}",
                                     status=status)
    if status in (400, 413, 415, 422) and "image" in lowered:
        return ImageRejected(f"the provider rejected an image at {where}: {message}", status=status, code=code)
    if status == 429 and ("insufficient_quota" in lowered or "quota" in (code or "")):
        return ModelError(f"quota exhausted at {where}: {message}", retryable=False, status=status, code=code)
    retryable = status in (408, 409, 429) or status >= 500
    return ModelError(f"{where}: {message}", retryable=retryable, retry_after=retry_after, status=status, code=code)


def stream_json(data: str, url: str) -> dict[str, Any]:
    """One server-sent event's JSON object, for every wire. Anything else — bad JSON, another JSON value,
    nesting deeper than any provider sends (where `json.loads` would raise RecursionError) — is a
    ModelError naming the endpoint. It is retryable: a proxy that garbled one stream may not garble the
    next, and the retry policy bounds the attempts before the turn ends with this message."""
    try:
        value = loads_bounded(data)
    except ValueError as exc:
        raise ModelError(f"malformed stream event from {url} ({exc}): {data[:120]}", retryable=True) from None
    if not isinstance(value, dict):
        raise ModelError(f"malformed stream event from {url} (not a JSON object): {data[:120]}", retryable=True)
    return value


def openai_usage(raw: dict[str, Any], input_key: str, output_key: str) -> Usage:
    """An OpenAI usage object: Chat names its counts prompt_/completion_tokens, Responses input_/output_tokens;
    both put cached and reasoning tokens under `<count>_details`."""
    input_details = raw.get(f"{input_key}_details") or {}
    output_details = raw.get(f"{output_key}_details") or {}
    return Usage(
        input_tokens=int(raw.get(input_key) or 0),
        cached_input_tokens=int(input_details.get("cached_tokens") or 0),
        output_tokens=int(raw.get(output_key) or 0),
        reasoning_tokens=int(output_details.get("reasoning_tokens") or 0),
    )


def _error_detail(body: bytes) -> tuple[str, str | None]:
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return (text[:300] or "no error message"), None
    err = data.get("error", data) if isinstance(data, dict) else data
    if isinstance(err, dict):
        message = str(err.get("message") or err.get("detail") or text[:300])
        code = err.get("code") or err.get("type")
        return message, (str(code) if code else None)
    return str(err)[:300], None


class SseModelClient:
    """What every streaming wire client shares: one keep-alive HTTP client, POST a JSON body, parse
    the server-sent events, and turn HTTP and transport failures into readable ModelErrors.

    Subclasses give `build_body(request)` and `parse_stream(response, events)` (the response's server-sent
    events as internal stream events).

    A reply's body is read to its end, past the event that ended the reply (`_read_rest`): httpx keeps a
    connection for the next request only when its last response was read whole, and a new one costs a TCP and
    a TLS handshake on every request of a turn. A client idle for IDLE_RELEASE lets it go (`_let_go`)."""

    def __init__(self, *, provider: str, model: str, url: str, headers: dict[str, str], key_env: str | None,
                 idle_timeout: float) -> None:
        self.provider = provider
        self.model = model
        self.url = url
        self._key_env = key_env
        self._new_http = functools.partial(make_http_client, url, {"accept": "text/event-stream", **headers},
                                           idle_timeout)
        self._http = self._new_http()
        self._ends_replies = True  # the server ends a body soon after its last event (until one did not)
        self._in_flight = 0  # requests streaming now
        self._release: asyncio.TimerHandle | None = None  # lets the connection go once idle (`_let_go`)
        self._closing: set[asyncio.Future[None]] = set()
        self._tools: tuple[Any, str] | None = None  # the last request's tools, and their JSON (`_encode`)
        # the last check on a body before it leaves (secrets/outgoing.py; set by registry.create_client):
        # None, or why the request is not sent
        self.outgoing: Callable[[str], str | None] | None = None

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        raise NotImplementedError

    def parse_stream(self, response: httpx.Response, events: AsyncIterator[ServerSentEvent]
                     ) -> AsyncIterator[StreamEvent]:
        raise NotImplementedError

    async def aclose(self) -> None:
        if self._release is not None:
            self._release.cancel()
        await asyncio.gather(*self._closing, return_exceptions=True)  # connections let go that still close
        await self._http.aclose()

    def _encode(self, body: dict[str, Any]) -> str:
        """The body's JSON text. Its `tools` (every wire puts them there: ten kilobytes and more, the same from
        one request to the next) are encoded once and kept while they stay equal, which costs a twentieth of
        encoding them; they go last in the object, where their order does not matter."""
        tools = body.pop("tools", None)
        text = json_dumps(body, compact=True)
        if tools is None:
            return text
        if self._tools is None or self._tools[0] != tools:
            self._tools = (tools, json_dumps(tools, compact=True))
        return f"{text[:-1]}{',' if body else ''}\"tools\":{self._tools[1]}}}"

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        # Serialised here, not by httpx: its encoder fails on a lone surrogate the model sent earlier.
        text = self._encode(self.build_body(request))
        refused = self.outgoing(text) if self.outgoing is not None else None
        if refused is not None:
            raise ModelError(refused, retryable=False)
        body = text.encode("utf-8")  # every byte rides on every request
        if self._release is not None:
            self._release.cancel()
            self._release = None
        self._in_flight += 1
        try:
            async with self._http.stream("POST", self.url, content=body,
                                         headers={"content-type": "application/json"}) as response:
                start_gc.release()  # the process's first request has gone out: start-up is over
                if response.status_code != 200:
                    raise status_error(response, await response.aread(), self.url,
                                       model=self.model, key_env=self._key_env)
                limits = read_rate_limits(response.headers)
                if limits is not None:
                    yield RateLimitReport(limits)
                events = EventSource(response).aiter_sse()
                async for event in _shape_checked(self.parse_stream(response, events), self.url):
                    yield event
                await self._read_rest(events)
        except httpx.HTTPError as exc:
            raise transport_error(exc, self.url) from exc
        finally:
            self._in_flight -= 1
            if not self._in_flight:
                with contextlib.suppress(RuntimeError):  # no loop: a stream finalized after its loop ended
                    self._release = asyncio.get_running_loop().call_later(IDLE_RELEASE, self._let_go)

    def _let_go(self) -> None:
        """A client idle for IDLE_RELEASE lets its connection go, so an idle session holds no socket (nor a TLS
        session's memory: a server may hold a thousand idle sessions); its next request opens a new one."""
        self._release = None
        if self._in_flight:
            return
        idle, self._http = self._http, self._new_http()
        closing = asyncio.ensure_future(idle.aclose())
        self._closing.add(closing)
        closing.add_done_callback(self._closing.discard)

    async def _read_rest(self, events: AsyncIterator[ServerSentEvent]) -> None:
        """Read what follows the event that ended a reply (the chunked body's terminator, normally received
        with it), so the connection goes back to the pool. A server that sends more, or keeps the body open,
        is not waited for: the connection is closed, and this client stops waiting on later replies."""
        if not self._ends_replies:
            return
        try:
            async with asyncio.timeout(REST_WAIT):
                for _ in range(REST_EVENTS + 1):
                    if await anext(events, None) is None:
                        return
        except TimeoutError:
            pass
        except httpx.HTTPError:
            return  # the reply was whole; the connection is gone, as it would have been
        self._ends_replies = False


async def _shape_checked(events: AsyncIterator[StreamEvent], url: str) -> AsyncIterator[StreamEvent]:
    """A parser's events, where a field of the wrong shape (a list where an object belongs, a text index)
    is a malformed stream event like bad JSON (`stream_json`), not an exception escaping the turn: every
    value the parsers read comes from the server."""
    try:
        async for event in events:
            yield event
    except (AttributeError, TypeError, KeyError, IndexError, ValueError) as exc:
        log.debug("malformed stream event from %s", url, exc_info=True)
        raise ModelError(f"malformed stream event from {url} ({type(exc).__name__}: {exc})", retryable=True) from None
