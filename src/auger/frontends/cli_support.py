"""What the `auger` subcommands share: the one-line error type, store options, config and store
loading, finding a stored session by id prefix, claiming it for this process, and the progress lines a
command running its own session (review, init) prints.

Kept apart from cli.py so command modules (changes_cli, mcp_commands) can use it without importing
the command table that imports them.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


class CliError(Exception):
    """A one-line, actionable reason the command could not run."""


def store_opts(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--config", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key for this run (repeatable)")
    parser.add_argument("--db", help="session database: a SQLite file (default: in the user data directory) or a "
                             "postgresql:// URL; env AUGER_DB")


def load_cli_config(args: argparse.Namespace):
    from pathlib import Path

    from auger.config import load_config, valid_base_url

    flags = {key: getattr(args, key, None) for key in ("model", "provider", "base_url", "cassette")}
    if flags["base_url"] and not valid_base_url(flags["base_url"]):
        raise CliError(f"--base-url {flags['base_url']!r} is not an http:// or https:// URL "
                       "(e.g. http://localhost:11434/v1)")
    flags["db_path"] = args.db
    flags["mode"] = getattr(args, "mode", None)
    flags["approve_all"] = getattr(args, "approve_all", None)
    flags["pending"] = getattr(args, "pending", None)
    project = getattr(args, "cwd", None) or os.getcwd()
    config = load_config(args.overrides, flags, project_dir=Path(project) if os.path.isdir(project) else None)
    if not any(o.partition("=")[0].strip() == "generate_titles" for o in args.overrides):
        config.generate_titles = False  # a one-shot run keeps its first-prompt title, saving a model call
    if config.model_reasoning_effort is not None:  # only then: the provider registry is not needed otherwise
        from auger.models.registry import effort_problem

        problem = effort_problem(config)
        if problem:
            config.warnings.append(problem)
    for line in config.warnings:
        print(f"auger: warning: {line}", file=sys.stderr)
    return config


def local_user() -> str:
    """Who runs this command, for a record's `created_by` / `submitted_by`: this machine's user and host."""
    import getpass
    import socket

    try:
        return f"{getpass.getuser()}@{socket.gethostname()}"
    except (KeyError, OSError):
        return f"uid {os.getuid()}"


def open_store(config, *, ahead: bool = False):
    """The session store `--db` / AUGER_DB names: a SQLite file, or a postgresql:// URL (`ahead`: see
    store/factory.py)."""
    from auger.store.factory import open_store as open_target

    return open_target(config.db_path, ahead=ahead)


def guard_store(fn):
    from auger.store.base import StoreError

    try:
        return fn()
    except StoreError as exc:
        raise CliError(str(exc)) from None


async def find_session(store, id_or_prefix: str, purpose: str = ""):
    """The one stored session an id or prefix names; otherwise say why not (none, or which ones)."""
    found = await store.find_sessions(id_or_prefix)
    if len(found) == 1:
        return found[0]
    suffix = f" ({purpose})" if purpose else ""
    if not found:
        raise CliError(f"no stored session matches '{id_or_prefix}'{suffix}; list them with `auger sessions`")
    listed = ", ".join(f"{s.id[:12]} ({(s.title or 'untitled')[:30]})" for s in found[:5])
    more = f" and {len(found) - 5} more" if len(found) > 5 else ""
    raise CliError(f"session id prefix '{id_or_prefix}' is ambiguous{suffix}: it matches {listed}{more}; "
                   "give more of the id")


async def claim_session(store, session_id: str) -> None:
    """Run a session in one process at a time: a second process would interleave its turns."""
    holder = await store.claim(session_id)
    if holder is not None:
        raise CliError(f"session {session_id[:8]} is running in another auger process ({holder}); wait for it "
                       f"to finish, or continue a copy of it with `auger fork {session_id[:8]}`")


class JsonRenderer:
    """One envelope per line on stdout (`--json`): the event's fields, then the envelope's (seq, submission id…)."""

    def __call__(self, envelope) -> None:
        sys.stdout.write(envelope.text() + "\n")
        sys.stdout.flush()


class ToolProgress:
    """A line per tool call (and warning) of a command's own session on stderr while a person watches;
    nothing otherwise."""

    def __init__(self) -> None:
        self.live = sys.stderr.isatty()

    def __call__(self, envelope) -> None:
        from auger.protocol import events as ev

        if not self.live or not isinstance(envelope.event, (ev.ToolCallStarted, ev.WarningEvent)):
            return
        from auger.frontends.tui.render import clean

        event = envelope.event
        if isinstance(event, ev.WarningEvent):
            print(clean(f"! {event.message}"), file=sys.stderr)
            return
        args = event.arguments if isinstance(event.arguments, dict) else {}
        detail = str(args.get("command") or args.get("path") or args.get("pattern") or "")[:100]
        print(clean(f"▸ {event.name} {detail}"), file=sys.stderr)


def with_store(args: Any, body: Any) -> Any:
    """Run `await body(store)` over the store `--db` (or AUGER_DB, or the config) names, closed after; a
    StoreError, or a PostgreSQL URL without its extra, as the command's one-line error."""
    import asyncio

    from auger.config import load_config
    from auger.store.factory import open_store as open_target

    config = load_config(args.overrides, {"db_path": args.db})

    async def main() -> Any:
        store = open_target(config.db_path)
        try:
            return await body(store)
        finally:
            await store.aclose()

    try:
        return guard_store(lambda: asyncio.run(main()))
    except ImportError as exc:
        raise CliError(f"a PostgreSQL database needs the postgres extra: pip install 'auger[postgres]' ({exc})") \
            from None
