"""Server-sent events as an ASGI response: framing, keep-alive pings, a bounded buffer, a final word.

A frame is `id: SEQ` (only for numbered events: an unnumbered one never moves the client's
`Last-Event-ID`), `event: NAME` (only for the stream's own events, not the session's envelopes), one
`data:` line of JSON, and a blank line. While nothing is sent, a `: ping` comment goes out every
`ping_s` seconds or so, which also finds clients that went away. Frames are read from their source into
a bounded buffer, and whatever is in it goes out in one write (a committed batch of envelopes reaches the
client together); a client that does not drain it has its stream closed with a `closing` event naming
the reason, so it reconnects and resumes by cursor instead of the server holding its backlog. A source
that fails (a store that cannot be read) ends the stream with a `closing` event saying so.

Between a batch's commit and the client's socket there is one hop of the event loop (the subscriber's
queue wakes the reader, which sends what it read once its source has nothing more ready, when the writer
is idle) and nothing per event that waits or allocates a task or a timer: on a loaded loop every hop
waits behind everything else that is ready, milliseconds each.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
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
    return frame_of(dumps(data), event=event, seq=seq)


def frame_of(text: str, *, event: str | None = None, seq: int | None = None) -> bytes:
    """One SSE frame of JSON already encoded (`jsontext.dumps`: one line)."""
    head = (f"id: {seq}\n" if seq is not None else "") + (f"event: {event}\n" if event else "")
    return f"{head}data: {text}\n\n".encode("utf-8", "surrogatepass")


class SseResponse:
    """Streams `frames` to the client until they end, the client leaves, `closing` is set (then a final
    `closing` event says the server is going away), or — watched for `principal` — its user loses access
    (the final word says so).

    Two tasks and nothing per event: a reader moves frames from the source into a bounded buffer; once the
    source has nothing more ready, everything buffered goes out in one write — from the reader itself when
    the writer is idle (waking the writer would cost a hop of the loop), else by the writer, which takes
    what is buffered after each write of its own. Only one of them writes at a time. Going away, closing
    and losing access wake the writer too, through callbacks set once; the ping is one timer that re-arms
    itself and sends `: ping` when nothing was sent since it last ran (so an idle stream gets one every
    `ping_s` to 2 × `ping_s` seconds)."""

    def __init__(self, frames: AsyncIterator[bytes], closing: asyncio.Event, *, ping_s: float = PING_S,
                 buffer: int = BUFFER, watch: Watch | None = None, principal: Principal | None = None) -> None:
        self.frames = frames
        self.closing = closing
        self.ping_s = ping_s
        self.buffer = buffer
        self.watch = watch
        self.principal = principal
        self.failure: str | None = None  # why the source broke off, told in the final `closing` event
        self._pending: deque[bytes] = deque()  # read from the source, not yet sent
        self._read_all = False  # the source ended, failed or was given up on: nothing more comes
        self._lagged = False  # the client let `buffer` frames pile up: its stream is closed
        self._sent = False  # something went out since the ping timer last ran
        self._ping_due = False
        self._wake: asyncio.Future[None] | None = None  # the writer waits on it while it has nothing to do
        self._ping: asyncio.TimerHandle | None = None
        self._send: Send | None = None  # set once the stream's head went out: the reader may write then
        self._stalled: Awaitable[None] | None = None  # a write the reader began that must wait: the writer's
        self._broken = False  # a write the reader began failed: the client is gone

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-store"),
            (b"x-accel-buffering", b"no")]})
        loop = asyncio.get_running_loop()
        revoked = self.watch.follow(self.principal) if self.watch and self.principal else asyncio.Event()
        reader = asyncio.create_task(self._read())
        gone = asyncio.create_task(_disconnected(receive))
        closing = asyncio.create_task(self.closing.wait())
        ending = asyncio.create_task(revoked.wait())
        for task in (gone, closing, ending):
            task.add_done_callback(lambda _: self._nudge())
        self._ping = loop.call_later(self.ping_s, self._tick, loop)
        try:
            await send({"type": "http.response.body", "body": f"retry: {RETRY_MS}\n\n".encode(), "more_body": True})
            self._send = send
            final = await self._write(send, loop, gone, closing, ending)
            if final is not None:
                await send({"type": "http.response.body", "body": frame({"reason": final}, event="closing"),
                            "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:  # the client went away mid-write
            pass
        finally:
            if self._ping is not None:
                self._ping.cancel()
            if self.watch is not None:
                self.watch.forget(revoked)
            for task in (reader, gone, closing, ending):
                task.cancel()
            await asyncio.gather(reader, gone, closing, ending, return_exceptions=True)

    async def _write(self, send: Send, loop: asyncio.AbstractEventLoop, gone: asyncio.Task[None],
                     closing: asyncio.Task[bool], revoked: asyncio.Task[bool]) -> str | None:
        """Send frames as they come; returns the reason for a final `closing` event, or None."""
        while True:
            if self._stalled is not None:
                stalled, self._stalled = self._stalled, None
                await stalled
                continue
            if self._broken:
                return None
            if revoked.done():
                return self.revoked_reason()
            if gone.done():
                return None
            if self._pending:  # all of it in one write: a committed batch reaches the client at once
                body = b"".join(self._pending)
                self._pending.clear()
                self._sent = True
                await send({"type": "http.response.body", "body": body, "more_body": True})
                continue
            if self._lagged:
                return "lagging: reconnect with Last-Event-ID to resume"
            if self._read_all:
                return self.failure
            if closing.done():
                return "the server is shutting down"
            if self._ping_due:
                self._ping_due = False
                await send({"type": "http.response.body", "body": b": ping\n\n", "more_body": True})
                continue
            self._wake = loop.create_future()
            await self._wake

    def _nudge(self) -> None:
        """Wake the writer: there is something to send or to decide."""
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        """The ping timer: a ping is due when nothing went out since the last tick."""
        if not self._sent:
            self._ping_due = True
            self._nudge()
        self._sent = False
        self._ping = loop.call_later(self.ping_s, self._tick, loop)

    def revoked_reason(self) -> str:
        if self.principal is not None and self.principal.session is not None:
            return "access revoked: this share link was revoked or has expired"
        return "access revoked: this user's token no longer opens this server"

    async def _read(self) -> None:
        try:
            while True:
                try:
                    chunk = await self._next_frame()
                except StopAsyncIteration:
                    return
                if len(self._pending) >= self.buffer:
                    self._lagged = True
                    return
                self._pending.append(chunk)
        except Exception as exc:  # the source failed (a store that cannot be read): say so, then end
            log_failure(log, "an event stream", exc)
            self.failure = f"the stream failed: {exc}"
        finally:
            self._read_all = True
            self._nudge()
            with contextlib.suppress(Exception):
                await self.frames.aclose()  # type: ignore[attr-defined]  # an async generator

    async def _next_frame(self) -> bytes:
        """The source's next frame; when it has none ready, what was read goes out first (`_flush`).

        The source's step is started here, not awaited: a frame it has at once comes back without waiting,
        and only when it must wait is what was read flushed, so a batch of frames goes out in one write."""
        step: Any = self.frames.__anext__()
        if not hasattr(step, "send"):  # not an async generator's step (it has send and throw): just await it
            self._flush()
            made: bytes = await step
            return made
        try:
            waiting = step.send(None)
        except StopIteration as ready:
            made = ready.value  # what the source yielded, at once
            return made
        self._flush()
        made = await _Resumed(step, waiting)
        return made

    def _flush(self) -> None:
        """Send what was read: from here when the writer waits for something to do (else it is the writer's
        to send next). The write is begun here and never waited for: one the client is not ready for (its
        socket's buffer is full) is finished by the writer, so the reader goes on reading and a client that
        does not drain its stream still has it closed for lagging."""
        if not self._pending:
            return
        if self._send is None or self._wake is None or self._wake.done():
            self._nudge()  # the writer is busy (it takes what is buffered next) or has not begun
            return
        body = b"".join(self._pending)
        self._pending.clear()
        self._sent = True
        write: Any = self._send({"type": "http.response.body", "body": body, "more_body": True})
        if not hasattr(write, "send"):  # not a coroutine: the writer awaits it
            self._stalled = write
            self._nudge()
            return
        try:
            waiting = write.send(None)
        except StopIteration:
            return  # written
        except OSError:  # the client went away mid-write
            self._broken = True
        else:
            self._stalled = _Resumed(write, waiting)
        self._nudge()


class _Resumed:
    """Awaits the rest of a coroutine step already begun (`send(None)` once, which gave `waiting`): what
    `yield from` does, without its first `send`."""

    def __init__(self, step: Any, waiting: Any) -> None:
        self.step = step
        self.waiting = waiting

    def __await__(self) -> Any:
        step, waiting = self.step, self.waiting
        while True:
            try:
                value = yield waiting
            except GeneratorExit:  # closed unfinished: so is the step
                step.close()
                raise
            except BaseException as exc:  # a cancellation: the step gets it where it waits
                try:
                    waiting = step.throw(exc)
                except StopIteration as done:
                    return done.value
                continue
            try:
                waiting = step.send(value)
            except StopIteration as done:
                return done.value


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
