"""The copy of the project a pending-mode session's tools work on, and how what changes there is queued.

Why it is built this way:

* One view for every tool. The session's tools (file tools, search, apply_patch, shell) work on a
  private copy of the project in which the queued changes (changes/pending.py) are already made: the
  session's root handle, its sandbox and its commands' working directory all point at the copy. So
  `read_file`, `grep`, an approval's preview diff and `python -m pytest` all see the pending content
  through the one path they always use, with no per-tool special case, and the sandbox confines a
  command to the copy exactly as it confines it to the project otherwise (the real project is then
  outside the writable set: read-only to commands). The root handle also takes the project's
  absolute paths as the copy's.
* Shell changes are captured, not refused. After every call that may change something, the copy is
  compared with the view it should hold (the real file, or its latest queued content), cheaply by
  (inode, size, mtime, mode) first; whatever differs becomes a queue entry proposed by that call. A
  file tool changes only the paths it names, so only those are looked at (no scan of the tree).
  Files the project ignores (`.gitignore` and friends, as the search tools read them: build output)
  and caches (`__pycache__`, …) are not captured from commands: they stay in the copy, so tests can
  build, but are never applied. A path a file tool was asked to write is captured even when ignored.
  Only regular files are queued; a symlink a command makes stays in the copy and the model is told.
* The copy follows the user. At each user turn, files the user changed in the project since the
  copy was made (and that have nothing queued) are brought over. A change made to an outdated copy
  (the user edited the file mid-turn) is queued as based on a stale copy, and apply refuses it rather
  than silently undo the user's edit.
* The copy is made with `cp -a --reflink=auto` (cheap on copy-on-write filesystems; a full copy
  elsewhere), without `.git`: it is a work tree for tools and tests, not a second repository.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from auger.changes.files import remove_beneath, write_beneath
from auger.changes.pending import (
    STALE, Content, PathState, PendingError, check_target, digest, latest, read_file,
)
from auger.policy.fs import RootHandle
from auger.policy.paths import PathEscape
from auger.store.base import PendingStore

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
        """Copy `real` (without its `.git`: the copy is a work tree, not a second repository; see
        `link_repository`) into the new
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

    def link_repository(self) -> Path | None:
        """Give git in the copy the project's repository, as a linked worktree has it: a `.git` file in the
        copy naming the project's `.git` directory (only a real directory, never one reached through a
        link). Returns that directory, which the caller must keep read-only to commands; None when there
        is none. Walks skip anything named `.git`, so the file is never queued."""
        git = self.real / ".git"
        try:
            if not stat.S_ISDIR(os.lstat(git).st_mode):
                return None
        except OSError:
            return None
        (self.tree / ".git").write_text(f"gitdir: {git}\n")
        return git

    def unlink_repository(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.tree / ".git").unlink()

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
