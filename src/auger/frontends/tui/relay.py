"""The ops a server leaves in the store for a session this terminal runs (frontends/relay.py has their
form): before a handoff only the server's note that it was asked to take the session over is acted on;
once handed over, every op is applied here until the turn ends, and then the session is let go.
tui/handoff.py says how the two halves of a handoff fit."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from auger.frontends.tui.feed import LocalFeed

POLL_S = 0.5  # how often the store is read for ops left for this terminal's session
YIELD_POLL_S = 0.2  # ...while it is being handed over


class StoreRelay:
    """The ops a server leaves in the store for a session this terminal runs."""

    def __init__(self, feed: LocalFeed, *, on_handoff: Callable[[str], None], say: Callable[[str], None]) -> None:
        self.feed = feed
        self.on_handoff = on_handoff
        self.say = say
        self.handing = False  # a handoff has begun (asked for here, or by the server's note)
        self.yielding = False  # handed over: take the ops, and let go at the turn's end
        self.held: list[str] = []  # what this process may not do for a server (a shutdown): left for it
        self.done = asyncio.Event()
        self.task = asyncio.create_task(self._run(), name=f"tui-relay-{feed.id}")

    async def _run(self) -> None:
        from auger.frontends import relay
        from auger.protocol.ops import Shutdown
        from auger.store.base import StoreError

        session = self.feed.session
        try:
            while not session.shut_down:
                taken = await session.store.take_ops(session.id)
                for text in taken:
                    row = relay.read(text)
                    if row is None:
                        continue
                    if row.handoff is not None:
                        self.on_handoff(row.handoff)
                    elif not self.yielding:
                        self.say(f"! a {row.op.TYPE if row.op else 'note'} sent through a server was not taken: "
                                 "this session runs in this terminal (/handoff gives it to the server)")
                    elif isinstance(row.op, Shutdown):
                        self.held.append(text)
                    else:
                        problem = relay.apply(session, row, always=False)
                        if problem:
                            self.say(f"! {problem}")
                if self.yielding and not taken and not session.turn_running and not session.pending_input:
                    break  # the turn boundary: let go
                await asyncio.sleep(YIELD_POLL_S if self.yielding else POLL_S)
            if self.yielding and not session.shut_down:
                self.feed.shutdown()
                await self.feed.closed()
        except StoreError as exc:
            self.say(f"✗ the store cannot be read for ops sent through a server: {exc}")
        finally:
            self.done.set()
