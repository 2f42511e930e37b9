"""A session's events for a client, by sequence number, from wherever they are.

`session_envelopes` yields every envelope after a cursor exactly once, in order, forever: from the
live session while it is open in this server (`Session.subscribe(after_seq)`, which replays from its
ring or the store first), else from the store — and, while the session is not open here, it keeps
reading the store, so a session another process runs (`auger exec` on the same `--db`) is followed
too, and one this server opens later is joined live. Because the store is the source, a client that
saw up to N resumes at N + 1 after a dropped connection or a server restart alike.

An envelope's frame is encoded once for all the clients of its session (`session_frame`): a session's
number is never given to another event, so (session, seq) names the same bytes wherever the envelope
came from, and the few hundred newest are kept, which is what clients following live ask for.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, AsyncIterator

from auger.frontends.server.sse import frame, frame_of
from auger.protocol.envelope import Envelope

if TYPE_CHECKING:
    from auger.frontends.server.sessions import Hub

STORE_POLL_S = 0.5  # how often the store is read for a session this server does not run (while it changes)
STORE_POLL_MAX_S = 4.0  # ...and at most this seldom while it does not
LIST_POLL_S = 2.0  # how often the store is read for sessions other processes run, for the session list
LIST_POLLED = 50  # the most recently updated sessions compared at each read
FRAMES_KEPT = 256  # encoded envelope frames kept for the other clients of their session

_frames: OrderedDict[tuple[str, int], bytes] = OrderedDict()


def session_frame(envelope: Envelope) -> bytes:
    """The envelope's SSE frame, encoded by the first client of its session that sends it."""
    key = (envelope.session_id, envelope.seq)
    encoded = _frames.get(key)
    if encoded is None:
        encoded = _frames[key] = frame_of(envelope.text(), seq=envelope.seq)
        if len(_frames) > FRAMES_KEPT:
            _frames.popitem(last=False)
    return encoded


async def session_envelopes(hub: Hub, session_id: str, after: int) -> AsyncIterator[Envelope]:
    cursor = after
    poll = STORE_POLL_S
    while True:
        session = hub.live(session_id)
        if session is not None:
            async for envelope in session.subscribe(after_seq=cursor):
                yield envelope
                cursor = envelope.seq
            continue  # it shut down: what comes later comes from the store, or from its next opening here
        found = await hub.store.load_events(session_id, cursor)
        for envelope in found:
            yield envelope
            cursor = envelope.seq
        # a quiet session is read less often; one being handed over here is about to go on here
        poll = STORE_POLL_S if found or hub.adopting(session_id) else min(poll * 2, STORE_POLL_MAX_S)
        await hub.wait_opened(session_id, poll)


async def session_frames(hub: Hub, session_id: str, after: int, state: dict[str, Any]) -> AsyncIterator[bytes]:
    """The SSE frames of one client's stream: the unnumbered `state` snapshot, then the envelopes."""
    yield frame(state, event="state")
    async for envelope in session_envelopes(hub, session_id, after):
        yield session_frame(envelope)


async def list_frames(hub: Hub, poll_s: float = LIST_POLL_S) -> AsyncIterator[bytes]:
    """The coarse stream of the session list (created, updated, turns, approvals anywhere); unnumbered:
    a client that reconnects lists the sessions again. Sessions this server does not run (`auger exec` on
    the same database) are found by reading the store every `poll_s` seconds: `session_updated`."""
    events = hub.list_events.subscribe()
    pending: asyncio.Task[dict[str, Any]] | None = None
    known = {r.id: r.updated for r in await hub.store.list_sessions(LIST_POLLED)}
    try:
        while True:
            pending = pending or asyncio.ensure_future(anext(events))
            done, _ = await asyncio.wait({pending}, timeout=poll_s)
            if done:
                try:
                    event = pending.result()
                except StopAsyncIteration:  # dropped for falling behind: the client lists again
                    return
                pending = None
                yield frame(event)
                continue
            for record in await hub.store.list_sessions(LIST_POLLED):
                if known.get(record.id) != record.updated and hub.live(record.id) is None \
                        and await hub.visible(record):
                    yield frame({"type": "session_updated", "session_id": record.id, "title": record.title,
                                 "updated": record.updated, "open": False})
                known[record.id] = record.updated
    finally:
        if pending is not None:  # the generator is closed only once the read it is running has ended
            pending.cancel()
            await asyncio.gather(pending, return_exceptions=True)
        await events.aclose()
