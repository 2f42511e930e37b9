"""A session's event stream: numbering, persistence and fan-out to any number of subscribers.

Every event gets the next sequence number of its session (contiguous, continuing from the last one
stored, so numbers go on across restarts) and an `Envelope`. Envelopes are written to the store in
batches through its single writer thread: a batch is queued at the end of the current loop step, or
at once before an item is recorded (`flush`), so the writer commits them in emission order with the
items, and emitting never waits on disk.

A subscriber reads from any sequence number: first what came after it (from the recent-envelope
ring, or from the store when the ring no longer reaches back that far), then live envelopes from
its own bounded queue. It registers before it catches up, so the switch-over has no gap, and skips
anything at or below what it already yielded, so it has no duplicate. A subscriber too slow to keep
its queue below the bound never blocks the session or the others: its queue is dropped and it
catches up again from the ring or the store, the same way it started.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import AsyncIterator

from auger.protocol.envelope import Envelope
from auger.protocol.events import Event, ShutdownComplete
from auger.store.base import Store

log = logging.getLogger("auger.stream")

# Bounds on memory per session and per subscriber (a tool_call_ended can carry tens of KB of output).
RECENT = 512  # envelopes kept in memory for subscribers that start or fall a little behind
SUBSCRIBER_LIMIT = 512  # envelopes a subscriber may have unread before it falls back to catching up


class _Subscriber:
    def __init__(self, limit: int) -> None:
        self.queue: asyncio.Queue[Envelope] = asyncio.Queue(limit)
        self.overflowed = False

    def offer(self, envelope: Envelope) -> None:
        if self.overflowed:
            return
        try:
            self.queue.put_nowait(envelope)
        except asyncio.QueueFull:
            self.overflowed = True  # what it missed is in the ring or the store; free the memory now
            self.queue = asyncio.Queue(self.queue.maxsize)


class EventStream:
    def __init__(self, session_id: str, store: Store, *, recent: int = RECENT,
                 subscriber_limit: int = SUBSCRIBER_LIMIT) -> None:
        self.session_id = session_id
        self.store = store
        self.seq = 0  # the last number given out
        self.first_seq = 1  # the first number this stream gives out (after `open`)
        self.ended = False  # ShutdownComplete was emitted: nothing follows it
        self._opened = False
        self._early: list[tuple[Event, str | None, str | None, float]] = []  # emitted before `open` knew the numbering
        self._recent: deque[Envelope] = deque(maxlen=recent)
        self._subscribers: set[_Subscriber] = set()
        self._subscriber_limit = subscriber_limit
        self._unsaved: list[Envelope] = []
        self._flush_scheduled = False
        self._saving: asyncio.Future[None] | None = None

    async def open(self) -> None:
        """Continue the numbering after the last stored event (a resumed session goes on from there)."""
        self.seq = await self.store.last_event_seq(self.session_id)
        self.first_seq = self.seq + 1
        self._opened = True
        early, self._early = self._early, []
        for event, submission_id, parent_call_id, when in early:
            self._publish(event, submission_id, parent_call_id, when)

    def emit(self, event: Event, submission_id: str | None = None,
             parent_call_id: str | None = None) -> Envelope | None:
        """Number and publish an event; `parent_call_id` names the spawn call of the sub-agent it came from.
        Returns its envelope (None while the numbering is not known yet, before `open`)."""
        if not self._opened:
            self._early.append((event, submission_id, parent_call_id, time.time()))
            return None
        return self._publish(event, submission_id, parent_call_id, time.time())

    def _publish(self, event: Event, submission_id: str | None, parent_call_id: str | None,
                 when: float) -> Envelope:
        self.seq += 1
        envelope = Envelope(self.session_id, self.seq, event, submission_id, parent_call_id, when)
        self._recent.append(envelope)
        self._unsaved.append(envelope)
        for subscriber in self._subscribers:
            subscriber.offer(envelope)
        if isinstance(event, ShutdownComplete):
            self.ended = True
            self.flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)
        return envelope

    def flush(self) -> None:
        """Queue every unsaved envelope for writing now, ahead of any write queued after this call."""
        self._flush_scheduled = False
        if not self._unsaved:
            return
        batch, self._unsaved = self._unsaved, []
        try:
            self._saving = self.store.append_events(self.session_id, batch)
        except RuntimeError:  # the store was closed under a still-emitting session: nothing can be kept
            log.warning("session %s: %d events not stored (store closed)", self.session_id, len(batch))
            return
        self._saving.add_done_callback(_report_failure)

    async def saved(self) -> None:
        """Wait until every envelope emitted so far is in the store."""
        self.flush()
        if self._saving is not None:
            await asyncio.wait([self._saving])

    async def subscribe(self, after_seq: int | None = None, *,
                        limit: int | None = None) -> AsyncIterator[Envelope]:
        """Envelopes with seq > `after_seq` (default: this stream's first), through this run's ShutdownComplete."""
        cursor = self.first_seq - 1 if after_seq is None else max(after_seq, 0)
        subscriber = _Subscriber(limit or self._subscriber_limit)
        self._subscribers.add(subscriber)
        try:
            while True:
                live_from = self.seq  # everything after this reaches the subscriber's queue
                for envelope in await self._backlog(cursor, live_from):
                    yield envelope
                    cursor = envelope.seq
                    if self._ends(envelope):
                        return
                if self.ended and cursor >= self.seq:
                    return
                while not subscriber.overflowed:
                    envelope = await subscriber.queue.get()
                    if envelope.seq <= cursor:
                        continue
                    yield envelope
                    cursor = envelope.seq
                    if self._ends(envelope):
                        return
                subscriber.overflowed = False  # catch up from the ring or the store, then live again
        finally:
            self._subscribers.discard(subscriber)

    def _ends(self, envelope: Envelope) -> bool:
        """This run's ShutdownComplete ends a subscription; a stored one from an earlier run does not."""
        return envelope.seq >= self.first_seq and isinstance(envelope.event, ShutdownComplete)

    async def _backlog(self, after: int, upto: int) -> list[Envelope]:
        if upto <= after:
            return []
        if self._recent and self._recent[0].seq <= after + 1:
            return [e for e in self._recent if after < e.seq <= upto]
        await self.saved()
        return await self.store.load_events(self.session_id, after, upto)


def _report_failure(future: asyncio.Future[None]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.error("storing events failed", exc_info=future.exception())
