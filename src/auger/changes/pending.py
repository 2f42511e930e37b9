"""Pending-changes mode: the model's changes to files are queued for review, not written, until applied.

This module is the queue: what each path's entries leave it as, the list a user reviews, and apply,
discard and rewind over the store's `PendingStore`. The copy of the project the session's tools work
on, and how changes made there become entries, is `changes/overlay.py`.

Why it is built this way:

* The store is the truth, the copy a cache. Each entry keeps the path, the sha256 of the real file
  when it was proposed (or "absent"), the new content (or a deletion), its mode bits and who proposed
  it. A resumed session rebuilds its copy from the real tree plus the queue; discard and rewind
  rewrite the affected files of the copy from the same two sources.
* Apply is checked per file. A file whose real content no longer matches the hash its first queued
  entry was based on (edited on disk since) is refused whole, with the reason; the other files are
  written. Writes go through `changes/files.py` beneath a handle on the real root (no `..`, no
  symlink on the way, never into `.git`), so a hostile path or a symlink planted in the real tree
  since is refused at apply time as it was at queue time.
* Every path here is hostile: it came from a model, a command or the store. Queue time refuses
  absolute paths, `..`, git directories and real paths reached through a symlink.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable, Iterable

from auger.changes.files import remove_beneath, write_beneath
from auger.policy.fs import RootHandle, read_fd
from auger.policy.gitguard import git_write_refusal
from auger.policy.paths import PathEscape
from auger.protocol.items import ContextMessage
from auger.store.base import PendingRecord, PendingStore

ABSENT = "absent"  # the before-hash of a file that did not exist
STALE = "stale"  # the before-hash of a change made to a copy of a file that has changed on disk since
APPLIED, DISCARDED, REWOUND = "applied", "discarded", "rewound"
NOTE_KIND = "pending"  # the ContextMessage kind that tells the model about pending mode and its queue

Content = tuple[bytes, int] | None  # a regular file's bytes and permission bits; None: no file


class PendingError(Exception):
    """A path that cannot be queued or applied; the message says which and why."""


def digest(found: Content) -> str:
    return ABSENT if found is None else hashlib.sha256(found[0]).hexdigest()


def clean_path(raw: str) -> str:
    """`raw` as a project-relative path, or PendingError: no absolute path, no `..`, no NUL, not the root."""
    if "\0" in raw:
        raise PendingError(f"{raw!r}: a path cannot contain a NUL byte")
    if os.path.isabs(raw):
        raise PendingError(f"{raw}: an absolute path; pending changes name files relative to the project root")
    rel = os.path.normpath(raw)
    if rel in (".", "") or rel == ".." or rel.startswith("../"):
        raise PendingError(f"{raw}: not a file inside the project root")
    return rel


def read_file(root: RootHandle, rel: str) -> Content:
    """The regular file at `rel` beneath `root`, reached without any symlink; None when absent."""
    try:
        fd = _open_plain(root, rel, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise PendingError(f"{rel} is not a regular file")
        return read_fd(fd), stat.S_IMODE(st.st_mode)
    finally:
        os.close(fd)


def _open_plain(root: RootHandle, rel: str, flags: int) -> int:
    """Open `rel` beneath `root` with no symlink anywhere on its path (the last component included)."""
    try:
        where = root.resolve(rel, follow=False, links=False)
    except PathEscape as exc:
        raise PendingError(str(exc)) from None
    except NotADirectoryError:
        raise PendingError(f"{rel}: a parent of it is a file, not a directory") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PendingError(f"{rel}: a symlink on its path; pending changes are never written through one") from None
        raise
    try:
        return os.open(where.name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=where.parent_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PendingError(f"{rel} is a symlink; pending changes are never written through one") from None
        raise
    finally:
        os.close(where.parent_fd)


def check_target(root: RootHandle, rel: str) -> Content:
    """Refuse a hostile target (outside, in git, through a symlink, not a regular file); else what is there now."""
    rel = clean_path(rel)
    why = git_write_refusal(root, rel)
    if why is not None:
        raise PendingError(why)
    try:
        return read_file(root, rel)
    except (OSError, PathEscape) as exc:
        raise PendingError(f"{rel}: {getattr(exc, 'strerror', None) or exc}") from None


# --------------------------------------------------------------------------- the queue, read


@dataclass
class PathState:
    """Where a path's queued entries leave it."""

    path: str
    content: bytes | None
    mode: int | None
    before_hash: str  # of the first entry: what the whole chain was built on
    seqs: list[int] = field(default_factory=list)
    proposers: list[str] = field(default_factory=list)

    def content_of(self) -> Content:
        if self.content is None:
            return None
        return self.content, 0o644 if self.mode is None else self.mode


def latest(entries: Iterable[PendingRecord]) -> dict[str, PathState]:
    """Each path's state after its entries, in the order paths were first changed."""
    states: dict[str, PathState] = {}
    for entry in entries:
        state = states.get(entry.path)
        if state is None:
            state = states[entry.path] = PathState(entry.path, entry.content, entry.mode, entry.before_hash)
        state.content, state.mode = entry.content, entry.mode
        state.seqs.append(entry.seq)
        who = f"{entry.agent}/{entry.tool}/{entry.call_id}"
        if who not in state.proposers:
            state.proposers.append(who)
    return states


@dataclass(frozen=True)
class Row:
    """One line of `auger pending list`."""

    path: str
    kind: str  # "add" | "modify" | "delete"
    added: int
    removed: int
    proposers: list[str]
    seqs: list[int]


def rows(root: RootHandle, entries: Iterable[PendingRecord]) -> list[Row]:
    """What each pending path does to the real file, with +/- line counts."""
    import difflib

    out = []
    for state in latest(entries).values():
        try:
            now = read_file(root, state.path)
        except (OSError, PendingError):
            now = None
        old = b"" if now is None else now[0]
        new = b"" if state.content is None else state.content
        kind = "delete" if state.content is None else "add" if state.before_hash == ABSENT else "modify"
        added = removed = 0
        for line in difflib.unified_diff(old.decode("utf-8", "replace").splitlines(),
                                         new.decode("utf-8", "replace").splitlines(), lineterm="", n=0):
            if line.startswith("+") and not line.startswith("+++"):
                added += 1
            elif line.startswith("-") and not line.startswith("---"):
                removed += 1
        out.append(Row(state.path, kind, added, removed, state.proposers, state.seqs))
    return out


# --------------------------------------------------------------------------- apply, discard, rewind


@dataclass
class ApplyReport:
    applied: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)  # "path: why", nothing of the file written
    unknown: list[str] = field(default_factory=list)  # asked for, but nothing is pending there

    def summary(self) -> str:
        parts = [f"applied {len(self.applied)} file{'s' if len(self.applied) != 1 else ''}"
                 + (f" ({', '.join(self.applied)})" if self.applied else "")]
        parts += [f"refused {c}" for c in self.conflicts]
        parts += [f"nothing pending for {u}" for u in self.unknown]
        return "; ".join(parts)


def select(states: dict[str, PathState], paths: list[str] | None) -> tuple[list[PathState], list[str]]:
    """The states `paths` name (a directory names everything under it; None: all), and the names
    that match nothing pending."""
    if not paths:
        return list(states.values()), []
    chosen: dict[str, PathState] = {}
    unknown = []
    for raw in paths:
        try:
            rel = clean_path(raw)
        except PendingError:
            unknown.append(raw)
            continue
        found = [s for p, s in states.items() if p == rel or p.startswith(rel + "/")]
        if not found:
            unknown.append(raw)
        chosen.update((s.path, s) for s in found)
    return list(chosen.values()), unknown


async def apply(store: PendingStore, session_id: str, root: Path, paths: list[str] | None = None, *,
                before_write: Callable[[], Awaitable[None]] | None = None) -> ApplyReport:
    """Write the pending changes (of `paths`, or all) to the real tree; conflicting files are refused whole.
    `before_write` runs once, before the first write (an undo snapshot)."""
    chosen, unknown = select(latest(await store.load_pending(session_id)), paths)
    report = ApplyReport(unknown=unknown)
    handle = RootHandle(root)
    try:
        ready = []
        for state in chosen:
            try:
                now = await asyncio.to_thread(check_target, handle, state.path)
            except PendingError as exc:
                report.conflicts.append(f"{state.path}: {exc}")
                continue
            if state.before_hash == STALE:
                report.conflicts.append(f"{state.path}: changed on disk after the session copied it, so the change "
                                        "was made to an older version; discard it, or ask for it again")
                continue
            if digest(now) != state.before_hash:
                changed = "created" if state.before_hash == ABSENT else "deleted" if now is None else "changed"
                report.conflicts.append(f"{state.path}: {changed} on disk since the change was proposed; "
                                        "discard it, or ask for it again")
                continue
            ready.append(state)
        if ready and before_write is not None:
            await before_write()
        for state in ready:
            try:
                await asyncio.to_thread(_write, handle, state)
            except (OSError, PathEscape) as exc:
                report.conflicts.append(f"{state.path}: cannot write it ({getattr(exc, 'strerror', None) or exc})")
                continue
            await store.settle_pending(session_id, state.seqs, APPLIED)
            report.applied.append(state.path)
    finally:
        handle.close()
    return report


def _write(root: RootHandle, state: PathState) -> None:
    if state.content is None:
        remove_beneath(root, state.path)
    else:
        write_beneath(root, state.path, state.content, state.mode)


async def discard(store: PendingStore, session_id: str, paths: list[str] | None = None) -> tuple[list[str], list[str]]:
    """Drop the pending changes of `paths` (None: all); the paths dropped and the names matching nothing."""
    chosen, unknown = select(latest(await store.load_pending(session_id)), paths)
    await store.settle_pending(session_id, [seq for s in chosen for seq in s.seqs], DISCARDED)
    return [s.path for s in chosen], unknown


async def rewind(store: PendingStore, session_id: str, seq: int) -> list[str]:
    """Drop every entry after `seq`, as if the queue had stopped there; the paths whose view changed."""
    later = [e for e in await store.load_pending(session_id) if e.seq > seq]
    await store.settle_pending(session_id, [e.seq for e in later], REWOUND)
    return list(dict.fromkeys(e.path for e in later))


def note(action: str, paths: list[str]) -> ContextMessage | None:
    """What the model is told after the user applied, discarded or rewound its queued changes."""
    if not paths:
        return None
    listed = ", ".join(paths[:30]) + (f" and {len(paths) - 30} more" if len(paths) > 30 else "")
    if action == APPLIED:
        text = f"The user applied your queued changes to: {listed}. They are in the project now."
    else:
        text = (f"The user {action} your queued changes to: {listed}. Those files are back to their earlier "
                "content; read a file again before editing it.")
    return ContextMessage(text, NOTE_KIND)
