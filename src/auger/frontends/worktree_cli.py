"""`--worktree` and `auger worktree …`: sessions that work in a copy of the project, and what to do
with their changes afterwards.

A session started with `--worktree` (or `worktree = true`) gets a kept worktree made from a snapshot of
the project (changes/worktree.py: uncommitted and untracked files included, so it starts from what
the user sees), and its recorded root is that worktree: `auger resume` continues there, and
`auger worktree apply|discard|diff SESSION` find it from the session alone.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable


def add_commands(sub: Any, store_opts: Callable[[argparse.ArgumentParser], None]) -> None:
    p_wt = sub.add_parser("worktree", help="apply, discard or show the changes of a session run with --worktree")
    wt_sub = p_wt.add_subparsers(dest="worktree_command", metavar="SUBCOMMAND", required=True)
    p_apply = wt_sub.add_parser("apply", help="write the session's changes into its project (conflicts are left alone)")
    p_apply.add_argument("--to", metavar="DIR", help="apply to this directory instead of the session's project")
    p_apply.add_argument("--keep", action="store_true", help="keep the worktree even when everything applied")
    p_discard = wt_sub.add_parser("discard", help="delete the session's worktree and its changes")
    p_diff = wt_sub.add_parser("diff", help="print the session's changes against the worktree's base")
    for parser, run in ((p_apply, _apply), (p_discard, _discard), (p_diff, _diff)):
        parser.add_argument("session_id", help="session id (or a unique prefix), see `auger sessions`")
        store_opts(parser)
        parser.set_defaults(run=lambda args, run=run: _run(args, run))
    p_list = wt_sub.add_parser("list", help="list the worktrees kept for sessions")
    p_list.set_defaults(run=_list)


def session_root(config: Any, root: str, wanted: bool | None, *, new: bool = True) -> str:
    """The root a session works in: `root`, or for a `new` one a new kept worktree of it when
    `--worktree` or `worktree = true` asks (said on stderr, with where it is). A resumed or forked
    session works where its record says, so `--worktree` is refused for it rather than ignored."""
    if not new:
        if wanted:
            from auger.frontends.cli_support import CliError

            raise CliError("--worktree starts a new session in a worktree; a resumed or forked session works "
                           "where it was recorded (a session run with --worktree continues in its worktree)")
        return root
    if not (wanted or config.worktree):
        return root
    from pathlib import Path

    from auger.changes.worktree import SNAPSHOT, WorktreeError, create_worktree
    from auger.frontends.cli_support import CliError
    from auger.secrets.protected import protected_files

    try:  # without the project's protected files, as the user's configuration names them
        worktree = create_worktree(Path(root), base=SNAPSHOT, name="session", persistent=True,
                                   protected=protected_files(config, root))
    except WorktreeError as exc:
        raise CliError(f"cannot work in a worktree: {exc}") from None
    print(f"auger: working in a worktree of {root}: {worktree.path}", file=sys.stderr)
    return str(worktree.path)


def _run(args: argparse.Namespace, action: Callable[..., Any]) -> int:
    import asyncio

    from auger.frontends.cli_support import guard_store, load_cli_config

    config = load_cli_config(args)
    return guard_store(lambda: asyncio.run(_with_worktree(args, config, action)))


async def _with_worktree(args: argparse.Namespace, config: Any, action: Callable[..., Any]) -> int:
    """Find the session's worktree and run `action(args, worktree)` while holding the session (a
    session running in another process must not have its tree applied or deleted under it)."""
    from pathlib import Path

    from auger.changes.worktree import WorktreeError, open_worktree
    from auger.frontends.cli_support import CliError, claim_session, find_session, open_store

    store = open_store(config)
    leased = None
    try:
        record = await find_session(store, args.session_id)
        worktree = open_worktree(Path(record.cwd))
        if worktree is None:
            raise CliError(f"session {record.id[:8]} did not work in a worktree (it ran in {record.cwd}), "
                           "or its worktree was discarded")
        await claim_session(store, record.id)
        leased = record.id
        try:
            return int(await action(args, worktree))
        except WorktreeError as exc:
            raise CliError(str(exc)) from None
    finally:
        if leased is not None:
            await store.release(leased)
        await store.aclose()


async def _apply(args: argparse.Namespace, worktree: Any) -> int:
    from pathlib import Path

    from auger.protocol.jsontext import printable

    report = await worktree.apply_async(Path(args.to) if args.to else worktree.project)
    print(printable(report.message))
    for path in report.conflicts:
        print(printable(f"conflict: {path}"), file=sys.stderr)
    for failure in report.failed:
        print(printable(f"not written: {failure}"), file=sys.stderr)
    if report.conflicts or report.failed:
        print(f"the worktree is kept: {worktree.path}", file=sys.stderr)
        return 1
    if not args.keep:
        worktree.remove()
        print(f"removed the worktree {worktree.path}")
    return 0


async def _discard(args: argparse.Namespace, worktree: Any) -> int:
    worktree.remove()
    print(f"removed the worktree {worktree.path}")
    return 0


async def _diff(args: argparse.Namespace, worktree: Any) -> int:
    from auger.protocol.jsontext import printable

    sys.stdout.write(printable(await worktree.diff_async()))
    return 0


def _list(args: argparse.Namespace) -> int:
    from auger.changes.worktree import list_worktrees

    kept = [w for w in list_worktrees() if w.persistent]
    if not kept:
        print("No worktrees are kept.")
    for worktree in kept:
        print(f"{worktree.path}  (of {worktree.project}, base {worktree.base_commit[:12]})")
    return 0
