"""Pruning undo snapshots no session needs any more, now (`auger gc`) or at most once a day in the
background.

Why this way:

* Which snapshots a session needs is written in its items (engine/turn/changes.py): each changing
  turn's `before`/`after` commits, and the redo point of each undo. A session used within
  `snapshot_retention_days` keeps all of them; an older one keeps its latest `snapshot_keep_turns`
  changing turns, so its recent work can still be undone. Everything else — the turns of sessions
  deleted from the store, older turns of idle sessions, the unrecorded snapshots a session takes when
  it opens or before a restore — is forgotten, and `git gc --prune=now` frees the disk.
* An unrecorded snapshot younger than GRACE may be one whose item is being written right now, by a
  session in another process: it is kept until the next run.
* The snapshot repositories are auger's own (one per project under the data directory); the user's
  repository is never gc'ed.
* The background run is a detached `auger gc --quiet` process started as a session shuts down, when the
  stamp file says the last run is older than `snapshot_gc_interval_hours`: the session's own start-up
  and turns never wait for it, and it outlives a one-shot `auger exec`. The first session on a machine
  only writes the stamp (there is nothing old to prune yet).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from auger.protocol.items import ContextMessage, Item

if TYPE_CHECKING:
    from auger.changes.snapshots import PruneResult
    from auger.config import Config
    from auger.store.base import Store

GRACE = 3600.0  # seconds an unrecorded snapshot is kept: its item may be on its way to the store
STAMP = "gc-stamp"  # in the snapshots directory: its mtime is when the last run started
_ALL_SESSIONS = 1 << 30


@dataclass(frozen=True)
class Pruned:
    """One project's snapshot repository after a prune."""

    snapdir: Path
    result: PruneResult


def needed_snapshots(items: Sequence[Item], keep_turns: int | None) -> set[str]:
    """The snapshot commits a session's undo and redo need: of every changing turn (`keep_turns` None),
    or of its latest `keep_turns` changing turns."""
    from auger.engine.turn.changes import UNDO, changing_turns

    turns = changing_turns(items)
    kept = turns if keep_turns is None else turns[len(turns) - keep_turns:] if keep_turns > 0 else []
    wanted = {turn.turn_id for turn in kept}
    commits = {c for turn in kept for c in (turn.before, turn.after) if c}
    for item in items:
        if isinstance(item, ContextMessage) and item.kind == UNDO and item.data and item.data.get("turn_id") in wanted:
            commits |= {str(item.data[k]) for k in ("before", "redo") if item.data.get(k)}
    return commits


async def collect_garbage(store: Store, data_dir: Path, config: Config, now: float | None = None) -> list[Pruned]:
    """Prune the snapshot repositories under `data_dir` against the sessions in `store`."""
    from auger.changes.snapshots import SnapshotStore, snapshot_dir

    now = time.time() if now is None else now
    idle_since = now - config.snapshot_retention_days * 86400
    keep: dict[Path, set[str]] = {}
    drop: dict[Path, set[str]] = {}  # recorded, but by an idle session's older turns
    for record in await store.list_sessions(_ALL_SESSIONS):
        items = [stored.item for stored in await store.load_items(record.id)]
        snapdir = snapshot_dir(data_dir, Path(record.cwd))
        if record.updated >= idle_since:
            keep.setdefault(snapdir, set()).update(needed_snapshots(items, None))
        else:
            kept = needed_snapshots(items, max(config.snapshot_keep_turns, 0))
            keep.setdefault(snapdir, set()).update(kept)
            drop.setdefault(snapdir, set()).update(needed_snapshots(items, None) - kept)
    pruned = []
    top = Path(data_dir) / "snapshots"
    for snapdir in sorted(top.iterdir()) if top.is_dir() else []:
        if (snapdir / "HEAD").is_file():
            # the project may be gone: git runs with the repository itself as its (unused) work tree
            repo = SnapshotStore(snapdir, snapdir)
            result = await repo.prune(keep.get(snapdir, set()), drop.get(snapdir, set()), now - GRACE)
            pruned.append(Pruned(snapdir, result))
    return pruned


def gc_due(data_dir: Path, config: Config, now: float | None = None) -> bool:
    """Whether a background run is due, claiming it if so (the stamp is touched at once, so sessions
    ending together start one run). A first call only writes the stamp."""
    if config.snapshot_gc_interval_hours <= 0 or not config.snapshots:
        return False
    now = time.time() if now is None else now
    stamp = Path(data_dir) / "snapshots" / STAMP
    try:
        last = stamp.stat().st_mtime
    except FileNotFoundError:
        last = None
    except OSError:
        return False
    if last is not None and now - last < config.snapshot_gc_interval_hours * 3600:
        return False
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.touch()
        os.utime(stamp, (now, now))
    except OSError:
        return False
    return last is not None


def start_background_gc(data_dir: Path, config: Config) -> bool:
    """Start a detached `auger gc --quiet` if one is due; True when started. Never raises."""
    import subprocess

    if not gc_due(data_dir, config):
        return False
    argv = [sys.executable, "-m", "auger", "gc", "--quiet"]
    if config.db_path:
        argv += ["--db", str(config.db_path)]
    try:
        subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True, close_fds=True)
    except OSError:
        return False
    return True
