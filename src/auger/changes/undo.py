"""Putting the project back exactly as a snapshot recorded it — and forward again (redo).

How, and why:

* The tree is snapshotted now, and only the paths where that differs from the target are touched:
  files created since are removed, deleted or changed ones written back with the target's bytes,
  a rename is the removal of one path and the restoring of another, permission bits are set as
  recorded (a bare chmod too), and directories that the removals leave empty are removed unless the target has files
  in them. Everything else, ignored files and the user's `.git` included, is left alone.
* Someone may have edited a file after the turn ended (the user, an editor, a formatter). Undoing
  then would silently throw that work away, so when the caller passes the snapshot taken at the
  turn's end, any path that differs from it makes undo refuse, with the list, before changing
  anything — unless forced. An ignored file that changed since (a log, a coverage file: rewritten
  by every test run) does not stop the undo: it is left as it is, and listed as not restored.
* auger's own files (the session database, its data directory) and protected files (secrets/protected.py)
  are never touched, even where an earlier snapshot holds one: undo neither restores nor removes a file the
  snapshots did not record.
* The snapshot of "now" is returned as the redo point: restoring it undoes the undo.
* Files are written beneath the root handle, never through a symlink, never into a git directory.
  A path that cannot be restored is listed in `failed`; the rest are still restored.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable

from auger.changes.diff import changes
from auger.changes.files import chmod_beneath, remove_beneath, symlink_beneath, write_beneath
from auger.changes.snapshots import Entry, Snapshot, SnapshotStore
from auger.policy.fs import RootHandle
from auger.policy.gitguard import git_write_refusal
from auger.policy.paths import PathEscape


class UndoRefused(Exception):
    """Undo would overwrite changes made after the turn; nothing was changed."""

    def __init__(self, conflicts: list[str]) -> None:
        self.conflicts = conflicts
        shown = ", ".join(conflicts[:20]) + (f" and {len(conflicts) - 20} more" if len(conflicts) > 20 else "")
        super().__init__(f"not undone: {len(conflicts)} file(s) changed after the turn ended ({shown}); "
                         "nothing was changed (force the undo to discard those changes)")


@dataclass
class RestoreResult:
    """What a restore did. `redo` is the snapshot of the tree just before it."""

    redo: Snapshot
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    removed_dirs: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # paths refused (inside a git directory)
    failed: list[str] = field(default_factory=list)  # "path: why" for paths that could not be restored


async def restore(store: SnapshotStore, target: Snapshot | str, *, expected: Snapshot | str | None = None,
                  force: bool = False) -> RestoreResult:
    """Make the tree what `target` recorded. With `expected` (the tree the caller believes is current,
    e.g. the snapshot at the turn's end), refuse with UndoRefused if the tree differs from it."""
    now = await store.snapshot("before restore")
    protects = await store.protects()
    left: set[str] = set()  # ignored files changed after the turn: left as they are
    if expected is not None and not force:
        expected_tree = expected.tree if isinstance(expected, Snapshot) else None
        drift = {path for path in await _permission_changes(store, now, expected, set())
                 if not store.is_own(path) and not protects(path)}
        if expected_tree != now.tree:
            drift |= {c.path for c in await changes(store, expected, now, renames=False)}
        left = await store.ignored(sorted(drift))
        if drift - left:
            raise UndoRefused(sorted(drift - left))
    result = RestoreResult(redo=now)
    result.failed += [f"{path}: an ignored file changed after the turn; left as it is" for path in sorted(left)]
    diff = [c for c in await changes(store, now, target, renames=False) if c.path not in left]
    chmods = await _permission_changes(store, now, target, {c.path for c in diff})
    chmods = {path: bits for path, bits in chmods.items()
              if path not in left and not store.is_own(path) and not protects(path)}
    if not diff and not chmods:
        return result
    wanted = await store.entries(target)
    target_bits = _Bits(*await store.modes(target))
    target_dirs = {os.path.dirname(p) for p in wanted}
    target_dirs |= {d for p in list(target_dirs) for d in _parents(p)}
    writes = [wanted[c.path] for c in diff if c.path in wanted]
    removals = [c.path for c in diff if c.path not in wanted]
    contents = await store.blobs([e.oid for e in writes])
    handle = RootHandle(store.root)
    try:
        for path in sorted(removals, reverse=True):
            if not _refused(handle, path, result) and _attempt(result, path, remove_beneath, handle, path):
                result.removed.append(path)
        _remove_empty_dirs(handle, removals, target_dirs, result)
        for entry in writes:
            if (not _refused(handle, entry.path, result)
                    and _attempt(result, entry.path, _put, handle, entry, contents[entry.oid], target_bits)):
                result.written.append(entry.path)
        for path, bits in chmods.items():
            if not _refused(handle, path, result) and _attempt(result, path, chmod_beneath, handle, path, bits):
                result.written.append(path)
    finally:
        handle.close()
    return result


async def undo(store: SnapshotStore, before: Snapshot, after: Snapshot | None, *,
               force: bool = False) -> RestoreResult:
    """Undo a turn: back to `before` (taken at its start), refusing if the tree is no longer `after`
    (taken at its end). Redo is `restore(store, result.redo, expected=before)`."""
    return await restore(store, before, expected=after, force=force)


def _parents(path: str) -> list[str]:
    out = []
    while path:
        path = os.path.dirname(path)
        out.append(path)
    return out


def _refused(handle: RootHandle, path: str, result: RestoreResult) -> bool:
    """Paths come from the project's files: never write into a git directory, whatever a tree says."""
    try:
        refusal = git_write_refusal(handle, path)
    except PathEscape:
        refusal = "outside the root"
    if refusal is not None:
        result.skipped.append(path)
        return True
    return False


def _attempt(result: RestoreResult, path: str, action: Callable[..., None], *args: object) -> bool:
    """Run one path's change; a path that cannot be changed (a directory holding ignored files where
    the snapshot has a file, a read-only directory) is reported, and the others still restored."""
    try:
        action(*args)
    except (OSError, PathEscape) as exc:
        result.failed.append(f"{path}: {getattr(exc, 'strerror', None) or exc}")
        return False
    return True


@dataclass(frozen=True)
class _Bits:
    """A snapshot's permission bits: the usual pair, and the files with other bits."""

    usual: tuple[int, int]
    files: dict[str, int]

    def of(self, entry: Entry) -> int:
        return self.files.get(entry.path, self.usual[1] if entry.mode == "100755" else self.usual[0])


async def _permission_changes(store: SnapshotStore, now: Snapshot | str, target: Snapshot | str,
                              differing: set[str]) -> dict[str, int]:
    """Files the same in content and git mode whose other permission bits differ (git cannot see a
    chmod 600): path -> the target's bits."""
    have, want = _Bits(*await store.modes(now)), _Bits(*await store.modes(target))
    if have.usual == want.usual and have.files == want.files:
        return {}
    now_entries, target_entries = await store.entries(now), await store.entries(target)
    candidates = (target_entries.keys() if have.usual != want.usual
                  else {p for p in have.files.keys() | want.files.keys() if have.files.get(p) != want.files.get(p)})
    out = {}
    for path in candidates:
        old, new = now_entries.get(path), target_entries.get(path)
        if (old is None or new is None or path in differing or new.mode == "120000"
                or have.of(old) == want.of(new)):
            continue
        out[path] = want.of(new)
    return out


def _put(handle: RootHandle, entry: Entry, data: bytes, bits: _Bits) -> None:
    """Write one file as the snapshot has it: a symlink, or bytes with its recorded permission bits."""
    if entry.mode == "120000":
        symlink_beneath(handle, entry.path, os.fsdecode(data))
    else:
        write_beneath(handle, entry.path, data, bits.of(entry))


def _remove_empty_dirs(handle: RootHandle, removed: list[str], keep: set[str], result: RestoreResult) -> None:
    """Remove the directories the removals emptied, deepest first, unless the target has files there."""
    candidates = sorted({d for p in removed for d in _parents(p) if d and d not in keep},
                        key=lambda d: d.count("/"), reverse=True)
    for d in candidates:
        try:
            where = handle.resolve(d, follow=False, links=False)
        except (OSError, PathEscape):
            continue
        try:
            os.rmdir(where.name, dir_fd=where.parent_fd)
            result.removed_dirs.append(d)
        except OSError:
            pass  # not empty (ignored files, or files the snapshot skipped), or not a directory
        finally:
            os.close(where.parent_fd)
