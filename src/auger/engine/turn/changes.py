"""Per-turn snapshots, diffs and undo: the session's side of `auger.changes`.

Why it is built this way:

* A snapshot is taken before the first change of each turn, by a `before_mutation` hook of the tool
  runtime: the hook sees every call that may change something (file tools, apply_patch, a shell
  command not judged read-only, an MCP tool that is not read-only), so whatever changes the tree is
  covered, and read-only steps never pay for it. The first snapshot of a big tree is slow, so one is
  started in the background when the session opens; the turn's snapshot waits for it (they share the
  snapshot repository's lock) and then costs only what changed.
* At the turn's end the tree is compared with that snapshot (tools and shell alike): one `turn_diff`
  event, and one `turn_changes` item holding both snapshot ids, so diff and undo survive compaction,
  resume and a killed process (the `turn_snapshot` item, recorded at once, covers a turn that never
  ended). Neither item is shown to the model.
* Undo puts the tree back as the turn's first snapshot had it and tells the model, as a context
  message, which files changed back and which it could not restore (ignored paths the snapshots
  leave out, said at the turn's end too); the message's data keeps the redo point. Undo refuses, changing
  nothing, when the tree is no longer what the turn left (someone edited after it), unless forced.
  The same functions serve the live session (ops) and `auger undo` on a stored session.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Awaitable, Callable, Mapping, Sequence

from auger.protocol.events import Event, TurnDiff, TurnUndone, WarningEvent
from auger.protocol.items import ChangedFile, ContextMessage, Item, TurnChanges, TurnSnapshot

if TYPE_CHECKING:
    from auger.secrets.protected import ProtectedFiles
    from auger.changes.snapshots import SnapshotStore
    from auger.config import Config
    from auger.engine.turn.tool_runtime import PlannedCall

log = logging.getLogger("auger.changes")

UNDO, REDO = "undo", "redo"  # the kinds of the context messages that tell the model
UNDO_TURN = "undo"  # the turn id undo and redo records carry
WARM_UP_DELAY = 1.0  # seconds after a session opens before its first snapshot starts hashing the tree

Record = Callable[[str, Item], Awaitable[None]]


class UndoError(Exception):
    """An undo or redo that was refused or cannot be done; nothing was changed."""


def snapshot_store(config: Config, root: Path, data_dir: Path, own: Sequence[Path] = ()) -> SnapshotStore | None:
    """The project's snapshot repository under auger's data directory, or None when snapshots are off.
    `own`: auger's own files (`auger_paths`), which it never records."""
    opener = snapshot_opener(config, root, data_dir, own)
    return None if opener is None else opener()


def snapshot_opener(config: Config, root: Path, data_dir: Path, own: Sequence[Path] = (),
                    protected: ProtectedFiles | None = None) -> Callable[[], SnapshotStore] | None:
    """What opens `snapshot_store`'s repository, or None when snapshots are off: a session opens it (and
    loads auger.changes) at its first snapshot, never on its way to the first model request. `protected`: the
    project's protected files (the session's; by default as `config` says), which it never records."""
    if not config.snapshots:
        return None

    def open_store() -> SnapshotStore:
        from auger.changes.snapshots import SnapshotStore, snapshot_dir
        from auger.secrets.protected import protected_files

        return SnapshotStore(root, snapshot_dir(data_dir, root), max_file_bytes=config.snapshot_max_file_bytes,
                             max_dir_files=config.snapshot_max_dir_files, own=own,
                             protected=protected or protected_files(config, root))

    return open_store


def auger_paths(dirs: Mapping[str, Path], store: object) -> tuple[Path, ...]:
    """auger's own files, wherever they are: its data, config and cache directories, and a SQLite
    session database with the files SQLite keeps beside it (write-ahead log, its index, a rollback
    journal). Inside a project they are never a change a turn made, nor something undo puts back."""
    from auger.store.sqlite import SqliteStore

    paths = [dirs[key] for key in ("data", "config", "cache") if key in dirs]
    if isinstance(store, SqliteStore):
        db = Path(os.path.abspath(store.path))
        paths += [db, *(db.with_name(db.name + suffix) for suffix in ("-wal", "-shm", "-journal"))]
    return tuple(paths)


class ChangeTracker:
    """One session's snapshots: the hook before changes, the diff at each turn's end, undo and redo."""

    def __init__(self, snapshots: Callable[[], SnapshotStore], session_id: str, record: Record,
                 emit: Callable[[Event], None]) -> None:
        self._open = snapshots  # `snapshot_opener`'s: the repository is opened at first use
        self._snapshots: SnapshotStore | None = None
        self.session_id = session_id
        self._record = record
        self._emit = emit
        self._before: dict[str, TurnSnapshot | None] = {}  # turn id -> its snapshot (None: it failed)
        self._looked: dict[str, tuple[str, str]] = {}  # turn id -> (commit, tree) `changed_since` last compared with
        self._lock = asyncio.Lock()
        self._warm: asyncio.Task[None] | None = None
        self._needed = asyncio.Event()  # a change is about to be made: warm up now, not after the delay

    @property
    def snapshots(self) -> SnapshotStore:
        if self._snapshots is None:
            self._snapshots = self._open()
        return self._snapshots

    def start(self) -> None:
        """Take a first snapshot in the background, so the first turn's costs only what changed. It
        waits WARM_UP_DELAY first, so hashing a large tree never competes with the session's start-up and
        its first model request; when a change comes before, the turn's snapshot is the first instead.
        Skipped when the project's snapshot repository has an index already (an earlier session's): what a
        snapshot then hashes is only what changed since, and a session that changes nothing pays nothing.
        (Asked after the delay: opening the repository loads auger.changes, kept off the start path.)"""
        self._warm = asyncio.create_task(self._warm_up(), name=f"snapshot-{self.session_id}")

    async def _warm_up(self) -> None:
        try:
            await asyncio.wait_for(self._needed.wait(), WARM_UP_DELAY)
            return  # a change comes before the warm-up began: the turn's own snapshot is the first
        except TimeoutError:
            pass
        try:
            if self.snapshots.indexed:
                return
            await self.snapshots.first_snapshot(f"auger {self.session_id}: session start")
        except Exception as exc:  # the turn's own snapshot reports a lasting problem
            log.debug("the start-up snapshot failed: %s", exc)

    async def close(self) -> None:
        if self._warm is not None and not self._warm.done():
            self._warm.cancel()
            await asyncio.gather(self._warm, return_exceptions=True)

    async def before_mutation(self, call: PlannedCall) -> None:
        """The runtime's hook: snapshot the tree before the turn's first change (once per turn)."""
        if call.turn_id in self._before:
            return
        async with self._lock:
            if call.turn_id in self._before:
                return
            self._before[call.turn_id] = await self._snapshot(call.turn_id)

    async def _snapshot(self, turn_id: str) -> TurnSnapshot | None:
        from auger.changes.snapshots import SnapshotError

        if self._warm is not None:
            self._needed.set()
            await asyncio.shield(self._warm)  # an interrupt ends this wait, never the shared snapshot
        try:
            snap = await self.snapshots.snapshot(f"auger {self.session_id} turn {turn_id}: before")
        except (SnapshotError, OSError) as exc:
            self._emit(WarningEvent(f"no snapshot was taken before this turn's changes ({exc}); "
                                    "they cannot be undone or diffed", turn_id))
            return None
        for warning in snap.warnings:
            self._emit(WarningEvent(f"snapshot: {warning}", turn_id))
        item = TurnSnapshot(turn_id, snap.commit, snap.tree)
        await self._record(turn_id, item)
        return item

    async def changed_since(self, turn_id: str, wanted: Callable[[str], bool]) -> dict[str, bytes | None] | None:
        """The `wanted` files changed since this was last asked in the turn (since the turn's snapshot, the
        first time), with their content then (None: the file is new): what a command changed, for the
        diagnostics of its change (engine/session/code_intel.py). Two listings against the snapshot index say whether
        a wanted file may have changed; only then one snapshot more. None when the turn has no snapshot."""
        from auger.changes.diff import changes
        from auger.changes.snapshots import SnapshotError

        before = self._before.get(turn_id)
        if before is None:
            return None
        commit, _tree = self._looked.get(turn_id, (before.commit, before.tree))
        try:
            if not any(wanted(path) for path in await self.snapshots.touched()):
                return {}
        except (SnapshotError, OSError) as exc:
            log.debug("what a call changed could not be listed: %s", exc)
            return None
        try:
            async with self._lock:
                now = await self.snapshots.snapshot(f"auger {self.session_id} turn {turn_id}: after a call")
            found = await changes(self.snapshots, commit, now.commit, renames=False)
            self._looked[turn_id] = (now.commit, now.tree)
            if not found:
                return {}
            entries = await self.snapshots.entries(commit)
            oids = {c.path: entries[c.path].oid for c in found
                    if c.path in entries and c.kind != "added" and wanted(c.path)}
            blobs = await self.snapshots.blobs(list(oids.values()))
        except (SnapshotError, OSError) as exc:
            log.debug("what a call changed could not be compared: %s", exc)
            return None
        return {c.path: blobs.get(oids[c.path]) if c.path in oids else None for c in found if wanted(c.path)}

    async def end_turn(self, turn_id: str) -> None:
        """Record and announce what the turn changed, if it snapshotted (call before turn_ended)."""
        from auger.changes.diff import diff_since, unrecorded_changes
        from auger.changes.snapshots import Snapshot, SnapshotError

        self._looked.pop(turn_id, None)
        before = self._before.pop(turn_id, None)
        if before is None:
            return
        try:
            found = await diff_since(self.snapshots, Snapshot(before.commit, before.tree))
        except (SnapshotError, OSError) as exc:
            self._emit(WarningEvent(f"the turn's changes could not be compared ({exc})", turn_id))
            return
        files = [ChangedFile(**dataclasses.asdict(change)) for change in found.changes]
        await self._record(turn_id, TurnChanges(turn_id, before.commit, before.tree, found.now.commit,
                                                found.now.tree, files, found.text))
        self._emit(TurnDiff(turn_id, files, found.text))
        try:
            lost = await unrecorded_changes(self.snapshots, before.commit, found.now)
        except (SnapshotError, OSError):
            return
        if lost:
            self._emit(WarningEvent(f"undo cannot restore what this turn did to paths no snapshot holds: "
                                    f"{'; '.join(lost)}", turn_id))


# ------------------------------------------------------------------ undo and redo (live or stored)


def changing_turns(items: Sequence[Item]) -> list[TurnChanges]:
    """The turns that changed files, oldest first (their 1-based position is the turn's number). A turn
    cut short by the end of its process has a snapshot but no record of its end: it is listed with an
    empty `after` (what it changed is unknown)."""
    ended = {item.turn_id for item in items if isinstance(item, TurnChanges)}
    turns = []
    for item in items:
        if isinstance(item, TurnChanges) and item.files:
            turns.append(item)
        elif isinstance(item, TurnSnapshot) and item.turn_id not in ended:
            turns.append(TurnChanges(item.turn_id, item.commit, item.tree, "", "", [], ""))
    return turns


def numbered_turns(items: Sequence[Item], which: str | None = None) -> list[tuple[int, TurnChanges]]:
    """The turns that changed files with their numbers (1 for the first); with `which` — a number as
    listed, or an id or id prefix — only the one it names, LookupError saying why when it names none or
    several."""
    turns = list(enumerate(changing_turns(items), 1))
    if which is None:
        return turns
    found = [(n, t) for n, t in turns if (str(n) == which if which.isdigit() else t.turn_id.startswith(which))]
    if len(found) != 1:
        raise LookupError(f"{which!r} names {'no' if not found else 'more than one'} turn that changed files "
                          f"({len(turns)} did)")
    return found


def _undo_stack(items: Sequence[Item]) -> list[dict]:
    """The undos not yet redone, oldest first (each one's data: turn id, snapshots, redo point)."""
    stack: list[dict] = []
    for item in items:
        if isinstance(item, ContextMessage) and item.data:
            if item.kind == UNDO:
                stack.append(item.data)
            elif item.kind == REDO and stack:
                stack.pop()
    return stack


def pick_turn(items: Sequence[Item], which: str | None) -> tuple[int, TurnChanges]:
    """(number, record) of the turn `which` names: its number, its id or an id prefix; by default the
    last changing turn not undone."""
    turns = changing_turns(items)
    undone = {entry.get("turn_id") for entry in _undo_stack(items)}
    if not turns:
        raise UndoError("no turn of this session changed any file")
    if which is None:
        for number in range(len(turns), 0, -1):
            if turns[number - 1].turn_id not in undone:
                return number, turns[number - 1]
        raise UndoError("every turn that changed files is already undone (redo brings the last one back)")
    if which.isdigit():
        number = int(which)
        if not 1 <= number <= len(turns):
            raise UndoError(f"there is no turn {number}: turns 1 to {len(turns)} changed files")
        chosen = [(number, turns[number - 1])]
    else:
        chosen = [(n, t) for n, t in enumerate(turns, 1) if t.turn_id.startswith(which)]
    if len(chosen) != 1:
        raise UndoError(f"{which!r} names {'no' if not chosen else 'more than one'} turn that changed files")
    if chosen[0][1].turn_id in undone:
        raise UndoError(f"turn {chosen[0][0]} is already undone")
    return chosen[0]


async def _require_snapshots(snapshots: SnapshotStore, turn: str, verb: str, *commits: str) -> None:
    """Refuse, saying why, when `auger gc` pruned the snapshots a turn's undo or redo needs."""
    for commit in commits:
        if commit and not await snapshots.exists(commit):
            raise UndoError(f"{turn} can no longer be {verb}: its snapshots were pruned (the session was idle "
                            "longer than snapshot_retention_days and the turn is not among its latest "
                            "snapshot_keep_turns changing turns)")


def _files(result) -> list[str]:
    return sorted(set(result.written) | set(result.removed))


def _listed(paths: list[str]) -> str:
    shown = ", ".join(paths[:30])
    return shown + (f" and {len(paths) - 30} more" if len(paths) > 30 else "") if paths else "none"


async def undo_turn(snapshots: SnapshotStore, items: Sequence[Item], which: str | None,
                    force: bool = False) -> tuple[ContextMessage, TurnUndone]:
    """Put the tree back as it was before the turn; the note for the model and the event to announce."""
    from auger.changes.diff import unrecorded_changes
    from auger.changes.snapshots import Snapshot
    from auger.changes.undo import UndoRefused, undo

    number, turn = pick_turn(items, which)
    await _require_snapshots(snapshots, f"turn {number}", "undone", turn.before, turn.after)
    if not turn.after and not force:
        raise UndoError(f"turn {number} was cut short before its changes were recorded (its process ended), so "
                        "its changes cannot be told from later ones; force the undo to put every file back as "
                        "it was before that turn")
    after = Snapshot(turn.after, turn.after_tree) if turn.after else None
    try:
        result = await undo(snapshots, Snapshot(turn.before, turn.before_tree), after, force=force)
    except UndoRefused as exc:
        raise UndoError(str(exc)) from None
    files = _files(result)
    lost = await unrecorded_changes(snapshots, turn.before, turn.after) if turn.after else []
    text = (f"The user undid turn {number}: the project's files are back as they were before it. Files changed "
            f"back: {_listed(files)}. That turn's changes are gone; read a file again before editing it.")
    if lost or result.failed:
        text += f" Not restored: {'; '.join(result.failed + lost)}."
    data = {"turn_id": turn.turn_id, "number": number, "before": turn.before, "before_tree": turn.before_tree,
            "redo": result.redo.commit, "redo_tree": result.redo.tree, "files": files}
    return ContextMessage(text, UNDO, data), TurnUndone(turn.turn_id, False, files, result.failed + lost)


async def redo_turn(snapshots: SnapshotStore, items: Sequence[Item],
                    force: bool = False) -> tuple[ContextMessage, TurnUndone]:
    """Re-apply the last undo's turn, refusing if the tree changed since the undo (unless forced)."""
    from auger.changes.snapshots import Snapshot
    from auger.changes.undo import UndoRefused, restore

    stack = _undo_stack(items)
    if not stack:
        raise UndoError("there is no undo to redo")
    last = stack[-1]
    await _require_snapshots(snapshots, f"turn {last['number']}", "redone", last["before"], last["redo"])
    try:
        result = await restore(snapshots, Snapshot(last["redo"], last["redo_tree"]),
                               expected=Snapshot(last["before"], last["before_tree"]), force=force)
    except UndoRefused as exc:
        raise UndoError(str(exc).replace("not undone", "not redone")) from None
    files = _files(result)
    text = (f"The user redid turn {last['number']}: its changes are back in the project's files. Files changed: "
            f"{_listed(files)}. Read a file again before editing it.")
    return (ContextMessage(text, REDO, {"turn_id": last["turn_id"], "files": files}),
            TurnUndone(last["turn_id"], True, files, result.failed))

