"""`auger mcp add|list|get|remove` and `auger mcp-server`.

The `mcp` commands edit `[mcp_servers.NAME]` tables in the user's config.toml (auger/user_config.py:
other content is kept as written, the new text is checked by parsing it before it replaces the file,
and the file is replaced atomically).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

from auger.frontends.cli_support import CliError


def add_parsers(sub: Any, store_opts: Callable[[argparse.ArgumentParser], None]) -> None:
    p_mcp = sub.add_parser("mcp", help="configure MCP servers whose tools every session gets")
    mcp_sub = p_mcp.add_subparsers(dest="mcp_command", metavar="SUBCOMMAND", required=True)
    p_add = mcp_sub.add_parser("add", help="add a server: auger mcp add NAME -- CMD ARGS...  or  --url URL")
    p_add.add_argument("name")
    add_server_arguments(p_add)
    p_add.set_defaults(run=_cmd_add, server_argv=[])  # the words after `--`: see split_command
    p_list = mcp_sub.add_parser("list", help="list configured servers")
    p_list.add_argument("--json", action="store_true", help="print JSON")
    p_list.add_argument("-C", "--cd", dest="cwd", help="project directory (default: current directory)")
    p_list.set_defaults(run=_cmd_list)
    p_get = mcp_sub.add_parser("get", help="show one server's configuration")
    p_get.add_argument("name")
    p_get.set_defaults(run=_cmd_get)
    p_remove = mcp_sub.add_parser("remove", help="remove a server")
    p_remove.add_argument("name")
    p_remove.set_defaults(run=_cmd_remove)

    p_server = sub.add_parser("mcp-server", help="serve auger's tools (auger_run, auger_continue) over MCP")
    p_server.add_argument("--http", type=int, metavar="PORT",
                          help="streamable HTTP on 127.0.0.1:PORT (0: a free port; default: stdio); clients send "
                               "the token (AUGER_SERVER_TOKEN, or the one in the data dir) as a bearer token")
    p_server.add_argument("--host", default="127.0.0.1", help="the address --http binds (default: 127.0.0.1)")
    p_server.add_argument("--root", action="append", default=[], metavar="DIR",
                          help="sessions may run beneath DIR (repeatable; default: the current directory)")
    p_server.add_argument("--approve-all", action="store_true", default=None,
                          help="approve what would be asked instead of denying it")
    store_opts(p_server)
    p_server.set_defaults(run=_cmd_server)


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that describe a server: `auger mcp add` and the terminal UI's `/mcp add` share them."""
    parser.add_argument("--url", help="a streamable-HTTP server's URL")
    parser.add_argument("--sse", action="store_true", help="the URL speaks the older SSE transport")
    parser.add_argument("--header", action="append", default=[], metavar="K=V", help="HTTP header (repeatable)")
    parser.add_argument("--bearer-token-env", metavar="VAR", help="send $VAR as a bearer token")
    parser.add_argument("--env", action="append", default=[], metavar="K=V", help="environment for a stdio server")
    parser.add_argument("--trusted", action="store_true",
                        help="run a stdio server outside the session sandbox and believe its tools' annotations "
                             "(honoured in the user config only)")
    parser.add_argument("--startup-timeout", type=float, metavar="S")
    parser.add_argument("--tool-timeout", type=float, metavar="S")


def server_table(args: argparse.Namespace, command: list[str]) -> dict[str, Any]:
    """The `[mcp_servers.NAME]` table the options and the command line after `--` describe."""
    table: dict[str, Any] = {}
    if command:
        table["command"], table["args"] = command[0], command[1:]
    if args.url:
        table["url"] = args.url
        if args.sse:
            table["transport"] = "sse"
    for key, pairs in (("headers", args.header), ("env", args.env)):
        if pairs:
            table[key] = _pairs(pairs, key)
    for key in ("bearer_token_env", "startup_timeout", "tool_timeout"):
        if getattr(args, key) is not None:
            table[key] = getattr(args, key)
    if args.trusted:
        table["trusted"] = True
    return table


def split_command(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """`auger mcp add NAME [OPTIONS] -- CMD ARGS...`: the server's command line is everything after the
    first `--`, taken apart before argparse (which cannot tell it from auger's own options)."""
    if argv[:2] != ["mcp", "add"] or "--" not in argv:
        return argv, None
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1:]


# -- commands -------------------------------------------------------------------------
def _cmd_add(args: argparse.Namespace) -> int:
    from auger.tools.mcp_config import parse_server
    from auger.user_config import set_table, user_config_path

    table = server_table(args, args.server_argv)
    try:
        parse_server(args.name, table)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    path = user_config_path()
    replaced = _edit(lambda: set_table(path, "mcp_servers", args.name, table))
    print(f"{'replaced' if replaced else 'added'} MCP server {args.name!r} in {path}")
    from auger.tools.mcp_servers import without_sdk

    why = without_sdk()  # recorded all the same: sessions start it once the extra is installed
    if why is not None:
        print(f"auger: warning: {why} (the server is saved; sessions start it once the extra is installed)",
              file=sys.stderr)
    return 0


def _cmd_remove(args: argparse.Namespace) -> int:
    from auger.user_config import read_text, set_table, tables, user_config_path

    path = user_config_path()
    if args.name not in _edit(lambda: tables(read_text(path), path, "mcp_servers")):
        raise CliError(f"no MCP server named {args.name!r} in {path}")
    _edit(lambda: set_table(path, "mcp_servers", args.name, None))
    print(f"removed MCP server {args.name!r} from {path}")
    return 0


def _cmd_get(args: argparse.Namespace) -> int:
    from auger.user_config import read_text, tables, user_config_path

    path = user_config_path()
    table = _edit(lambda: tables(read_text(path), path, "mcp_servers")).get(args.name)
    if table is None:
        raise CliError(f"no MCP server named {args.name!r} in {path}")
    print(json.dumps(table, indent=2, sort_keys=True))
    return 0


def _edit(action: Callable[[], Any]) -> Any:
    """Run a config file edit; its refusal is the command's one-line error."""
    from auger.user_config import ConfigEditError

    try:
        return action()
    except ConfigEditError as exc:
        raise CliError(str(exc)) from None


def _cmd_list(args: argparse.Namespace) -> int:
    from auger.config import load_config
    from auger.tools.mcp_config import parse_server

    project = args.cwd or os.getcwd()
    config = load_config(project_dir=Path(project) if os.path.isdir(project) else None)
    rows = []
    for key, source in (("mcp_servers", "user"), ("project_mcp_servers", "project")):
        for name, raw in (config.tables.get(key) or {}).items():
            try:
                server = parse_server(name, raw, source)
            except ValueError as exc:
                rows.append({"name": name, "source": source, "status": f"invalid: {exc}"})
                continue
            started = server.enabled and (source == "user" or config.trust_project_mcp)
            status = "enabled" if started else ("disabled" if not server.enabled else
                                                "not started (set trust_project_mcp = true)")
            rows.append({"name": name, "source": source, "kind": server.kind, "target": server.describe(),
                         "trusted": server.runs_trusted, "status": status})
    if args.json:
        print(json.dumps(rows, indent=2))
    elif not rows:
        print("no MCP servers configured; add one with `auger mcp add NAME -- CMD ARGS...`")
    for row in rows if not args.json else ():
        print(f"{row['name']:<16} {row['source']:<8} {row.get('kind', ''):<16} {row['status']:<10} "
              f"{'trusted ' if row.get('trusted') else ''}{row.get('target', '')}")
    return 0


def _cmd_server(args: argparse.Namespace) -> int:
    from auger.config import load_config
    from auger.extras import require
    from auger.frontends.mcp_server import CannotServe, Http, Limits, serve

    require("mcp", "`auger mcp-server`")

    flags = {"db_path": args.db, "approve_all": args.approve_all}

    def config_for(project: str):
        return load_config(args.overrides, flags, project_dir=Path(project) if os.path.isdir(project) else None)

    started = config_for(os.getcwd())
    for line in started.warnings:
        print(f"auger: warning: {line}", file=sys.stderr)
    roots = []
    for root in args.root or [os.getcwd()]:
        if not os.path.isdir(root):
            raise CliError(f"--root {root}: not a directory")
        roots.append(Path(os.path.realpath(root)))
    http = None
    if args.http is not None:
        if not 0 <= args.http < 65536:
            raise CliError(f"--http {args.http}: not a port number")
        http = Http(args.http, args.host)
    try:
        serve(config_for, Limits(started.mode, tuple(roots)), http=http)
    except CannotServe as exc:
        raise CliError(str(exc)) from None
    return 0


# -- the config file ------------------------------------------------------------------
def _pairs(pairs: list[str], what: str) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"{what}: expected K=V, got {pair!r}")
        out[key] = value
    return out
