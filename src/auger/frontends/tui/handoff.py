"""Handing a terminal's session to an `auger serve` on the same store (`/handoff`, or `auger handoff ID`
from anywhere), seen from the terminal.

How: the server is asked to take the session over (`POST /api/sessions/{id}/handoff`); from then on it
leaves every op its clients send for the session in the store, and this process takes them and applies
them (`StoreRelay`) — an approval answered on a phone, an interrupt, input typed in a browser — for as
long as its turn runs. At the turn's end (at once, with no turn running) this process shuts the session
down and lets go of its lease, and the server opens it and goes on. Meanwhile the terminal has become a
client of the server (tui/remote.py), following the session's events from the last one it showed — so
nothing is shown twice or missed, a running turn keeps running, and a waiting approval keeps waiting,
answerable from any client. docs/server.md says why it is done this way rather than another.

Before a handoff, ops the server leaves for this terminal's session are not taken (the user has not given
the session to anyone), except the server's note that someone asked it to take the session over
(`auger handoff ID`): then this terminal hands it over as if `/handoff` had been typed.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING

from auger.frontends.tui.relay import StoreRelay

if TYPE_CHECKING:
    from auger.frontends.tui.feed import LocalFeed
    from auger.frontends.tui.sessions import LocalSessions
    from auger.frontends.tui.view import Tui

def start_relay(tui: Tui, feed: LocalFeed) -> StoreRelay:
    """Follow the ops left for `feed`'s session while this terminal runs it."""
    def asked(url: str) -> None:
        if not relay.handing:
            _ASKED.add(asyncio.ensure_future(hand_off(tui, url, asked=True)))

    relay = StoreRelay(feed, on_handoff=asked, say=lambda text: tui.say(text, "yellow"))
    return relay


_ASKED: set = set()  # handoffs begun by a server's note (kept referenced until they end)


async def hand_off(tui: Tui, url: str | None, *, asked: bool = False) -> None:
    """Give this terminal's session to the server at `url` (default: `AUGER_SERVER_URL`, else the `auger serve`
    running on this store) and follow it there; `asked`: the server was asked already (its note came)."""
    from auger.frontends.tui.feed import LocalFeed
    from auger.frontends.tui.sessions import LocalSessions

    feed, local, relay = tui.feed, tui.sessions, tui.relay
    if not isinstance(feed, LocalFeed) or not isinstance(local, LocalSessions) or relay is None:
        tui.say(f"this session already lives in {tui.sessions.where}" if tui.sessions.where else
                "no session is open", "yellow")
        return
    if relay.handing:
        tui.say(f"session {feed.id[:8]} is being handed over already", "yellow")
        return
    relay.handing = True
    try:
        await _hand_off(tui, feed, local, relay, url, asked)
    finally:
        relay.handing = relay.yielding


async def _hand_off(tui: Tui, feed: LocalFeed, local: LocalSessions, relay: StoreRelay, url: str | None,
                    asked: bool) -> None:
    from auger._errors import AugerError
    from auger.frontends.servers import URL_ENV, ServerError, client_for, running_server, store_name
    from auger.frontends.tui.remote import RemoteFeed, RemoteSessions

    if url is None:
        from auger.config import home_dirs

        url = os.environ.get(URL_ENV) or None
        if url is None:
            found = running_server(home_dirs()["data"], store_name(local.db_path))
            if found is None:
                tui.say(f"no `auger serve` runs on this session's store ({store_name(local.db_path)}): start one "
                        "there (auger serve --db …), or /handoff URL", "yellow")
                return
            url = found.url
    try:
        client = client_for(url)
    except ServerError as exc:
        tui.say(f"✗ not handed over: {exc}", "red")
        return
    try:
        answer = None if asked else await client.request("POST", f"/api/sessions/{feed.id}/handoff", json={})
        snapshot = await client.describe(feed.id)
        session = await client.attach(feed.id)
    except AugerError as exc:
        tui.say(f"✗ not handed over: {exc}", "red")
        await client.aclose()
        return
    remote = RemoteSessions(local.config, local.root, client)
    remote.report = lambda text: tui.say(text, "yellow")
    await tui.stop_following()  # what it showed last is where the server's stream takes over
    tui.continue_with(RemoteFeed(client, session, snapshot, after=tui.seen_seq, report=remote.report), remote)
    relay.yielding = True
    tui.handing = asyncio.create_task(_let_go(tui, relay, local, client.url))
    if answer is None:
        tui.say(f"handed to {client.url} (asked there): this terminal now follows the session in it")
        return
    tui.say(f"handed to {client.url}: this terminal now follows the session there; the running turn goes on here "
            "until it ends" if feed.turn_running else f"handed to {client.url}: this terminal now follows it there")
    tui.say(f"open it on a phone: {answer['pair']} (works once, for {int(answer['expires_in'] // 60)} minutes); "
            f"in a browser paired already: {answer['url']}")


async def _let_go(tui: Tui, relay: StoreRelay, local: LocalSessions, where: str) -> None:
    """Once the relay let the session go (its turn ended, it shut down here): what only the server may do is
    left for it, the lease released, this process's store closed."""
    await relay.done.wait()
    session = relay.feed.session
    try:
        for text in relay.held:
            await session.store.post_op(session.id, text)
    finally:
        await local.release()
        await local.aclose()
    tui.say(f"session {session.id[:8]} runs in {where} now", "dim")
