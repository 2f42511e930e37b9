"""The terminal as a client of `auger serve`: `auger login URL` (keep a server's token), `auger attach [ID]`
(the terminal UI on one of the server's sessions), and how `auger --connect URL` finds its server and
token (frontends/servers.py keeps both). docs/tui.md and docs/server.md describe them."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any, Callable

from auger.frontends.cli_support import CliError

if TYPE_CHECKING:
    from auger._remote import Client

def add_commands(sub: Any, store_opts: Callable[[argparse.ArgumentParser], None]) -> dict[str, argparse.ArgumentParser]:
    p_login = sub.add_parser("login", help="keep a server's token for `auger --connect URL` and `auger attach`")
    p_login.add_argument("url", help="the server: http://HOST:PORT or https://HOST:PORT")
    p_login.add_argument("--token-stdin", action="store_true",
                         help="read the token from standard input (otherwise it is asked for, unechoed)")
    p_login.set_defaults(run=_cmd_login)

    p_attach = sub.add_parser("attach", help="the terminal UI on a session of an `auger serve` (running ones are "
                                             "offered first); leaving it leaves it running")
    p_attach.add_argument("session_id", nargs="?", help="session id or a unique prefix; omitted: pick one")
    connect_option(p_attach)
    p_attach.add_argument("-C", "--cd", dest="cwd", help="directory new sessions are asked for in (default: here)")
    store_opts(p_attach)
    p_attach.set_defaults(run=_cmd_attach)

    p_handoff = sub.add_parser("handoff", help="move a session into the `auger serve` on its store (one a terminal "
                                               "runs: at its turn's end) and follow it there from this terminal")
    p_handoff.add_argument("session_id", help="session id or a unique prefix (see `auger sessions`)")
    connect_option(p_handoff)
    p_handoff.add_argument("--no-attach", action="store_true", help="only hand it over and print its links")
    store_opts(p_handoff)
    p_handoff.set_defaults(run=_cmd_handoff)

    p_share = sub.add_parser("share", help="a read-only link to a session, from its `auger serve` (`auger share ID "
                                           "[--expires 1h]`); `auger share list [ID]`, `auger share revoke SHARE`")
    p_share.add_argument("words", nargs="+", metavar="ID | list [ID] | revoke SHARE",
                         help="a session id (or a unique prefix) to share; `list`; `revoke` and a share's id")
    p_share.add_argument("--expires", default="24h", metavar="DURATION",
                         help="how long the link works: 90s, 30m, 1h, 7d… (default 24h, at most 30d)")
    p_share.add_argument("--json", action="store_true", help="print JSON")
    connect_option(p_share)
    store_opts(p_share)
    p_share.set_defaults(run=_cmd_share)
    return {"login": p_login, "attach": p_attach, "handoff": p_handoff, "share": p_share}


def duration(text: str) -> str:
    """A duration as the server takes it (`90s`, `30m`, `1h`, `7d`; CliError otherwise)."""
    import re

    if not re.fullmatch(r"[0-9]{1,6}[smhd]", text.strip()):
        raise CliError(f"--expires {text!r}: give a number and a unit, s, m, h or d (30m, 1h, 7d)")
    return text.strip()


def connect_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--connect", metavar="URL",
                        help="the `auger serve` whose sessions to use (default: $AUGER_SERVER_URL, else the server "
                             "running on this machine's store)")


def server_url(given: str | None, config: Any) -> str:
    """The server a command talks to: `--connect`, else `AUGER_SERVER_URL`, else the `auger serve` running on
    this machine on the same store (CliError when there is none)."""
    from auger.config import home_dirs
    from auger.frontends.servers import URL_ENV, ServerError, running_server, server_key, store_name

    chosen = given or os.environ.get(URL_ENV)
    if not chosen:
        found = running_server(home_dirs()["data"], store_name(config.db_path))
        if found is None:
            raise CliError(f"no `auger serve` runs on this machine's store ({store_name(config.db_path)}): start "
                           "one, or name a server with --connect URL")
        chosen = found.url
    try:
        return server_key(chosen)
    except ServerError as exc:
        raise CliError(str(exc)) from None


def server_client(url: str) -> Client:
    """A client of the server at `url` with the token for it (CliError, saying how to get one, without)."""
    from auger.frontends.servers import ServerError, client_for

    try:
        return client_for(url)
    except ServerError as exc:
        raise CliError(str(exc)) from None


def run_connected(args: argparse.Namespace, url: str, *, prompt: str | None = None, resume: str | None = None,
                  pick: bool = False) -> int:
    """The terminal UI on the sessions of the server at `url`."""
    from auger.frontends.cli_support import load_cli_config
    from auger.frontends.tui import run_tui

    client = server_client(url)
    if not (sys.stdin is not None and sys.stdin.isatty() and sys.stdout.isatty()):
        raise CliError("the terminal UI needs a terminal: from a script, use the server's API or auger.connect()")
    config = load_cli_config(args)
    root = os.path.abspath(getattr(args, "cwd", None) or os.getcwd())
    return run_tui(config, root, prompt=prompt, resume=resume, pick=pick, server=client)


def _cmd_attach(args: argparse.Namespace) -> int:
    from auger.frontends.cli_support import load_cli_config

    url = server_url(args.connect, load_cli_config(args))
    return run_connected(args, url, resume=args.session_id, pick=not args.session_id)


def _cmd_handoff(args: argparse.Namespace) -> int:
    """Ask the server to take the session over, say where it is now, then (in a terminal) follow it there."""
    import asyncio

    from auger._errors import AugerError
    from auger.frontends.cli_support import find_session, guard_store, load_cli_config, open_store

    config = load_cli_config(args)
    url = server_url(args.connect, config)

    async def hand_over() -> tuple[str, dict[str, Any]]:
        store = open_store(config)
        try:
            record = await find_session(store, args.session_id, "to hand over")
        finally:
            await store.aclose()
        async with server_client(url) as client:
            try:
                return record.id, await client.request("POST", f"/api/sessions/{record.id}/handoff", json={})
            except AugerError as exc:
                raise CliError(f"session {record.id[:8]} not handed over: {exc}") from None

    session_id, answer = guard_store(lambda: asyncio.run(hand_over()))
    state = ("it runs there now" if answer["open"] else
             "it goes on there once the process running it lets it go (a terminal: at its turn's end)")
    print(f"session {session_id[:8]} handed to {url}: {state}")
    print(f"open it on a phone: {answer['pair']} (works once, for {int(answer['expires_in'] // 60)} minutes)")
    print(f"in a browser paired already: {answer['url']}")
    if args.no_attach or not (sys.stdin.isatty() and sys.stdout.isatty()):
        return 0
    return run_connected(args, url, resume=session_id)


def _cmd_share(args: argparse.Namespace) -> int:
    """Make, list or revoke share links through the server the session lives in."""
    import asyncio
    import json
    import time

    from auger._errors import AugerError
    from auger.frontends.cli_support import load_cli_config

    words = args.words
    url = server_url(args.connect, load_cli_config(args))

    async def act() -> Any:
        async with server_client(url) as client:
            try:
                if words[0] == "list" and len(words) <= 2:
                    params = {"session": await _session_id(client, words[1])} if len(words) == 2 else None
                    return (await client.request("GET", "/api/shares", params=params, repeatable=True))["shares"]
                if words[0] == "revoke" and len(words) == 2:
                    return await client.request("POST", f"/api/shares/{words[1]}/revoke", json={})
                if len(words) == 1:
                    session_id = await _session_id(client, words[0])
                    return await client.request("POST", f"/api/sessions/{session_id}/shares",
                                                json={"expires_in": duration(args.expires)})
            except AugerError as exc:
                raise CliError(str(exc)) from None
        raise CliError("usage: auger share ID [--expires 1h] | auger share list [ID] | auger share revoke SHARE")

    answer = asyncio.run(act())
    if args.json:
        print(json.dumps(answer, indent=2))
        return 0

    def when(stamp: float) -> str:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp))

    if words[0] == "list":
        for share in answer:
            state = "live" if share["live"] else "revoked" if share["revoked"] else "expired"
            print(f"{share['id']}  session {share['session_id'][:8]}  {state:<7}  until {when(share['expires'])}  "
                  f"by {share['created_by'] or '-'}")
        if not answer:
            print("no share links")
    elif words[0] == "revoke":
        print(f"share {answer['id']} revoked: its link no longer works, and whoever has it open sees it end now")
    else:
        print(answer["url"])
        print(f"a read-only view of session {answer['session_id'][:8]} until {when(answer['expires'])} "
              f"(share {answer['id']}; `auger share revoke {answer['id']}` ends it sooner)")
    return 0


async def _session_id(client: Client, prefix: str) -> str:
    """The full id of the server's session that `prefix` names (CliError when none or several)."""
    from auger._errors import SessionNotFound

    try:
        return str((await client.describe(prefix))["id"])
    except SessionNotFound:
        pass
    found = [row["id"] for row in await client.sessions(limit=500) if str(row["id"]).startswith(prefix)]
    if len(found) != 1:
        raise CliError(f"no session of {client.url} matches '{prefix}'" if not found else
                       f"'{prefix}' matches {len(found)} sessions of {client.url}; give more of the id")
    return str(found[0])


def _cmd_login(args: argparse.Namespace) -> int:
    """Check the token against the server (`GET /api/server`: who it names), then keep it."""
    import getpass

    import httpx

    from auger.config import home_dirs
    from auger.frontends.servers import ServerError, save_token, server_key

    try:
        key = server_key(args.url)
    except ServerError as exc:
        raise CliError(str(exc)) from None
    if args.token_stdin or not sys.stdin.isatty():
        token = sys.stdin.readline().strip()
    else:
        token = getpass.getpass(f"token for {key}: ").strip()
    if not token:
        raise CliError("no token given")
    try:
        answer = httpx.get(f"{key}/api/server", headers={"authorization": f"Bearer {token}"}, timeout=15)
    except httpx.HTTPError as exc:
        raise CliError(f"cannot reach {key}: {exc or type(exc).__name__}") from None
    if answer.status_code == 401:
        raise CliError(f"{key} does not take that token (401); nothing was kept")
    if not answer.is_success:
        raise CliError(f"{key} answered {answer.status_code}; nothing was kept")
    try:
        user = answer.json()["user"]
        who = f"{user['name']} ({user['role']})"
    except (ValueError, KeyError, TypeError):
        raise CliError(f"{key} does not answer as `auger serve` does; nothing was kept") from None
    try:
        path = save_token(home_dirs()["config"], key, token)
    except (ServerError, OSError) as exc:
        raise CliError(f"the token was not kept: {exc}") from None
    print(f"logged in to {key} as {who}; the token is kept in {path} (readable by you alone)")
    return 0
