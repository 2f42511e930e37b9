"""`auger backends`: the agents that can run a session's turns, and whether they can here.

Lists the built-in agents and the user's `[backends.NAME]` tables with a status from a PATH check;
`--probe` also starts each available agent and runs `initialize`. A broken table is a row with its
diagnostic, never a failure of the command.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable


def add_commands(sub: Any, store_opts: Callable[[argparse.ArgumentParser], None]) -> dict[str, argparse.ArgumentParser]:
    p = sub.add_parser("backends", help="list the agents that can run a session's turns (--backend NAME)")
    p.add_argument("--probe", action="store_true", help="start each available agent and run ACP initialize")
    p.add_argument("--json", action="store_true", help="print one JSON object per agent")
    p.add_argument("-C", "--cd", dest="cwd", help="directory the probe starts agents in (default: current)")
    store_opts(p)
    p.set_defaults(run=_cmd_backends)
    return {"backends": p}


def _cmd_backends(args: argparse.Namespace) -> int:
    import asyncio
    import json
    import os

    from auger.backends.config import load_backends
    from auger.backends.status import probe, statuses
    from auger.frontends.cli_support import load_cli_config

    config = load_cli_config(args)
    rows = statuses(config.tables, config.tables_source or "config")
    if args.probe:
        specs = load_backends(config.tables).specs
        cwd = os.path.abspath(args.cwd or os.getcwd())

        async def probe_all() -> list[Any]:
            return [await probe(specs[row.name], cwd) if row.name in specs else row for row in rows]

        rows = asyncio.run(probe_all())
    if args.json:
        for row in rows:
            print(json.dumps({"name": row.name, "label": row.label, "command": row.command, "status": row.status,
                              "detail": row.detail, "source": row.source}))
        return 0
    from auger.protocol.jsontext import printable

    print(f"{'BACKEND':<14} {'STATUS':<14} {'COMMAND':<32} DETAIL")
    for row in rows:
        print(printable(f"{row.name:<14} {row.status:<14} {row.command[:32]:<32} {row.detail}"))
    if not any(row.status == "available" for row in rows):
        print("No backend is available here; install one of the agents above or add a [backends.NAME] table.",
              file=sys.stderr)
    return 0
