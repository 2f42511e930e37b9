"""`auger init`: a read-only session drafts the project's AGENTS.md (or improves the one it has), and the
draft is queued as a pending change: the command prints its diff and how to write it. The engine side is
engine/session/init_doc.py, shared with the terminal's /init; this module parses options and prints.

Exit status: 0 when a draft was queued; 1 when none could be drafted; 2 for a usage problem.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable


def add_commands(sub: Any, store_opts: Callable[[argparse.ArgumentParser], None]) -> dict[str, argparse.ArgumentParser]:
    p = sub.add_parser("init", help="draft AGENTS.md for this project (read-only session); queued for `auger pending "
                                    "apply`, never written unseen")
    p.add_argument("-m", "--model", help="model name")
    p.add_argument("-p", "--provider", help="provider name; `auger providers` lists them")
    p.add_argument("--base-url", help="base URL of an OpenAI-compatible API, e.g. http://localhost:11434/v1")
    p.add_argument("-C", "--cd", dest="cwd", help="project directory (default: current directory)")
    store_opts(p)
    p.set_defaults(run=_cmd_init)
    return {"init": p}


def _cmd_init(args: argparse.Namespace) -> int:
    import asyncio

    from auger.frontends.cli_support import guard_store, load_cli_config

    config = load_cli_config(args)
    return guard_store(lambda: asyncio.run(_init(args, config)))


async def _init(args: argparse.Namespace, config) -> int:
    import os
    from pathlib import Path

    from auger.engine.session.init_doc import InitFailed, draft_agents_md, settle
    from auger.engine.session.sessions import SessionManager
    from auger.engine.workspace import Workspace
    from auger.frontends.cli_support import CliError, ToolProgress, open_store
    from auger.frontends.tui.render import clean
    from auger.models.registry import ProviderError, client_for

    root = Path(os.path.realpath(args.cwd or os.getcwd()))
    if not root.is_dir():
        raise CliError(f"project directory {root} is not a directory")
    try:
        client = client_for(config)
    except ProviderError as exc:
        raise CliError(str(exc)) from None
    store = open_store(config)
    try:
        try:
            draft = await draft_agents_md(SessionManager(Workspace.open(root, config), store), client,
                                          on_envelope=ToolProgress())
        except InitFailed as exc:
            print(f"auger: {exc} (session {exc.session_id[:8]})", file=sys.stderr)
            return 1
        short = draft.session.id[:8]
        await settle(draft, None)  # stays queued in the stored session
    finally:
        await store.aclose()
    print(clean(draft.diff), end="" if draft.diff.endswith("\n") else "\n")
    what = "an improved AGENTS.md" if draft.existed else "a new AGENTS.md"
    print(f"{what} is pending in session {short}: `auger pending apply -s {short}` writes it, "
          f"`auger pending discard -s {short}` drops it", file=sys.stderr)
    return 0
