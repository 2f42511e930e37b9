"""A session's event stream: numbering, persistence and fan-out to any number of subscribers.

Every event gets the next sequence number of its session (contiguous, continuing from the last one
stored, so numbers go on across restarts) and an `Envelope`. Stored before shown: an envelope reaches
subscribers (a `--json` printer, a UI, a server) only once its row is committed, so whatever a client
has seen survives a `kill -9`, and a resumed session, numbering on from the last stored event, never
gives a seen number to another event. Envelopes are written in batches through the store's single
writer thread, so the writer commits them in emission order with the items: a batch is queued at the
end of the current loop step, or — while one is being written — when that one is committed (a fast
stream of deltas makes larger batches, not a queue of small ones), or at once before an item is
recorded (`flush`). Emitting never waits on disk; delivery waits for about one commit.

A subscriber reads from any sequence number: first what came after it (from the recent-envelope
ring, or from the store when the ring no longer reaches back that far), then live envelopes from
its own bounded queue. It registers before it catches up, so the switch-over has no gap, and skips
anything at or below what it already yielded, so it has no duplicate. A subscriber too slow to keep
its queue below the bound never blocks the session or the others: its queue is dropped and it
catches up again from the ring or the store, the same way it started.

A batch the store cannot write (a full disk) ends the stream: nothing after it is stored or shown
(a later batch would leave a gap), and every subscriber, once it has read what was committed, gets
the `StoreError`, so a client can say why the session stopped instead of waiting for events that will
never come.

With `AUGER_TRACE_COMMITS` set to a file's path, each committed batch appends one line to it, `SESSION
FIRST_SEQ LAST_SEQ UNIX_TIME`, stamped as the batch's commit reaches this loop (before any subscriber is
offered it): bench/bench_server.py measures its clients' latency from there, without the wire changing.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import time
from collections import deque
from typing import AsyncIterator, TextIO

from auger.protocol.envelope import Envelope
from auger.protocol.events import Event, ShutdownComplete
from auger.store.base import Store, StoreError

log = logging.getLogger("auger.stream")

# Bounds on memory per session and per subscriber (a tool_call_ended can carry tens of KB of output).
RECENT = 512  # envelopes kept in memory for subscribers that start or fall a little behind
SUBSCRIBER_LIMIT = 512  # envelopes a subscriber may have unread before it falls back to catching up
COMMIT_TRACE = "AUGER_TRACE_COMMITS"  # the environment variable naming the commit trace's file (see above)


def _commit_trace() -> TextIO | None:
    """The commit trace's file, opened once and closed (so flushed) at exit; None when it is off."""
    path = os.environ.get(COMMIT_TRACE)
    if not path:
        return None
    trace = open(path, "a", encoding="utf-8")  # noqa: SIM115  # held for the process's life
    atexit.register(trace.close)
    return trace


_trace = _commit_trace()


class _Subscriber:
    def __init__(self, limit: int) -> None:
        self.queue: asyncio.Queue[Envelope | None] = asyncio.Queue(limit)
        self.overflowed = False

    def offer(self, envelope: Envelope) -> None:
        if self.overflowed:
            return
        try:
            self.queue.put_nowait(envelope)
        except asyncio.QueueFull:
            self.overflowed = True  # what it missed is in the ring or the store; free the memory now
            self.queue = asyncio.Queue(self.queue.maxsize)

    def wake(self) -> None:
        """Make the subscriber leave its queue and look at the stream's state again (it failed)."""
        self.overflowed = True
        try:
            self.queue.put_nowait(None)  # ends a wait on an empty queue; a full one is not waited on
        except asyncio.QueueFull:
            pass


class EventStream:
    def __init__(self, session_id: str, store: Store, *, recent: int = RECENT,
                 subscriber_limit: int = SUBSCRIBER_LIMIT) -> None:
        self.session_id = session_id
        self.store = store
        self.seq = 0  # the last number given out
        self.delivered = 0  # the last number committed and handed to subscribers
        self.first_seq = 1  # the first number this stream gives out (after `open`)
        self.ended = False  # this run's ShutdownComplete was delivered: nothing follows it
        self.failure: StoreError | None = None  # a batch could not be stored: nothing more is stored or shown
        self._opened = False
        self._early: list[tuple[Event, str | None, str | None, float]] = []  # emitted before `open` knew the numbering
        self._recent: deque[Envelope] = deque(maxlen=recent)
        self._subscribers: set[_Subscriber] = set()
        self._subscriber_limit = subscriber_limit
        self._unsaved: list[Envelope] = []
        self._flush_scheduled = False
        self._writing = 0  # batches queued and not yet committed
        self._saving: asyncio.Future[None] | None = None

    async def open(self, *, new: bool = False) -> None:
        """Continue the numbering after the last stored event (a resumed session goes on from there); a `new`
        session (its id made just now: nothing can have been stored under it) starts at 1 without asking."""
        self.seq = self.delivered = 0 if new else await self.store.last_event_seq(self.session_id)
        self.first_seq = self.seq + 1
        self._opened = True
        early, self._early = self._early, []
        for event, submission_id, parent_call_id, when in early:
            self._publish(event, submission_id, parent_call_id, when)

    def emit(self, event: Event, submission_id: str | None = None,
             parent_call_id: str | None = None) -> Envelope | None:
        """Number an event and queue it for storing, then showing; `parent_call_id` names the spawn call of
        the sub-agent it came from. Returns its envelope (None while the numbering is not known yet, before
        `open`, and once the store has failed: nothing more is numbered then)."""
        if not self._opened:
            self._early.append((event, submission_id, parent_call_id, time.time()))
            return None
        return self._publish(event, submission_id, parent_call_id, time.time())

    def _publish(self, event: Event, submission_id: str | None, parent_call_id: str | None,
                 when: float) -> Envelope | None:
        if self.failure is not None:
            log.debug("session %s: %s not stored or shown: the store failed", self.session_id, event.TYPE)
            return None
        self.seq += 1
        envelope = Envelope(self.session_id, self.seq, event, submission_id, parent_call_id, when)
        self._unsaved.append(envelope)
        if isinstance(event, ShutdownComplete):
            self.flush()
        elif not self._flush_scheduled and not self._writing:  # else: queued when the batch being written is
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)
        return envelope

    def flush(self) -> None:
        """Queue every unsaved envelope for writing now, ahead of any write queued after this call; each
        batch is shown to subscribers once it is committed."""
        self._flush_scheduled = False
        if not self._unsaved or self.failure is not None:
            return
        batch, self._unsaved = self._unsaved, []
        try:
            saving = self.store.append_events(self.session_id, batch)
        except RuntimeError:  # the store was closed under a still-emitting session: nothing can be kept
            self._fail(StoreError(f"events of session {self.session_id[:8]} not stored: the store is closed"))
            return
        self._saving = saving
        self._writing += 1
        saving.add_done_callback(lambda done: self._committed(batch, done))

    def _committed(self, batch: list[Envelope], done: asyncio.Future[None]) -> None:
        """A batch is stored (the writer commits batches in the order they were queued): show it, and queue
        what was emitted meanwhile."""
        self._writing -= 1
        if not self._writing:
            self.flush()
        problem = None if done.cancelled() else done.exception()
        if done.cancelled() or problem is not None:
            self._fail(problem if isinstance(problem, StoreError) else
                       StoreError(f"events of session {self.session_id[:8]} not stored: {problem or 'cancelled'}"))
            return
        if self.failure is not None:  # an earlier batch failed: this one is refused by the store too
            return
        if _trace is not None:
            _trace.write(f"{self.session_id} {batch[0].seq} {batch[-1].seq} {time.time():.6f}\n")
        for envelope in batch:
            self._recent.append(envelope)
            for subscriber in self._subscribers:
                subscriber.offer(envelope)
        self.delivered = batch[-1].seq
        self.ended = self.ended or any(isinstance(e.event, ShutdownComplete) for e in batch)

    def _fail(self, failure: StoreError) -> None:
        if self.failure is not None:
            return
        log.debug("session %s: %s", self.session_id, failure)
        self.failure = failure
        self._unsaved = []
        for subscriber in self._subscribers:
            subscriber.wake()

    async def saved(self) -> None:
        """Wait until every envelope emitted so far is stored (or could not be)."""
        self.flush()
        if self._saving is not None:
            await asyncio.wait([self._saving])

    async def subscribe(self, after_seq: int | None = None, *,
                        limit: int | None = None) -> AsyncIterator[Envelope]:
        """Stored envelopes with seq > `after_seq` (default: this stream's first), through this run's
        ShutdownComplete; StoreError once the store failed and everything stored was read."""
        cursor = self.first_seq - 1 if after_seq is None else max(after_seq, 0)
        subscriber = _Subscriber(limit or self._subscriber_limit)
        self._subscribers.add(subscriber)
        try:
            while True:
                live_from = self.delivered  # everything after this reaches the subscriber's queue
                for envelope in await self._backlog(cursor, live_from):
                    yield envelope
                    cursor = envelope.seq
                    if self._ends(envelope):
                        return
                if cursor >= self.delivered:
                    if self.failure is not None:
                        raise self.failure
                    if self.ended:
                        return
                while not subscriber.overflowed:
                    live = await subscriber.queue.get()
                    if live is None or live.seq <= cursor:
                        continue
                    yield live
                    cursor = live.seq
                    if self._ends(live):
                        return
                subscriber.overflowed = False  # catch up from the ring or the store, then live again
        finally:
            self._subscribers.discard(subscriber)

    def _ends(self, envelope: Envelope) -> bool:
        """This run's ShutdownComplete ends a subscription; a stored one from an earlier run does not."""
        return envelope.seq >= self.first_seq and isinstance(envelope.event, ShutdownComplete)

    async def _backlog(self, after: int, upto: int) -> list[Envelope]:
        """Envelopes after `after` through `upto`, all committed: from the ring when it reaches back that
        far, else from the store."""
        if upto <= after:
            return []
        if self._recent and self._recent[0].seq <= after + 1:
            return [e for e in self._recent if after < e.seq <= upto]
        return await self.store.load_events(self.session_id, after, upto)
