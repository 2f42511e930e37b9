"""A session's events for a client, by sequence number, from wherever they are.

`session_envelopes` yields every envelope after a cursor exactly once, in order, forever: from the
live session while it is open in this server (`Session.subscribe(after_seq)`, which replays from its
ring or the store first), else from the store — and, while the session is not open here, it keeps
reading the store, so a session another process runs (`auger exec` on the same `--db`) is followed
too, and one this server opens later is joined live. Because the store is the source, a client that
saw up to N resumes at N + 1 after a dropped connection or a server restart alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, AsyncIterator

from auger.frontends.server.sse import frame
from auger.protocol.envelope import Envelope

if TYPE_CHECKING:
    from auger.frontends.server.sessions import Hub

STORE_POLL_S = 0.5  # how often the store is read for a session this server does not run


async def session_envelopes(hub: Hub, session_id: str, after: int) -> AsyncIterator[Envelope]:
    cursor = after
    while True:
        session = hub.live(session_id)
        if session is not None:
            async for envelope in session.subscribe(after_seq=cursor):
                yield envelope
                cursor = envelope.seq
            continue  # it shut down: what comes later comes from the store, or from its next opening here
        for envelope in await hub.store.load_events(session_id, cursor):
            yield envelope
            cursor = envelope.seq
        await hub.wait_opened(session_id, STORE_POLL_S)


async def session_frames(hub: Hub, session_id: str, after: int, state: dict[str, Any]) -> AsyncIterator[bytes]:
    """The SSE frames of one client's stream: the unnumbered `state` snapshot, then the envelopes."""
    yield frame(state, event="state")
    async for envelope in session_envelopes(hub, session_id, after):
        yield frame(envelope.to_json(), seq=envelope.seq)


async def list_frames(hub: Hub) -> AsyncIterator[bytes]:
    """The coarse stream of the session list (created, updated, turns, approvals anywhere); unnumbered:
    a client that reconnects lists the sessions again."""
    async for event in hub.list_events.subscribe():
        yield frame(event)
