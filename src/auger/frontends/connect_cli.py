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

CLIENT_NAME = "terminal"


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
    return {"login": p_login, "attach": p_attach}


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
    from auger import connect
    from auger.config import home_dirs
    from auger.frontends.servers import ServerError, server_key, token_for

    dirs = home_dirs()
    try:
        key = server_key(url)
        token = token_for(key, os.environ, dirs["config"], dirs["data"])
    except ServerError as exc:
        raise CliError(str(exc)) from None
    if not token:
        raise CliError(f"no token for {key}: `auger login {key}` keeps one, or set AUGER_SERVER_TOKEN")
    return connect(key, token=token, name=CLIENT_NAME)


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
