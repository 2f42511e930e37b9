"""`auger pending list|apply|discard|rewind`: review a stored session's queued changes (pending mode).

They act on the queue in the store (changes/pending.py), so they work while no session runs. A
session running in another process is never changed under it: apply, discard and rewind claim it
like `resume` does. An apply is snapshotted and diffed like a turn (`auger diff`, `auger undo` see
it), and the model is told, as the live ops tell it, when the session continues.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable

_KIND = {"add": "A", "modify": "M", "delete": "D"}


def add_commands(sub: Any, store_opts: Callable[[argparse.ArgumentParser], None]) -> argparse.ArgumentParser:
    p = sub.add_parser("pending", help="review the changes a pending-mode session queued: list, apply, discard, rewind")
    actions = p.add_subparsers(dest="pending_command", metavar="ACTION", required=True)

    def session_opts(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-s", "--session", metavar="ID",
                            help="session id or prefix; default: this project's latest session with pending changes")
        parser.add_argument("-C", "--cd", dest="cwd", help="project directory (default: current directory)")
        store_opts(parser)

    p_list = actions.add_parser("list", help="show each pending file: path, kind, +/- lines, who proposed it")
    p_list.add_argument("--json", action="store_true", help="print one JSON object per file")
    session_opts(p_list)
    p_apply = actions.add_parser("apply", help="write pending changes to the project (files edited since are refused)")
    p_apply.add_argument("paths", nargs="*", metavar="PATH", help="files or directories; default: all")
    session_opts(p_apply)
    p_discard = actions.add_parser("discard", help="drop pending changes")
    p_discard.add_argument("paths", nargs="*", metavar="PATH", help="files or directories; default: all")
    session_opts(p_discard)
    p_rewind = actions.add_parser("rewind", help="drop every pending change after sequence number SEQ")
    p_rewind.add_argument("seq", type=int, metavar="SEQ", help="the last change to keep, as `list` shows it (0: none)")
    p_rewind.add_argument("session_id", metavar="SESSION", help="session id or prefix")
    p_rewind.add_argument("-C", "--cd", dest="cwd", help=argparse.SUPPRESS)
    store_opts(p_rewind)
    p.set_defaults(run=_cmd_pending)
    return p


def _cmd_pending(args: argparse.Namespace) -> int:
    import asyncio

    from auger.frontends.cli_support import guard_store, load_cli_config

    config = load_cli_config(args)
    return guard_store(lambda: asyncio.run(_pending(args, config)))


async def _pending(args: argparse.Namespace, config) -> int:
    from auger.frontends.cli_support import claim_session, open_store

    store = open_store(config)
    leased = None
    try:
        record = await _session(store, args)
        if args.pending_command == "list":
            return await _list(store, record, args.json)
        await claim_session(store, record.id)
        leased = record.id
        paths = _in_project(getattr(args, "paths", []), record.cwd)
        if args.pending_command == "apply":
            return await _apply(store, record, config, paths)
        return await _drop(store, record, args.pending_command, paths, getattr(args, "seq", 0))
    finally:
        if leased is not None:
            await store.release(leased)
        await store.aclose()


def _in_project(paths: list[str], root: str) -> list[str]:
    """PATHs as the user typed them (relative to the current directory, or absolute) as project paths;
    one outside the project is left as typed, and reported as matching nothing."""
    out = []
    for path in paths:
        rel = os.path.relpath(os.path.abspath(path), os.path.realpath(root))
        out.append(path if rel == ".." or rel.startswith("../") else rel)
    return out


async def _session(store, args: argparse.Namespace):
    """The session named, or this project's most recent one with pending changes."""
    from auger.frontends.cli_support import CliError, find_session

    named = getattr(args, "session_id", None) or args.session
    if named:
        return await find_session(store, named)
    project = os.path.realpath(args.cwd or os.getcwd())
    for record in await store.list_sessions(200, cwd=project):
        if await store.load_pending(record.id):
            return record
    raise CliError(f"no session of {project} has pending changes (name one with --session ID)")


async def _list(store, record, as_json: bool) -> int:
    import asyncio
    from pathlib import Path

    from auger.changes.pending import rows
    from auger.policy.fs import RootHandle
    from auger.protocol.jsontext import dumps

    entries = await store.load_pending(record.id)
    handle = RootHandle(Path(record.cwd))
    try:
        found = await asyncio.to_thread(rows, handle, entries)
    finally:
        handle.close()
    if as_json:
        for row in found:
            print(dumps({"path": row.path, "kind": row.kind, "added": row.added, "removed": row.removed,
                         "proposed_by": row.proposers, "seqs": row.seqs}))
        return 0
    if not found:
        print(f"session {record.id[:8]}: nothing is pending")
        return 0
    print(f"session {record.id[:8]} ({record.cwd}): {len(found)} file(s) pending")
    for line in row_lines(found):
        print(line)
    return 0


async def _apply(store, record, config, paths: list[str]) -> int:
    from pathlib import Path

    from auger.changes.pending import APPLIED, apply, note
    from auger.config import home_dirs
    from auger.engine.session.pending_mode import APPLY_TURN, CONTEXT_TURN, snapshot_before_apply
    from auger.engine.turn.changes import ChangeTracker, auger_paths, snapshot_opener
    from auger.protocol.events import Event

    root = Path(record.cwd)
    dirs = home_dirs()
    snapshots = snapshot_opener(config, root, dirs["data"], auger_paths(dirs, store))
    turn_id = f"{APPLY_TURN}-{os.urandom(6).hex()}"
    tracker = None
    if snapshots is not None:

        async def record_item(turn: str, item) -> None:
            await store.append(record.id, turn, item)

        def emit(event: Event) -> None:
            message = getattr(event, "message", None)
            if message:
                print(f"auger: warning: {message}", file=sys.stderr)

        tracker = ChangeTracker(snapshots, record.id, record_item, emit)

    report = await apply(store, record.id, root, paths or None,
                         before_write=lambda: snapshot_before_apply(tracker, turn_id))
    if tracker is not None:
        await tracker.end_turn(turn_id)
    told = note(APPLIED, report.applied)
    if told is not None:
        await store.append(record.id, CONTEXT_TURN, told)
    for path in report.applied:
        print(f"applied {path}")
    for line in report.conflicts:
        print(f"auger: refused {line}", file=sys.stderr)
    for name in report.unknown:
        print(f"auger: nothing is pending for {name}", file=sys.stderr)
    return 1 if report.conflicts or report.unknown else 0


async def _drop(store, record, command: str, paths: list[str], seq: int) -> int:
    from auger.changes.pending import DISCARDED, REWOUND, discard, note, rewind
    from auger.engine.turn.host import CONTEXT_TURN

    unknown: list[str] = []
    if command == "discard":
        dropped, unknown = await discard(store, record.id, paths or None)
        action = DISCARDED
    else:
        dropped, action = await rewind(store, record.id, seq), REWOUND
    told = note(action, dropped)
    if told is not None:
        await store.append(record.id, CONTEXT_TURN, told)
    for path in dropped:
        print(f"{action} {path}")
    for name in unknown:
        print(f"auger: nothing is pending for {name}", file=sys.stderr)
    if not dropped and not unknown:
        print("nothing changed")
    return 1 if unknown else 0


def row_lines(found: list) -> list[str]:
    """One line per pending path (`auger pending list` and the terminal UI's /pending)."""
    from auger.protocol.jsontext import printable

    return [f"{_KIND[row.kind]} {printable(row.path)}  +{row.added} -{row.removed}  "
            f"by {', '.join(row.proposers)}  (seq {', '.join(map(str, row.seqs))})" for row in found]
