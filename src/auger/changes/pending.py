"""Pending-changes mode: the model's changes to files are queued for review, not written, until applied.

Why it is built this way:

* One view for every tool. The session's tools (file tools, search, apply_patch, shell) work on a
  private copy of the project, the *overlay*, in which the queued changes are already made: the
  session's root handle, its sandbox and its commands' working directory all point at the copy. So
  `read_file`, `grep`, an approval's preview diff and `python -m pytest` all see the pending content
  through the one path they always use, with no per-tool special case, and the sandbox confines a
  command to the copy exactly as it confines it to the project otherwise (the real project is then
  outside the writable set: read-only to commands).
* Shell changes are captured, not refused. After every call that may change something, the copy is
  compared with the view it should hold (the real file, or its latest queued content), cheaply by
  (inode, size, mtime, mode) first; whatever differs becomes a queue entry proposed by that call.
  Files the project ignores (`.gitignore` and friends, as the search tools read them: caches, build
  output) are not captured from commands: they stay in the copy, so tests can build, but are never
  applied. A path a file tool was asked to write is captured even when ignored. Only regular files
  are queued; a symlink a command makes stays in the copy and the model is told.
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
import contextlib
import errno
import hashlib
import os
import shutil
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable

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


# --------------------------------------------------------------------------- the overlay


_Stamp = tuple[int, int, int, int]  # (inode, size, mtime_ns, mode)
# Caches tools write wherever they run, ignored or not: never a change anyone means to propose.
CACHE_DIRS = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis"})


@dataclass(frozen=True)
class Captured:
    path: str
    content: bytes | None
    mode: int | None


class Overlay:
    """The private copy of the project the session's tools work on: the real tree plus the queue.

    `capture` finds what changed in it since it was last in step (by stamp, then by content)."""

    def __init__(self, real: Path, tree: Path) -> None:
        self.real = real
        self.tree = tree
        self.handle = RootHandle(tree, alias=real)  # the project's absolute paths name the copy's files
        self._stamps: dict[str, _Stamp] = {}
        # (size, mtime) of each real file as the copy holds it (cp -a keeps both): a change to a file
        # whose real stamp moved since was made to an outdated copy
        self._copied: dict[str, tuple[int, int]] = {}
        self.problem = ""  # what could not be copied, if anything

    @classmethod
    def create(cls, real: Path, tree: Path, states: Iterable[PathState]) -> Overlay:
        """Copy `real` (without its `.git`: the copy is a work tree, not a second repository) into the new
        directory `tree`, with `cp --reflink=auto` (cheap on copy-on-write filesystems), then make the
        queued changes in it."""
        tree.mkdir(mode=0o700)
        names = [e.name for e in os.scandir(real) if e.name != ".git"]
        copied = subprocess.run(["cp", "-a", "--reflink=auto", "--", *names, str(tree)], cwd=real, check=False,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) if names else None
        overlay = cls(real, tree)
        if copied is not None and copied.returncode != 0:
            lines = copied.stderr.decode("utf-8", "replace").splitlines()
            overlay.problem = "; ".join(lines[:3]) + (f" and {len(lines) - 3} more" if len(lines) > 3 else "")
        for state in states:
            overlay._put(state.path, state.content_of())
        overlay._stamps = dict(overlay._scan())
        overlay._copied = {rel: (st[1], st[2]) for rel, st in overlay._stamps.items() if stat.S_ISREG(st[3])}
        return overlay

    def _real_stamp(self, rel: str) -> tuple[int, int] | None:
        try:
            st = os.lstat(self.real / rel)  # compared only: every read of the real tree goes beneath its handle
        except OSError:
            return None
        return (st.st_size, st.st_mtime_ns) if stat.S_ISREG(st.st_mode) else None

    def drifted(self, pending: Iterable[str]) -> list[str]:
        """Files the user changed, created or removed in the project since the copy was made from it, and
        that nobody changed in the copy: those to bring over, so the tools see the project as it is."""
        now = {rel: (st[1], st[2]) for rel, st in self._scan(self.real) if stat.S_ISREG(st[3])}
        found = [rel for rel, st in now.items() if self._copied.get(rel) != st]
        found += [rel for rel in self._copied if rel not in now and self._real_stamp(rel) is None]
        skip = set(pending)
        return [rel for rel in found if rel not in skip and self._stamps.get(rel) == self._stamp(rel)]

    def copy_is_current(self, rel: str) -> bool:
        """Whether the real file is still what the copy was made from (or is absent in both)."""
        return self._real_stamp(rel) == self._copied.get(rel)

    def close(self) -> None:
        self.handle.close()
        shutil.rmtree(self.tree.parent if self.tree.parent.name.startswith("auger-pending-") else self.tree,
                      ignore_errors=True)

    def _scan(self, top: Path | None = None) -> Iterable[tuple[str, _Stamp]]:
        """The copy's (or `top`'s) files and symlinks as the search tools see the project (ignored ones and
        caches left out)."""
        from auger.tools.walk import walk

        for entry in walk(top or self.tree, include_symlinks=True):
            if not CACHE_DIRS.isdisjoint(entry.rel.split("/")):
                continue
            with contextlib.suppress(OSError):
                st = os.lstat(entry.path)
                yield entry.rel, (st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode)

    def _stamp(self, rel: str) -> _Stamp | None:
        try:
            st = os.lstat(self.tree / rel)
        except OSError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode

    def capture(self, view: Callable[[str], Content], named: Iterable[str] = (),
                everything: bool = True) -> tuple[list[Captured], list[str]]:
        """What differs between the copy and `view` (a path's expected content) since the last capture,
        and the notes on what cannot be queued (symlinks). `named`: paths to look at even if ignored;
        `everything=False`: only those (a file tool changes nothing else), sparing a scan of the tree."""
        named = [rel for rel in (self._resolved(raw) for raw in named) if rel]
        now = dict(self._scan()) if everything else {}
        for rel in named:
            stamp = self._stamp(rel)
            if stamp is not None:
                now[rel] = stamp
        changed: list[Captured] = []
        notes: list[str] = []
        candidates = [*now, *(r for r in self._stamps if r not in now)] if everything else named
        for rel in dict.fromkeys(candidates):
            old, new = self._stamps.get(rel), now.get(rel)
            if new is None:
                if self._stamp(rel) is not None:
                    continue  # still there, only ignored now
            elif old == new:
                continue
            if new is not None and stat.S_ISLNK(new[3]):
                notes.append(f"{rel} is a symlink: pending mode queues regular files only, so it stays in the "
                             "pending copy and will not be applied")
                continue
            try:
                found = read_file(self.handle, rel) if new is not None else None
            except (OSError, PendingError):
                continue  # a directory or special file: nothing a file change can say
            if found != view(rel):
                changed.append(Captured(rel, None if found is None else found[0], None if found is None else found[1]))
        if everything:
            self._stamps = now
        for rel in named:
            if rel in now:
                self._stamps[rel] = now[rel]
            else:
                self._stamps.pop(rel, None)
        return changed, notes

    def _resolved(self, raw: str) -> str | None:
        """`raw` as the file tools resolve it in the copy (links inside followed), or None."""
        try:
            where = self.handle.resolve(raw)
        except (OSError, PathEscape):
            return None
        os.close(where.parent_fd)
        return where.rel or None

    def reset(self, paths: Iterable[str], view: Callable[[str], Content]) -> None:
        """Make `paths` in the copy what `view` says (after an apply, discard, rewind or undo) and take them as
        in step. A file already right is left alone, so the tools' read stamps of it stay valid."""
        for rel in paths:
            wanted = view(rel)
            try:
                held = read_file(self.handle, rel)
            except (OSError, PendingError):
                held = None
            if held != wanted or (wanted is None and self._stamp(rel) is not None):
                self._put(rel, wanted)
            real = self._real_stamp(rel)
            if real is None:
                self._copied.pop(rel, None)
            else:
                self._copied[rel] = real
            stamp = self._stamp(rel)
            if stamp is None:
                self._stamps.pop(rel, None)
            else:
                self._stamps[rel] = stamp

    def _put(self, rel: str, content: Content) -> None:
        try:
            if content is None:
                remove_beneath(self.handle, rel)
            else:
                write_beneath(self.handle, rel, content[0], content[1])
        except (OSError, PathEscape):
            pass  # a path the copy cannot hold (a file where a directory is): the queue still has it


# --------------------------------------------------------------------------- one session's pending mode


Emit = Callable[[list[str], list[str]], None]  # (paths changed, notes) -> announce


class PendingChanges:
    """A session's pending mode: its overlay and its queue. `tree` is the root its tools use."""

    def __init__(self, store: PendingStore, session_id: str, real: Path, overlay: Overlay, agent: str = "main") -> None:
        self.store = store
        self.session_id = session_id
        self.real = real
        self.overlay = overlay
        self.agent = agent
        self._real_handle = RootHandle(real)
        self._states: dict[str, PathState] = {}
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls, store: PendingStore, session_id: str, real: Path) -> PendingChanges:
        """The copy is made in a private temp dir (removed at close, or at the next start after a crash)."""
        from auger.process import owned_temp_dir

        states = latest(await store.load_pending(session_id))
        tree = owned_temp_dir("pending") / "tree"
        overlay = await asyncio.to_thread(Overlay.create, real, tree, states.values())
        self = cls(store, session_id, real, overlay)
        self._states = states
        return self

    @property
    def tree(self) -> Path:
        return self.overlay.tree

    @property
    def handle(self) -> RootHandle:
        """The root handle the session's tools use: on the copy, taking the project's absolute paths."""
        return self.overlay.handle

    @property
    def paths(self) -> list[str]:
        return list(self._states)

    async def close(self) -> None:
        self._real_handle.close()
        await asyncio.to_thread(self.overlay.close)

    def view(self, rel: str) -> Content:
        """What `rel` should hold in the copy: its latest queued content, else the real file."""
        state = self._states.get(rel)
        if state is not None:
            return state.content_of()
        try:
            return read_file(self._real_handle, rel)
        except (OSError, PendingError):
            return None

    async def sync(self) -> tuple[list[str], list[str]]:
        """Queue what changed in the copy since the last call (a background command's writes)."""
        return await self.capture("shell", "background", {})

    async def capture(self, tool: str, call_id: str, args: dict[str, Any]) -> tuple[list[str], list[str]]:
        """Queue what a call changed in the copy; the paths queued and notes on what was refused."""
        async with self._lock:
            named, complete = named_paths(tool, args)
            found, notes = await asyncio.to_thread(self.overlay.capture, self.view, named, not complete)
            queued = []
            for change in found:
                try:
                    now = await asyncio.to_thread(check_target, self._real_handle, change.path)
                except PendingError as exc:
                    notes.append(f"{exc}: the change stays in the pending copy and will not be applied")
                    continue
                await self.store.add_pending(self.session_id, change.path, self._based_on(change.path, now),
                                             change.content, change.mode, self.agent, call_id, tool)
                queued.append(change.path)
            if queued:
                await self.reload()
            return queued, notes

    def _based_on(self, rel: str, now: Content) -> str:
        """The before-hash of a new entry: its chain's, else the real file's, if the copy was made from it."""
        state = self._states.get(rel)
        if state is not None:
            return state.before_hash
        return digest(now) if self.overlay.copy_is_current(rel) else STALE

    async def reload(self) -> list[str]:
        """Read the queue again (after apply, discard or rewind in this process or another)."""
        self._states = latest(await self.store.load_pending(self.session_id))
        return list(self._states)

    async def follow_project(self) -> list[str]:
        """Bring the user's edits to the project (of files with nothing queued) into the copy; the paths."""
        async with self._lock:
            paths = await asyncio.to_thread(self.overlay.drifted, list(self._states))
            await asyncio.to_thread(self.overlay.reset, paths, self.view)
        return paths

    async def refresh(self, paths: Iterable[str]) -> None:
        """Bring `paths` in the copy back in step with the queue and the real tree."""
        await self.reload()
        async with self._lock:
            await asyncio.to_thread(self.overlay.reset, list(paths), self.view)


FILE_TOOLS = frozenset({"write_file", "edit_file", "apply_patch"})  # they change exactly the paths they name


def named_paths(tool: str, args: dict[str, Any]) -> tuple[list[str], bool]:
    """The paths a file-changing call names (to capture them even when ignored), and
    whether they are all it can change (a file tool, or a patch sent through the shell)."""
    raw: list[str] = []
    if isinstance(args.get("path"), str):
        raw.append(args["path"])
    patch = args.get("patch")
    complete = tool in FILE_TOOLS
    if tool == "shell" and isinstance(args.get("command"), (str, list)):
        from auger.changes.apply_patch import extract_from_shell

        shell_patch = extract_from_shell(args["command"])
        patch = shell_patch.patch if shell_patch is not None else None
        complete = shell_patch is not None and shell_patch.workdir is None
    if isinstance(patch, str):
        from auger.changes.apply_patch import PatchError, UpdateFile, parse_patch

        with contextlib.suppress(PatchError):
            for op in parse_patch(patch):
                raw.append(op.path)
                if isinstance(op, UpdateFile) and op.move_to:
                    raw.append(op.move_to)
    return raw, complete  # resolved beneath the copy by the capture, as the tools resolved them
