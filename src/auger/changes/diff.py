"""What changed between two snapshots: a structured list of file changes and a unified diff.

Both come from git comparing the two snapshot trees (`diff-tree`), so renames, mode changes and
binary files are reported as git reports them, and the comparison costs nothing but the changed
blobs. The tree "now" is simply a fresh snapshot. External diff drivers and textconv filters are
never run: the snapshot repository reads no configuration that could name them. auger's own files
and protected files (secrets/protected.py) are never part of a diff, even where an earlier snapshot
recorded one. What the snapshots leave
out (ignored directories, ignored files over the limits) is compared apart: `unrecorded_changes`.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

from auger.changes.snapshots import Snapshot, SnapshotStore

_STATUS = {"A": "added", "D": "deleted", "M": "modified", "R": "renamed", "C": "copied", "T": "type changed"}


@dataclass(frozen=True)
class FileChange:
    """One file's change. `kind`: added, deleted, modified, renamed, copied, type changed, or
    "mode changed" (same content, executable bit flipped). Line counts are None for binary files."""

    kind: str
    path: str
    old_path: str | None
    old_mode: str | None
    new_mode: str | None
    binary: bool
    added_lines: int | None
    deleted_lines: int | None


def _id(snapshot: Snapshot | str) -> str:
    return snapshot.commit if isinstance(snapshot, Snapshot) else snapshot


async def changes(store: SnapshotStore, old: Snapshot | str, new: Snapshot | str, *,
                  renames: bool = True) -> list[FileChange]:
    """The files that differ from `old` to `new`, in path order; protected files left out."""
    protects = await store.protects()
    return [c for c in await _all_changes(store, old, new, renames=renames)
            if not protects(c.path) and not (c.old_path and protects(c.old_path))]


async def _all_changes(store: SnapshotStore, old: Snapshot | str, new: Snapshot | str, *,
                       renames: bool = True) -> list[FileChange]:
    args = ["diff-tree", "-r", "-z", "--no-ext-diff", "--no-textconv", "--raw", "--numstat",
            "-M" if renames else "--no-renames", _id(old), _id(new), *store.own_pathspec()]
    fields = (await store.git(*args)).split(b"\0")
    raw: list[tuple[str, str, str, str, str | None]] = []  # kind, old mode, new mode, path, old path
    i = 0
    while i < len(fields) and fields[i].startswith(b":"):
        old_mode, new_mode, old_oid, new_oid, status = fields[i][1:].decode().split(" ")
        letter = status[0]
        if letter in "RC":
            src, dst = os.fsdecode(fields[i + 1]), os.fsdecode(fields[i + 2])
            raw.append((_STATUS[letter], old_mode, new_mode, dst, src))
            i += 3
        else:
            kind = _STATUS.get(letter, "modified")
            if letter == "M" and old_oid == new_oid:
                kind = "mode changed"
            raw.append((kind, old_mode, new_mode, os.fsdecode(fields[i + 1]), None))
            i += 2
    counts: dict[str, tuple[int | None, int | None]] = {}
    while i < len(fields):
        record = fields[i]
        if not record:
            i += 1
            continue
        added, deleted, name = record.split(b"\t", 2)
        if name == b"":  # a rename: the two paths follow
            name = fields[i + 2]
            i += 3
        else:
            i += 1
        counts[os.fsdecode(name)] = (None, None) if added == b"-" else (int(added), int(deleted))
    out = []
    for kind, old_mode, new_mode, path, old_path in raw:
        plus, minus = counts.get(path, (0, 0))
        out.append(FileChange(kind, path, old_path, None if old_mode == "000000" else old_mode,
                              None if new_mode == "000000" else new_mode, plus is None, plus, minus))
    return sorted(out, key=lambda c: c.path)


async def unified_diff(store: SnapshotStore, old: Snapshot | str, new: Snapshot | str, *,
                       color: bool = False, context: int = 3, renames: bool = True) -> str:
    """The unified diff from `old` to `new` as git writes it (binary files say "Binary files … differ"),
    protected files left out.

    Undecodable bytes appear as U+FFFD: the text is for showing, the snapshots keep the bytes."""
    protects = await store.protects()
    hidden = sorted({p for c in await _all_changes(store, old, new, renames=renames)
                     for p in (c.path, c.old_path) if p and protects(p)})
    return await _diff_text(store, old, new, color=color, context=context, renames=renames, hidden=hidden)


async def _diff_text(store: SnapshotStore, old: Snapshot | str, new: Snapshot | str, *, color: bool, context: int,
                     renames: bool, hidden: list[str]) -> str:
    """The unified diff, without auger's own paths and `hidden`."""
    exclude = store.own_pathspec() or (["--", "."] if hidden else [])
    exclude += [f":(exclude,literal){path}" for path in hidden]
    args = ["diff-tree", "-r", "-p", "--no-ext-diff", "--no-textconv", f"-U{int(context)}",
            "-M" if renames else "--no-renames", "--color=always" if color else "--no-color",
            _id(old), _id(new), *exclude]
    return (await store.git(*args)).decode("utf-8", "replace")


@dataclass(frozen=True)
class TurnDiff:
    """What changed since a snapshot: the snapshot of now, the file changes, the unified diff."""

    now: Snapshot
    changes: list[FileChange]
    text: str


async def diff_since(store: SnapshotStore, since: Snapshot | str, *, color: bool = False) -> TurnDiff:
    """The changes from `since` to the current tree (snapshotted now; keep `now` as the turn's end)."""
    now = await store.snapshot("diff")
    if isinstance(since, Snapshot) and since.tree == now.tree:
        return TurnDiff(now, [], "")
    protects = await store.protects()
    every, text = await asyncio.gather(_all_changes(store, since, now),
                                       _diff_text(store, since, now, color=color, context=3, renames=True, hidden=[]))
    hidden = sorted({p for c in every for p in (c.path, c.old_path) if p and protects(p)})
    if hidden:  # a file protected since the turn began (an earlier snapshot holds it): out of the diff too
        text = await _diff_text(store, since, now, color=color, context=3, renames=True, hidden=hidden)
    return TurnDiff(now, [c for c in every if c.path not in hidden and c.old_path not in hidden], text)


def summary(file_changes: list[FileChange]) -> str:
    """One line per file: `M path (+3 -1)`, `R old -> new`, `A img.png (binary)`."""
    letters = {"added": "A", "deleted": "D", "modified": "M", "renamed": "R", "copied": "C",
               "type changed": "T", "mode changed": "M"}
    rows = []
    for c in file_changes:
        name = f"{c.old_path} -> {c.path}" if c.old_path else c.path
        if c.binary:
            detail = "binary"
        elif c.kind == "mode changed":
            detail = f"mode {c.old_mode} -> {c.new_mode}"
        else:
            detail = f"+{c.added_lines} -{c.deleted_lines}"
        rows.append(f"{letters[c.kind]} {name} ({detail})")
    return "\n".join(rows)


async def unrecorded_changes(store: SnapshotStore, old: Snapshot | str, new: Snapshot | str) -> list[str]:
    """What changed from `old` to `new` among the ignored paths the snapshots leave out, as
    "path: why" lines: undo cannot restore these. Such a file is compared by size and modification
    time; of such a directory only its removal is seen (what happens inside is never looked at)."""
    before, after = await asyncio.gather(store.unrecorded(old), store.unrecorded(new))
    out = []
    for path in sorted(before.keys() | after.keys()):
        was, now = before.get(path), after.get(path)
        if path.endswith("/"):
            if was and not now and not os.path.lexists(store.root / path):
                out.append(f"{path}: removed; an ignored directory, which snapshots leave out")
            continue
        if was is not None and now is not None and was[1:] == now[1:]:
            continue
        if now is None and os.path.lexists(store.root / path):
            continue  # still there, and recorded now (a later snapshot had room for it)
        what = "removed" if now is None else "changed"
        why = (was or now or ["size"])[0]
        limit = (f"over the {_size(store.ignored_max_file_bytes)} limit for ignored files" if why == "size"
                 else "beyond the number or size of ignored files one snapshot records")
        out.append(f"{path}: {what}; an ignored file {limit}, which snapshots leave out")
    return out


def _size(n: int) -> str:
    return f"{n >> 20} MB" if n >= 1 << 20 else f"{n >> 10} KB" if n >= 1 << 10 else f"{n} bytes"
