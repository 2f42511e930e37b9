"""`auger diff`, `auger undo` and `auger gc`: a stored session's per-turn changes, shown and taken
back, and the snapshots behind them pruned.

Both read the session's `turn_changes` items (engine/turn/changes.py), so they work on any stored
session, after a crash too. `undo` claims the session like `resume` does (a session running in
another process is never changed under it) and records the same context message the live `undo` op
records, so the model is told when the session continues.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

_COLOURS = (("+++", "\x1b[1m"), ("---", "\x1b[1m"), ("diff --git", "\x1b[1m"), ("@@", "\x1b[36m"),
            ("+", "\x1b[32m"), ("-", "\x1b[31m"))


def add_commands(sub: Any, store_opts: Callable[[argparse.ArgumentParser], None]) -> dict[str, argparse.ArgumentParser]:
    p_diff = sub.add_parser("diff", help="show what a session's turns changed in the project")
    p_diff.add_argument("session_id", help="session id (or a unique prefix), see `auger sessions`")
    p_diff.add_argument("turn", nargs="?", help="turn number (as listed) or id; default: every turn that changed files")
    p_diff.add_argument("--json", action="store_true", help="print the turn_diff events as JSON lines")
    store_opts(p_diff)
    p_diff.set_defaults(run=_cmd_diff)

    p_undo = sub.add_parser("undo", help="put the project back as it was before a session's turn (or redo it)")
    p_undo.add_argument("session_id", help="session id (or a unique prefix), see `auger sessions`")
    p_undo.add_argument("--turn", metavar="N", help="turn number (see `auger diff`) or id; default: the last one")
    p_undo.add_argument("--force", action="store_true", help="undo even over files changed after the turn")
    p_undo.add_argument("--redo", action="store_true", help="re-apply the last undone turn instead")
    store_opts(p_undo)
    p_undo.set_defaults(run=_cmd_undo)

    p_gc = sub.add_parser("gc", help="prune undo snapshots no session needs any more, and say what was freed")
    p_gc.add_argument("--quiet", action="store_true", help="print nothing (the daily background run)")
    store_opts(p_gc)
    p_gc.set_defaults(run=_cmd_gc)
    return {"diff": p_diff, "undo": p_undo, "gc": p_gc}


def _cmd_diff(args: argparse.Namespace) -> int:
    import asyncio

    from auger.frontends.cli_support import guard_store, load_cli_config

    config = load_cli_config(args)
    return guard_store(lambda: asyncio.run(_diff(args, config)))


async def _diff(args: argparse.Namespace, config) -> int:
    from pathlib import Path

    from auger.config import home_dirs
    from auger.engine.turn.changes import auger_paths, numbered_turns, snapshot_store
    from auger.frontends.cli_support import CliError, find_session, open_store
    from auger.protocol.events import TurnDiff
    from auger.protocol.jsontext import dumps, printable

    store = open_store(config)
    try:
        record = await find_session(store, args.session_id)
        items = [stored.item for stored in await store.load_items(record.id)]
        envelopes = await store.load_events(record.id) if args.json else []
        dirs = home_dirs()
        snapshots = snapshot_store(config, Path(record.cwd), dirs["data"], auger_paths(dirs, store))
    finally:
        await store.aclose()
    try:
        turns = numbered_turns(items, args.turn)
    except LookupError as exc:
        raise CliError(str(exc)) from None
    colour = sys.stdout.isatty()
    if args.json:  # the events as the session emitted them, in their envelopes
        wanted = {turn.turn_id for _, turn in turns}
        for envelope in envelopes:
            if isinstance(envelope.event, TurnDiff) and envelope.event.turn_id in wanted:
                print(dumps(envelope.to_json()))
        return 0
    for number, turn in turns:
        head = (f"turn {number} ({turn.turn_id}): {len(turn.files)} file(s)" if turn.after
                else f"turn {number} ({turn.turn_id}): cut short, its changes were not recorded")
        print(f"\x1b[1;33m{head}\x1b[0m" if colour else head)
        print(_coloured(printable(turn.diff)) if colour else printable(turn.diff), end="")
        for line in await _unrecorded(snapshots, turn):
            print(printable(f"not in the snapshots, so undo cannot restore it: {line}"))
    if not turns and not args.json:
        print("no turn of this session changed any file")
    return 0


async def _unrecorded(snapshots, turn) -> list[str]:
    """What the turn did to paths no snapshot holds (ignored directories, ignored files over the
    limits); nothing when that cannot be read (snapshots off or pruned)."""
    from auger.changes.diff import unrecorded_changes
    from auger.changes.snapshots import SnapshotError

    if snapshots is None or not turn.after:
        return []
    try:
        return await unrecorded_changes(snapshots, turn.before, turn.after)
    except (SnapshotError, OSError):
        return []


def _coloured(text: str) -> str:
    out = []
    for line in text.splitlines(keepends=True):
        colour = next((c for prefix, c in _COLOURS if line.startswith(prefix)), None)
        out.append(f"{colour}{line.rstrip(chr(10))}\x1b[0m\n" if colour else line)
    return "".join(out)


def _cmd_undo(args: argparse.Namespace) -> int:
    import asyncio

    from auger.frontends.cli_support import guard_store, load_cli_config

    config = load_cli_config(args)
    return guard_store(lambda: asyncio.run(_undo(args, config)))


async def _undo(args: argparse.Namespace, config) -> int:
    from pathlib import Path

    from auger.config import home_dirs
    from auger.engine.turn.changes import UNDO_TURN, UndoError, auger_paths, redo_turn, snapshot_store, undo_turn
    from auger.frontends.cli_support import CliError, claim_session, find_session, open_store

    verb = "redo" if args.redo else "undo"
    store = open_store(config)
    leased = None
    try:
        record = await find_session(store, args.session_id)
        dirs = home_dirs()
        snapshots = snapshot_store(config, Path(record.cwd), dirs["data"], auger_paths(dirs, store))
        if snapshots is None:
            raise CliError(f"cannot {verb}: snapshots are off (snapshots = false)")
        await claim_session(store, record.id)
        leased = record.id
        items = [stored.item for stored in await store.load_items(record.id)]
        try:
            if args.redo:
                note, event = await redo_turn(snapshots, items, args.force)
            else:
                note, event = await undo_turn(snapshots, items, args.turn, args.force)
        except UndoError as exc:
            raise CliError(f"{verb} refused: {exc}") from None
        await store.append(record.id, UNDO_TURN, note)
    finally:
        if leased is not None:
            await store.release(leased)
        await store.aclose()
    print(note.text)
    for failure in event.failed:
        print(f"auger: warning: not restored: {failure}", file=sys.stderr)
    return 1 if event.failed else 0


def _cmd_gc(args: argparse.Namespace) -> int:
    import asyncio

    from auger.frontends.cli_support import guard_store, load_cli_config

    config = load_cli_config(args)
    return guard_store(lambda: asyncio.run(_gc(args, config)))


async def _gc(args: argparse.Namespace, config) -> int:
    from auger.changes.snapshots import SnapshotError
    from auger.config import home_dirs
    from auger.engine.session.snapshot_gc import collect_garbage
    from auger.frontends.cli_support import CliError, open_store

    store = open_store(config)
    try:
        pruned = await collect_garbage(store, home_dirs()["data"], config)
    except SnapshotError as exc:
        raise CliError(f"gc failed: {exc}") from None
    finally:
        await store.aclose()
    if args.quiet:
        return 0
    if not pruned:
        print("no snapshots are stored")
    for entry in pruned:
        r = entry.result
        freed = max(r.bytes_before - r.bytes_after, 0)
        print(f"{entry.snapdir.name}: removed {r.removed} snapshot(s), kept {r.kept}; "
              f"{_size(r.bytes_before)} -> {_size(r.bytes_after)} (freed {_size(freed)})")
    return 0


def _size(n: int) -> str:
    return f"{n / (1 << 20):.1f} MB" if n >= 1 << 20 else f"{n / 1024:.1f} KB"
