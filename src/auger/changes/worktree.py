"""Worktrees: a session or a sub-agent works on a copy of the project, and its changes are applied later.

How, and why:

* A worktree is a separate git repository under auger's data directory (`worktrees/`), never inside
  the project. Its objects are the project's, borrowed through git's `alternates` (nothing is
  copied), its work tree is checked out from the base commit, and its HEAD is detached at that
  commit, so `git status`, `git diff` and `git log` work there as the model expects. It is not a
  `git worktree add`: that would write into the user's `.git` (the `worktrees/` entry, its index and
  HEAD) — a directory the session's sandbox keeps read-only and the file tools refuse to write —
  and a killed process would leave an entry behind in the user's repository. This way the user's
  repository is only read (its HEAD, objects and `info/exclude`); its index, HEAD, branches, stash
  and `git worktree list` never change.
* Base: a commit of the project (`HEAD` by default, or any revision), or `"snapshot"` — a snapshot of
  the project as it is now (changes/snapshots.py), uncommitted and untracked files included, so the
  worktree starts from what the user sees. With `"snapshot"` in a git project the worktree's HEAD is
  still the user's HEAD (its uncommitted changes show as such); a directory that is not a git
  repository can only use `"snapshot"` (HEAD is then the snapshot commit).
* What changed is measured as a session's turns are: with the worktree's snapshot repository
  (the same one a session in the worktree uses for its turns), from a snapshot taken right after the
  checkout. So untracked files count, ignored ones do not, binary files and permission bits are
  handled, and commits the model makes in the worktree change nothing about it.
* Applying to the project is per file and all or nothing for each: a file the project changed since
  the base (it differs from the base there) is a conflict — reported, never written; every other
  changed file is written atomically beneath the root (changes/files.py over policy/fs, never
  through a symlink, never into a git directory) or removed.
* A worktree belongs to the process that made it (`auger-worktree-<pid>-…`, removed with its snapshot
  repository when that process is found dead, as temp dirs are), unless it is `persistent` — a
  session's, kept until `auger worktree apply` or `discard`.

The async functions are the core; the plain ones (the agreed interface) call them, also from code
running inside an event loop (then on a thread of their own).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Coroutine, TypeVar

from auger.changes.diff import FileChange, changes, diff_since, summary
from auger.changes.files import remove_beneath, symlink_beneath, write_beneath
from auger.changes.snapshots import (
    _ATTRIBUTES, DEFAULT_PERMS, Entry, SnapshotError, SnapshotStore, _git_argv, snapshot_dir,
)
from auger.policy.fs import RootHandle
from auger.policy.gitguard import git_write_refusal
from auger.policy.paths import PathEscape
from auger.secrets.protected import ProtectedFiles

WORKTREES = "worktrees"  # under auger's data directory
KIND = "worktree"  # owned_temp_dir kind: auger-worktree-<pid>-XXXX
KEPT_PREFIX = "kept-"  # a persistent worktree's directory
SNAPSHOT = "snapshot"  # the base that means "the project as it is now"
_META = "worktree.json"
_T = TypeVar("_T")


class WorktreeError(Exception):
    """A worktree that cannot be made or used; the message says why in one line."""


@dataclass(frozen=True)
class ApplyReport:
    """What applying a worktree's changes did: files written or removed, files left alone because
    the project changed them since the base, files that could not be written (`path: why`)."""

    applied: list[str]
    conflicts: list[str]
    message: str
    failed: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Worktree:
    """One worktree: `path` is its work tree (the session's root there), `base_commit` the commit it
    started from (the project's, or a snapshot commit), `project` the directory it was made from."""

    path: Path
    base_commit: str
    project: Path
    base_snapshot: str  # the worktree's own snapshot of the checkout: what "changed" is measured from
    data_dir: Path

    @property
    def persistent(self) -> bool:
        """Kept past its process (a session's, until applied or discarded)."""
        return self.path.parent.name.startswith(KEPT_PREFIX)

    # -- the agreed, plain interface -------------------------------------------------------
    def diff(self) -> str:
        """The unified diff of everything in the worktree against its base (untracked files included,
        ignored ones left out, binary files named as such)."""
        return _blocking(self.diff_async())

    def apply_to(self, root: Path) -> ApplyReport:
        """Write the worktree's changes into `root`, file by file; files `root` changed since the base
        are conflicts, left untouched."""
        return _blocking(self.apply_async(root))

    def remove(self) -> None:
        """Delete the worktree and its snapshot repository (the project is not touched)."""
        _discard(self.path.parent, self.data_dir)

    # -- the core ----------------------------------------------------------------------------
    def _store(self) -> SnapshotStore:
        """A store per call: an asyncio lock belongs to the loop it was first used in."""
        return SnapshotStore(self.path, snapshot_dir(self.data_dir, self.path))

    async def changes_async(self) -> tuple[list[FileChange], str]:
        """The files changed since the base and the unified diff."""
        if not self.path.is_dir():
            raise WorktreeError(f"the worktree {self.path} no longer exists")
        try:
            found = await diff_since(self._store(), self.base_snapshot)
        except SnapshotError as exc:
            raise WorktreeError(f"cannot read the worktree {self.path}: {exc}") from None
        return found.changes, found.text

    async def diff_async(self) -> str:
        return (await self.changes_async())[1]

    async def apply_async(self, root: Path) -> ApplyReport:
        """See `apply_to`. The project's state is read from a snapshot of it (its own snapshot
        repository), so a file is compared by content and git mode, whatever changed it."""
        root = Path(os.path.realpath(root))
        if not root.is_dir():
            raise WorktreeError(f"cannot apply to {root}: not a directory")
        mine = self._store()
        try:
            now = await mine.snapshot("worktree apply")
            changed = [c.path for c in await changes(mine, self.base_snapshot, now, renames=False)]
            if not changed:
                return ApplyReport([], [], _apply_message(root, [], [], [], now.warnings))
            project = SnapshotStore(root, snapshot_dir(self.data_dir, root))
            there = await project.entries(await project.snapshot("before worktree apply"))
            base, wanted = await mine.entries(self.base_snapshot), await mine.entries(now)
            _, odd_bits = await mine.modes(now)
            contents = await mine.blobs([wanted[p].oid for p in changed if p in wanted])
        except SnapshotError as exc:
            raise WorktreeError(f"cannot apply the worktree {self.path}: {exc}") from None
        applied: list[str] = []
        conflicts: list[str] = []
        failed: list[str] = []
        handle = RootHandle(root)
        try:
            for path in changed:
                old, new, current = base.get(path), wanted.get(path), there.get(path)
                if _same(current, new):
                    applied.append(path)  # already so (applied before, or the same edit made there)
                elif not _same(current, old):
                    conflicts.append(path)
                else:
                    problem = _put(handle, path, new, contents, _bits(path, new, current, odd_bits))
                    if problem:
                        failed.append(f"{path}: {problem}")
                    else:
                        applied.append(path)
        finally:
            handle.close()
        return ApplyReport(applied, conflicts, _apply_message(root, applied, conflicts, failed, now.warnings), failed)

    def _meta(self) -> dict[str, Any]:
        return {"project": str(self.project), "base": self.base_commit, "base_snapshot": self.base_snapshot,
                "tree": self.path.name}


# --------------------------------------------------------------------------- creating


def create_worktree(project_root: Path, *, base: str = "HEAD", name: str, data_dir: Path | None = None,
                    persistent: bool = False, protected: ProtectedFiles | None = None) -> Worktree:
    """A new worktree of `project_root` at `base` (a revision, or "snapshot"). `name` (any text) only
    labels it. `data_dir` defaults to auger's; `persistent` keeps it past this process."""
    return _blocking(create_worktree_async(project_root, base=base, name=name, data_dir=data_dir,
                                           persistent=persistent, protected=protected))


async def create_worktree_async(project_root: Path, *, base: str = "HEAD", name: str,
                                data_dir: Path | None = None, persistent: bool = False,
                                protected: ProtectedFiles | None = None) -> Worktree:
    """See `create_worktree`. `protected`: the project's protected files (by default as the defaults and its
    `.augerignore` say), which a worktree made from a snapshot does not get."""
    from auger.process import owned_temp_dir

    root = Path(os.path.realpath(project_root))
    if not root.is_dir():
        raise WorktreeError(f"cannot make a worktree of {root}: not a directory")
    data = Path(data_dir) if data_dir is not None else _data_dir()
    parent = data / WORKTREES
    parent.mkdir(parents=True, exist_ok=True)
    repo = await asyncio.to_thread(_project_repo, root)
    area = owned_temp_dir(KIND, parent, remove=lambda path: _discard(Path(path), data))
    try:
        tree = area / _label(root.name or "root")
        base_commit, head = await _checkout(root, repo, base, tree, data, protected)
        if persistent:  # out of reach of the dead-process cleanup, before anything is keyed by its path
            kept = parent / f"{KEPT_PREFIX}{_label(name)}-{area.name.rsplit('-', 1)[-1]}"
            area.rename(kept)
            area, tree = kept, kept / tree.name
        store = SnapshotStore(tree, snapshot_dir(data, tree))
        first = await store.snapshot(f"worktree base {base_commit}")
        worktree = Worktree(tree, base_commit, root, first.commit, data)
        meta = {**worktree._meta(), "name": name, "head": head}
        (area / _META).write_text(json.dumps(meta))
        return worktree
    except BaseException:
        _discard(area, data)
        raise


def open_worktree(path: Path, data_dir: Path | None = None) -> Worktree | None:
    """The worktree whose work tree is `path`, or None if `path` is not one of auger's worktrees."""
    data = Path(data_dir) if data_dir is not None else _data_dir()
    path = Path(os.path.realpath(path))
    area = path.parent
    if Path(os.path.realpath(area.parent)) != Path(os.path.realpath(data / WORKTREES)):
        return None
    try:
        meta = json.loads((area / _META).read_text())
        if meta["tree"] != path.name:
            return None
        return Worktree(path, str(meta["base"]), Path(meta["project"]), str(meta["base_snapshot"]), data)
    except (OSError, ValueError, KeyError, TypeError):
        return None


async def _checkout(root: Path, repo: _Repo | None, base: str, tree: Path,
                    data: Path, protected: ProtectedFiles | None = None) -> tuple[str, str | None]:
    """Make `tree` a repository borrowing the project's objects, its files those of `base`.
    Returns the base commit and the HEAD it is detached at (None: no commit yet)."""
    alternates: list[str] = []
    bits: dict[str, int] = {}
    if base == SNAPSHOT:
        project = SnapshotStore(root, snapshot_dir(data, root), protected=protected)
        try:
            snap = await project.snapshot("worktree base")
            _, bits = await project.modes(snap)
        except SnapshotError as exc:
            raise WorktreeError(f"cannot snapshot {root} for a worktree: {exc}") from None
        base_commit, files = snap.commit, snap.commit
        alternates.append(str(project.snapdir / "objects"))
        head = repo.head if repo is not None else snap.commit
    elif repo is None:
        raise WorktreeError(f"{root} is not the top directory of a git repository, so it has no commit {base!r} "
                            f"to start from; use base {SNAPSHOT!r} to start from its files as they are")
    else:
        base_commit = head = files = await asyncio.to_thread(repo.commit, base)
    if repo is not None:
        alternates.insert(0, repo.objects)
    await asyncio.to_thread(_populate, tree, alternates, files, head, repo, bits)
    return base_commit, head


def _populate(tree: Path, alternates: list[str], files: str, head: str | None, repo: _Repo | None,
              bits: dict[str, int]) -> None:
    """`git init` at `tree`, borrow the objects, check out `files` (a commit) and point HEAD at `head`."""
    tree.mkdir()
    _git(["init", "-q", "--template=", str(tree)], cwd=tree.parent)
    gitdir = tree / ".git"
    (gitdir / "objects" / "info" / "alternates").write_text("".join(a + "\n" for a in alternates))
    (gitdir / "info").mkdir(exist_ok=True)
    (gitdir / "info" / "attributes").write_bytes(_ATTRIBUTES)  # files are the stored bytes, no filters
    if repo is not None and repo.exclude is not None:
        (gitdir / "info" / "exclude").write_bytes(repo.exclude)  # the user's own ignores still apply
    env = {"GIT_DIR": str(gitdir), "GIT_WORK_TREE": str(tree)}
    _git(["read-tree", "-u", "--reset", files], cwd=tree, env=env)
    for rel, mode in bits.items():  # bits git does not keep (a private 0600 file), as the snapshot has them
        target = tree / rel
        if not target.is_symlink() and target.is_file():
            os.chmod(target, stat.S_IMODE(mode))
    if head is not None:
        if head != files:
            _git(["read-tree", "--reset", head], cwd=tree, env=env)  # the index is HEAD's: the rest shows as changes
        _git(["update-ref", "--no-deref", "HEAD", head], cwd=tree, env=env)
    else:
        _git(["read-tree", "--empty"], cwd=tree, env=env)


@dataclass(frozen=True)
class _Repo:
    """What a worktree needs of the project's git repository: where its objects are, its HEAD (None
    when it has no commit yet), its info/exclude."""

    toplevel: Path
    objects: str
    head: str | None
    exclude: bytes | None

    def commit(self, rev: str) -> str:
        """The commit `rev` names in the project's repository (read only)."""
        try:
            out = _git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"],
                       cwd=self.toplevel)
        except WorktreeError:
            out = ""
        if not re.fullmatch(r"[0-9a-f]{40,64}", out):
            raise WorktreeError(f"{rev!r} is not a commit of the repository at {self.toplevel}")
        return out


def _project_repo(root: Path) -> _Repo | None:
    """The git repository `root` is the top of, or None (not a repository, or only a subdirectory
    of one: a worktree of the whole repository would not be the project the session was given)."""
    try:
        top, common = _git(["rev-parse", "--show-toplevel", "--git-common-dir"], cwd=root).split("\n")
    except (WorktreeError, ValueError):
        return None
    if Path(os.path.realpath(top)) != root:
        return None
    common_dir = Path(os.path.realpath(root / common))
    try:
        head: str | None = _git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], cwd=root)
    except WorktreeError:
        head = None
    try:
        exclude: bytes | None = (common_dir / "info" / "exclude").read_bytes()
    except OSError:
        exclude = None
    return _Repo(root, str(common_dir / "objects"), head or None, exclude)


def _git(args: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    """git with no user or system configuration, hooks or fsmonitor (as snapshots run it); its stdout
    stripped, or WorktreeError with git's message."""
    clean = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "HOME": "/nonexistent",
             "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_TERMINAL_PROMPT": "0",
             "GIT_OPTIONAL_LOCKS": "0", **(env or {})}
    proc = subprocess.run([*_git_argv(), *args], cwd=cwd, env=clean, capture_output=True, check=False)
    if proc.returncode != 0:
        said = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise WorktreeError(f"git {args[0]} failed: {said[-1] if said else f'exit status {proc.returncode}'}")
    return proc.stdout.decode("utf-8", "surrogateescape").strip()


# --------------------------------------------------------------------------- applying


def _same(a: Entry | None, b: Entry | None) -> bool:
    """Whether two snapshot entries hold the same file (blob ids are content hashes, equal across
    repositories) — or are both absent."""
    return (a is None and b is None) or (a is not None and b is not None and (a.mode, a.oid) == (b.mode, b.oid))


def _bits(path: str, new: Entry | None, current: Entry | None, odd: dict[str, int]) -> int | None:
    """The permission bits to write `new` with: those the worktree recorded when unusual, the usual
    ones when the executable bit changes, else None (the project file's own, or the umask's)."""
    if new is None or new.mode == "120000":
        return None
    if path in odd:
        return odd[path]
    if current is not None and current.mode == new.mode:
        return None
    return DEFAULT_PERMS[1] if new.mode == "100755" else (DEFAULT_PERMS[0] if current is not None else None)


def _put(handle: RootHandle, path: str, new: Entry | None, contents: dict[str, bytes], bits: int | None) -> str | None:
    """Make `path` in the project what the worktree has (None: remove it); why not, or None."""
    try:
        refusal = git_write_refusal(handle, path)
        if refusal is not None:
            return refusal
        if new is None:
            remove_beneath(handle, path)
        elif new.mode == "120000":
            symlink_beneath(handle, path, os.fsdecode(contents[new.oid]))
        else:
            write_beneath(handle, path, contents[new.oid], bits)
    except (OSError, PathEscape) as exc:
        return getattr(exc, "strerror", None) or str(exc)
    return None


def _apply_message(root: Path, applied: list[str], conflicts: list[str], failed: list[str],
                   left_out: tuple[str, ...]) -> str:
    """One line; `left_out`: what the worktree's snapshot skipped (too large, a nested repository),
    so never applied."""
    parts = [f"applied {len(applied)} file(s) to {root}"]
    if conflicts:
        shown = ", ".join(conflicts[:10]) + (" …" if len(conflicts) > 10 else "")
        parts.append(f"{len(conflicts)} conflict(s) left untouched (changed in the project since the base): {shown}")
    if failed:
        parts.append(f"{len(failed)} could not be written: {'; '.join(failed[:5])}")
    parts.extend(f"not applied: {warning}" for warning in left_out[:5])
    return "; ".join(parts)


# --------------------------------------------------------------------------- housekeeping


def list_worktrees(data_dir: Path | None = None) -> list[Worktree]:
    """The worktrees under auger's data directory (this process's, live processes', kept ones)."""
    parent = (Path(data_dir) if data_dir is not None else _data_dir()) / WORKTREES
    found = []
    for meta in sorted(parent.glob(f"*/{_META}")):
        try:
            tree = meta.parent / json.loads(meta.read_text())["tree"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        worktree = open_worktree(tree, data_dir)
        if worktree is not None:
            found.append(worktree)
    return found


def describe(worktree: Worktree, files: list[FileChange]) -> str:
    """One paragraph for a person: where the worktree is, what it changed."""
    if not files:
        return f"the worktree {worktree.path} has no changes against {worktree.base_commit[:12]}"
    return (f"the worktree {worktree.path} changed {len(files)} file(s) against {worktree.base_commit[:12]}:\n"
            f"{summary(files)}")


def _discard(area: Path, data: Path) -> None:
    """Remove a worktree's directory and the snapshot repositories of the trees in it."""
    try:
        trees = [entry for entry in area.iterdir() if entry.is_dir() and not entry.is_symlink()]
    except OSError:
        trees = []
    for tree in trees:
        _rmtree(snapshot_dir(data, tree))
    _rmtree(area)


def _rmtree(path: Path) -> None:
    """Remove a tree even where the model made a directory read-only."""

    def retry(function: Any, name: str, _exc: Any) -> None:
        try:
            os.chmod(os.path.dirname(name), 0o700)
            function(name)
        except OSError:
            pass

    if path.is_symlink():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path, onerror=retry)


def _label(text: str) -> str:
    """A name (from the caller, the model or a directory) made safe as one path component."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip(".-")[:40] or "worktree"


def _data_dir() -> Path:
    from auger.config import home_dirs

    return home_dirs()["data"]


def _blocking(work: Coroutine[Any, Any, _T]) -> _T:
    """Run a coroutine to its end from plain code — on a thread of its own when this thread is
    already running an event loop (a coroutine calling the plain interface)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(work)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, work).result()
