"""Server-sent events as an ASGI response: framing, keep-alive pings, a bounded buffer, a final word.

A frame is `id: SEQ` (only for numbered events: an unnumbered one never moves the client's
`Last-Event-ID`), `event: NAME` (only for the stream's own events, not the session's envelopes), one
`data:` line of JSON, and a blank line. While nothing is sent, a `: ping` comment goes out every
`ping_s` seconds, which also finds clients that went away. Frames are read from their source into a
bounded buffer; a client that does not drain it has its stream closed with a `closing` event naming
the reason, so it reconnects and resumes by cursor instead of the server holding its backlog. A source
that fails (a store that cannot be read) ends the stream with a `closing` event saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable

from auger.protocol.jsontext import dumps
from auger.store.base import log_failure

if TYPE_CHECKING:
    from auger.frontends.server.team import Watch
    from auger.frontends.users import Principal

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

PING_S = 15.0
BUFFER = 1024  # frames a client may have unread before its stream is closed
RETRY_MS = 1000  # how long a browser's EventSource waits before it reconnects

log = logging.getLogger("auger.serve")


def frame(data: Any, *, event: str | None = None, seq: int | None = None) -> bytes:
    """One SSE frame; JSON never holds a raw newline, so one `data:` line carries it."""
    head = (f"id: {seq}\n" if seq is not None else "") + (f"event: {event}\n" if event else "")
    return f"{head}data: {dumps(data)}\n\n".encode("utf-8", "surrogatepass")


class SseResponse:
    """Streams `frames` to the client until they end, the client leaves, `closing` is set (then a final
    `closing` event says the server is going away), or — watched for `principal` — its user loses access
    (the final word says so)."""

    def __init__(self, frames: AsyncIterator[bytes], closing: asyncio.Event, *, ping_s: float = PING_S,
                 buffer: int = BUFFER, watch: Watch | None = None, principal: Principal | None = None) -> None:
        self.frames = frames
        self.closing = closing
        self.ping_s = ping_s
        self.buffer = buffer
        self.watch = watch
        self.principal = principal
        self.failure: str | None = None  # why the source broke off, told in the final `closing` event

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-store"),
            (b"x-accel-buffering", b"no")]})
        queue: asyncio.Queue[bytes | None] = asyncio.Queue(self.buffer)
        lagged = asyncio.Event()
        revoked = self.watch.follow(self.principal) if self.watch and self.principal else asyncio.Event()
        reader = asyncio.create_task(self._read(queue, lagged))
        gone = asyncio.create_task(_disconnected(receive))
        closing = asyncio.create_task(self.closing.wait())
        ending = asyncio.create_task(revoked.wait())
        try:
            await send({"type": "http.response.body", "body": f"retry: {RETRY_MS}\n\n".encode(), "more_body": True})
            final = await self._pump(send, queue, lagged, gone, closing, ending)
            if final is not None:
                await send({"type": "http.response.body", "body": frame({"reason": final}, event="closing"),
                            "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:  # the client went away mid-write
            pass
        finally:
            if self.watch is not None:
                self.watch.forget(revoked)
            for task in (reader, gone, closing, ending):
                task.cancel()
            await asyncio.gather(reader, gone, closing, ending, return_exceptions=True)

    async def _pump(self, send: Send, queue: asyncio.Queue[bytes | None], lagged: asyncio.Event,
                    gone: asyncio.Task[None], closing: asyncio.Task[bool], revoked: asyncio.Task[bool]
                    ) -> str | None:
        """Send frames as they come; returns the reason for a final `closing` event, or None."""
        while True:
            if revoked.done():
                return self.revoked_reason()
            if queue.empty() and lagged.is_set():
                return "lagging: reconnect with Last-Event-ID to resume"
            getter = asyncio.create_task(queue.get())
            done, _ = await asyncio.wait({getter, gone, closing, revoked}, timeout=self.ping_s,
                                         return_when=asyncio.FIRST_COMPLETED)
            if getter not in done or revoked in done:
                getter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await getter
                if revoked in done:
                    return self.revoked_reason()
                if getter.cancelled() or not getter.done():
                    if gone in done:
                        return None
                    if closing in done:
                        return "the server is shutting down"
                    await send({"type": "http.response.body", "body": b": ping\n\n", "more_body": True})
                    continue
            chunk = getter.result()
            if chunk is None:
                return self.failure
            await send({"type": "http.response.body", "body": chunk, "more_body": True})

    def revoked_reason(self) -> str:
        if self.principal is not None and self.principal.session is not None:
            return "access revoked: this share link was revoked or has expired"
        return "access revoked: this user's token no longer opens this server"

    async def _read(self, queue: asyncio.Queue[bytes | None], lagged: asyncio.Event) -> None:
        try:
            async for chunk in self.frames:
                try:
                    queue.put_nowait(chunk)
                except asyncio.QueueFull:
                    lagged.set()
                    return
            await queue.put(None)
        except Exception as exc:  # the source failed (a store that cannot be read): say so, then end
            log_failure(log, "an event stream", exc)
            self.failure = f"the stream failed: {exc}"
            await queue.put(None)
        finally:
            with contextlib.suppress(Exception):
                await self.frames.aclose()  # type: ignore[attr-defined]  # an async generator


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
