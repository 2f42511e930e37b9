"""Snapshots of the project's working tree, kept as git objects in a repository of auger's own.

Why this way:

* Whatever changed the tree — a file tool, `sed -i`, a build, `git mv` — a snapshot sees it, because
  it records the tree itself, not the tool calls. A snapshot is a commit (tree + message) in a
  separate git directory whose work tree is the project (`GIT_DIR=<snapdir> GIT_WORK_TREE=<root>`)
  with its own index (`GIT_INDEX_FILE`). So it works in projects that are not git repositories and
  never touches the user's index, branches, stash, reflog or config; and it survives a killed
  process, being nothing but git objects named by a ref (so `git gc` keeps them).
* Git runs what its configuration names. The user's and the system's configuration are never read
  (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`, HOME pointing at an empty directory), hooks and
  fsmonitor are off, and the environment is built from nothing but PATH. The project's
  `.gitattributes` could ask for line-ending conversion or filters, which would make the stored bytes
  differ from the file's; the snapshot repository's own `info/attributes` switches them off.
* What is recorded: every file git would show as tracked or untracked in the project; the user's
  `.git` never. A file over `max_file_bytes`, and the new files of a directory holding more than
  `max_dir_files` of them (a generated tree), are skipped with a warning: a skipped path keeps
  whatever the previous snapshot held, so an undo never touches it.
* Ignored files (the project's `.gitignore` files and, in a git repository, its `info/exclude`)
  can hold what cannot be made again — a `.env`, a local config — so a turn's `rm .env` must be
  undoable. Git lists a directory whose contents are all ignored as one `dir/` entry without
  looking inside (node_modules/, .venv/, __pycache__/, build/: dependencies, caches and build
  output, often huge and rewritten all the time); such directories are never recorded nor walked.
  The ignored files it lists one by one are recorded, each up to `ignored_max_file_bytes`, and at
  most `ignored_max_files` / `ignored_max_bytes` of them new per snapshot. What is left out is
  written down in the commit message (directories by name, files with size and mtime), so a turn
  that removed or changed such a path is told apart, and undo says it cannot restore it.
* auger's own files are never part of the project's history, wherever they live: the snapshot
  repository, and what the caller names (`own`: the session database and the files SQLite keeps
  beside it, auger's data and config directories) when they lie inside the project. They are kept
  in the repository (`auger-own.json`), so every later user of it leaves them out too; an earlier
  snapshot that held one is never restored over it, nor shown in a diff.
* Protected files (secrets/protected.py: `.env`, keys, what `.augerignore` lists, and hard links to them) are
  never recorded either: a secret the agent may not read must not sit in auger's own store, where a diff, a
  worktree or an undo could bring it back. A path recorded before it was protected is dropped from the index
  at the next snapshot; an earlier snapshot that holds one is never restored over it nor deleted by undo, and
  diffs leave it out.
* Git records only whether a file is executable. The other permission bits (a private 0600 file,
  a read-only 0444 one) are kept in the commit message for the files whose bits are not the
  project's usual ones, so an undo never restores a private file readable by all.
* Speed: the index is kept between snapshots, so `git diff-files` finds what changed by stat alone,
  `ls-files -o` what is new, and only those paths are hashed (`update-index`); `write-tree` reuses
  the cached subtrees; the commit and its ref are written without git (git_objects.py). A snapshot
  that finds nothing changed since this store's last one (its index untouched since, the same
  permission bits and left-out paths) is that snapshot: no tree written, no commit made. A commit's
  message is remembered where this store made it, so its trailers are read without git. Each git
  process counts: a tool step takes one snapshot or two. After a snapshot by git, a small tree is described
  (tree_manifest.py), and the next snapshot, when every name in the tree is one that one saw, takes no git
  process at all; a snapshot by git after such a one first makes the index its tree (`_index_the_last`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import fcntl
import hashlib
import itertools
import json
import logging
import os
import stat
import subprocess
import time
from collections import Counter
from dataclasses import field
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterable, Iterator, Sequence

from auger.changes import git_objects, tree_manifest
from auger.lazy_dataclass import Deferred, dataclass
from auger.policy.fs import read_fd
from auger.secrets.protected import ProtectedFiles, default_protected

log = logging.getLogger("auger.changes")

DEFAULT_MAX_FILE_BYTES = 10 << 20
DEFAULT_MAX_DIR_FILES = 5000
IGNORED_MAX_FILE_BYTES = 1 << 20  # an ignored file larger than this (a log, a data set) is not recorded
IGNORED_MAX_FILES = 1000  # ignored files one snapshot records anew, at most
IGNORED_MAX_BYTES = 16 << 20  # and their bytes, at most
UNRECORDED_LISTED = 500  # ignored paths left out that a commit message names, at most
DEFAULT_PERMS = (0o644, 0o755)
BULK_FILES = 2000  # from this many files to hash, their blobs are first packed by fast-import
REF_PREFIX = "refs/auger/snapshots/"
_KEPT = "auger-modes.json"
_OWN = "auger-own.json"  # auger's own paths inside the project, relative to it
_CLEARED = "auger-cleared"  # the digest of the protection rules the index was last cleared by (_rules_digest)
_MODES_TRAILER = "auger-modes: "  # a commit message line: {"perms": [plain, exec], "files": {path: bits}}
_UNRECORDED_TRAILER = "auger-unrecorded: "  # {"dir/": ["dir"], "file": ["size" | "budget", bytes, mtime_ns]}
REUSE_WINDOW = 600.0  # seconds a snapshot may stand for a later one of the same tree (`auger gc` spares
# unreferenced snapshots for an hour)
_LOCK_POLL = 0.02  # seconds between tries for the repository lock
_LOCK_WAIT = 30.0  # then give up: a snapshot of even a huge tree takes less
# `-c` settings that keep git from running anything a repository's configuration names
GIT_HOOKS_OFF = ("core.hooksPath=/dev/null", "core.fsmonitor=false", "core.untrackedCache=false")
_CONFIG = (
    *GIT_HOOKS_OFF, "core.bare=false", "core.autocrlf=false",
    "core.safecrlf=false", "core.filemode=true", "core.symlinks=true", "core.quotePath=false",
    "core.ignoreCase=false", "core.precomposeUnicode=false",
    "gc.auto=0", "color.ui=false", "diff.renames=true",
    # a large index is rewritten whole by every command that changes it; v4 is smaller to write,
    # and a split index writes only the entries that changed
    "index.version=4", "core.splitIndex=true",
)
# Stored bytes are the file's bytes: no end-of-line conversion, no clean/smudge filter, no $Id$.
_ATTRIBUTES = b"* -text -eol -filter -ident -working-tree-encoding\n"


class SnapshotError(Exception):
    """A snapshot repository that git could not read or write; the message says what git said."""


@dataclass(frozen=True)
class Snapshot(Deferred):
    """One recorded state of the tree: its commit and tree ids, and what was left out and why."""

    commit: str
    tree: str
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Entry(Deferred):
    """A file in a snapshot: git mode ('100644', '100755', '120000'), blob id, path."""

    mode: str
    oid: str
    path: str


def scrubbed_git_env(home: Path) -> dict[str, str]:
    """An environment for git built from nothing but PATH: no user or system configuration (HOME is
    `home`, an empty directory), no prompts, and no optional index writes (`git status` and `git diff`
    leave the index file alone). With `GIT_HOOKS_OFF` on the command line, no hook or fsmonitor runs."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home),
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_OPTIONAL_LOCKS": "0",
    }


def snapshot_dir(data_dir: Path, root: Path) -> Path:
    """Where the snapshots of the project at `root` live under auger's data directory: one
    repository per resolved project root, named so a person can tell which is which."""
    real = Path(os.path.realpath(root))
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:16]
    return Path(data_dir) / "snapshots" / f"{real.name or 'root'}-{digest}"


class SnapshotStore:
    """The snapshot repository of one project. Snapshots are taken one at a time (they share an index)."""

    def __init__(self, root: Path, snapdir: Path, *, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
                 max_dir_files: int = DEFAULT_MAX_DIR_FILES, perms: tuple[int, int] = DEFAULT_PERMS,
                 own: Iterable[Path] = (), ignored_max_file_bytes: int = IGNORED_MAX_FILE_BYTES,
                 ignored_max_files: int = IGNORED_MAX_FILES, ignored_max_bytes: int = IGNORED_MAX_BYTES,
                 protected: ProtectedFiles | None = None) -> None:
        """`perms`: the usual permission bits of a plain and an executable file in this project (what
        the user's umask gives, e.g. (0o640, 0o750) under umask 027); only files with other bits
        have them written down in each snapshot. `own`: auger's own files and directories, left out
        of every snapshot when they lie inside the project. `protected`: the project's protected files (by
        default, as the defaults and its `.augerignore` say), never recorded."""
        self.root = Path(os.path.realpath(root))
        self.protected = protected if protected is not None else default_protected(self.root)
        self.perms = perms
        self.bulk_files = BULK_FILES
        self.describes = True  # whether a snapshot by git describes a small tree for the next (tree_manifest.py)
        self.snapdir = Path(snapdir)
        self.max_file_bytes = max_file_bytes
        self.max_dir_files = max_dir_files
        self.ignored_max_file_bytes = ignored_max_file_bytes
        self.ignored_max_files = ignored_max_files
        self.ignored_max_bytes = ignored_max_bytes
        self._given_own = (*own, self.snapdir)
        self._own: tuple[str, ...] | None = None  # relative to the root; read from auger-own.json when needed
        self._lock = asyncio.Lock()
        self._ready = False
        self._plain: bool | None = None  # whether commits and refs can be written without git (asked once)
        self._last: _Made | None = None  # the last snapshot this store made, while it may stand for the next
        self._messages: dict[str, str] = {}  # commit -> message, of the commits this store made (the latest)
        self._env = {
            **scrubbed_git_env(self.snapdir / "home"),
            "GIT_DIR": str(self.snapdir),
            "GIT_WORK_TREE": str(self.root),
            "GIT_INDEX_FILE": str(self.snapdir / "auger-index"),
            "GIT_AUTHOR_NAME": "auger", "GIT_AUTHOR_EMAIL": "auger@localhost",
            "GIT_COMMITTER_NAME": "auger", "GIT_COMMITTER_EMAIL": "auger@localhost",
        }

    @property
    def indexed(self) -> bool:
        """Whether an index of the tree is kept already (a snapshot was taken here before): the next
        snapshot hashes only what changed since."""
        return (self.snapdir / "auger-index").exists()

    # ------------------------------------------------------------------ git

    async def git(self, *args: str, stdin: bytes | None = None, ok: tuple[int, ...] = (0,)) -> bytes:
        """Run git on the snapshot repository; its stdout, or SnapshotError with git's message (an
        exit status outside `ok`)."""
        proc = await asyncio.create_subprocess_exec(
            *_git_argv(), *args, cwd=self.root, env=self._env, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate(stdin)
        if proc.returncode not in ok:
            lines = err.decode("utf-8", "replace").strip().splitlines()
            said = next((x for x in lines if x.startswith(("fatal:", "error:"))), lines[-1] if lines else "")
            raise SnapshotError(f"git {args[0]} failed: {said or f'exit status {proc.returncode}'}")
        return out

    async def _ensure(self) -> None:
        """Create the snapshot repository on first use (no templates: no sample hooks)."""
        if self._ready:
            return
        if not (self.snapdir / "HEAD").exists():
            proc = await asyncio.create_subprocess_exec(
                "git", "init", "--bare", "-q", "--template=", str(self.snapdir),
                env={k: v for k, v in self._env.items() if k not in ("GIT_DIR", "GIT_WORK_TREE")},
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
            _, err = await proc.communicate()
            if proc.returncode != 0:
                raise SnapshotError(f"cannot create the snapshot repository {self.snapdir}: "
                                    f"{err.decode('utf-8', 'replace').strip()}")
        (self.snapdir / "home").mkdir(exist_ok=True)
        info = self.snapdir / "info"
        info.mkdir(exist_ok=True)
        if _read(info / "attributes") != _ATTRIBUTES:
            (info / "attributes").write_bytes(_ATTRIBUTES)
        self._ready = True

    def _sync_excludes(self) -> list[str]:
        """Make the snapshot repository's info/exclude the project's own (if it is a git repository),
        plus auger's own paths inside the project. Returns the own paths this repository did not
        know yet: earlier snapshots may hold them, and the index must drop them."""
        new = self._sync_own()
        gitdir = _project_git_dir(self.root)
        wanted = (_read(gitdir / "info" / "exclude") or b"") if gitdir else b""
        for rel in self.own:
            wanted += b"\n/" + os.fsencode(_literal_pattern(rel))
        path = self.snapdir / "info" / "exclude"
        if _read(path) != wanted:
            path.write_bytes(wanted)
        return new

    @property
    def own(self) -> tuple[str, ...]:
        """auger's own paths inside the project (relative to it): never recorded, restored or diffed."""
        if self._own is None:
            self._own = tuple(sorted(set(self._remembered_own()) | self._given_own_inside()))
        return self._own

    def is_own(self, path: str) -> bool:
        return any(path == rel or path.startswith(rel + "/") for rel in self.own)

    def _given_own_inside(self) -> set[str]:
        inside = set()
        for path in self._given_own:
            real = Path(os.path.realpath(path))
            if self.root in real.parents:
                inside.add(real.relative_to(self.root).as_posix())
        return inside

    def _remembered_own(self) -> list[str]:
        try:
            listed = json.loads((self.snapdir / _OWN).read_text())
        except (OSError, ValueError):
            return []
        return [p for p in listed if isinstance(p, str)] if isinstance(listed, list) else []

    def _sync_own(self) -> list[str]:
        """Remember this caller's own paths in the repository; the ones it did not know yet."""
        remembered = set(self._remembered_own())
        given = self._given_own_inside()
        self._own = tuple(sorted(remembered | given))
        new = sorted(given - remembered)
        if new:
            _write_atomically(self.snapdir / _OWN, json.dumps(list(self._own)).encode())
        return new

    async def protects(self) -> Callable[[str], bool]:
        """Whether a path (relative to the root) is protected, as things stand now: by its name, or as a hard link
        to (or a renamed) protected file the project's scan found."""
        found = set((await asyncio.to_thread(self.protected.look_again)).paths)  # (its rules read again first)
        why = self.protected.why
        return lambda path: path in found or why(path, refresh=False) is not None

    def own_pathspec(self) -> list[str]:
        """Arguments that keep a git diff away from auger's own paths (none when there are none)."""
        if not self.own:
            return []
        return ["--", ".", *(f":(exclude,literal){rel}" for rel in self.own)]

    # ------------------------------------------------------------------ snapshots

    @contextlib.asynccontextmanager
    async def _exclusive(self) -> AsyncIterator[None]:
        """Hold the snapshot repository alone: within this process (an asyncio lock) and across
        processes (flock, which the kernel releases when a holder dies). Holding it, the repository
        is created if it is not there yet (sessions opened together would otherwise run `git init` in
        one directory at once), and an index lock file left by a killed git is stale, and is removed."""
        async with self._lock:
            self.snapdir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.snapdir / "auger.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                for attempt in itertools.count():
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if attempt * _LOCK_POLL >= _LOCK_WAIT:
                            raise SnapshotError(f"the snapshot repository {self.snapdir} is busy "
                                                f"(another auger has held it for {_LOCK_WAIT:.0f} s)") from None
                        await asyncio.sleep(_LOCK_POLL)
                await self._ensure()
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.snapdir / "auger-index.lock")
                yield
            finally:
                os.close(fd)

    async def snapshot(self, message: str = "auger snapshot") -> Snapshot:
        """Record the working tree now, as a commit referenced under refs/auger/snapshots/."""
        async with self._exclusive():
            return await self._snapshot_held(message)

    async def first_snapshot(self, message: str) -> None:
        """A first snapshot, unless one was taken here already: asked again once the repository is held,
        so sessions of one project opened together take one first snapshot, not one each."""
        async with self._exclusive():
            if not self.indexed:
                await self._snapshot_held(message)

    async def _snapshot_held(self, message: str) -> Snapshot:
        """`snapshot`, with the repository held: from what the last snapshot saw when every name in the tree is
        one it saw (tree_manifest.py), else by git, which then describes the tree for the next one."""
        new_own = self._sync_excludes()
        key = self._manifest_key()
        manifest = tree_manifest.read(self.snapdir)
        known = manifest if manifest is not None and manifest.key == key else None
        if known is not None and not new_own and self.plain and self.describes:
            made = await self._snapshot_known(message, known)
            if made is not None:
                return made
        await self._index_the_last(manifest)
        tree_manifest.forget(self.snapdir)
        snap, described = await self._snapshot_by_git(message, new_own)
        if described is not None and self.describes:
            with contextlib.suppress(OSError, SnapshotError):
                await self._describe(snap, key, *described, earlier=known)
        return snap

    async def _snapshot_by_git(self, message: str, new_own: list[str]) -> tuple[Snapshot, tuple | None]:
        """The snapshot as git lists and hashes the tree; with what `_describe` needs when the tree may be
        described for the next snapshot (None: it may not, as something was left out with a warning)."""
        kept = self._load_kept()
        if kept is None:  # bits written down against other usual bits, or lost: look at every
            with contextlib.suppress(FileNotFoundError):  # file again, once
                os.unlink(self.snapdir / "auger-index")
            kept = _Kept({}, [])
        started = int(time.time())
        protects = await self.protects()
        rules = _rules_digest(self.protected)
        cleared = _read(self.snapdir / _CLEARED) == rules
        index_paths: bytes | None = None  # every path the index holds, when known to be needed (below)
        if self.indexed and not cleared:  # read beside the listing, which reads the same index
            (changed, new, ignored), index_paths = await asyncio.gather(
                self._listing(), self.git("ls-files", "-z", "-c"))
        else:
            changed, new, ignored = await self._listing()
        recorded, unrecorded = self._ignored([p for p in ignored if not protects(p.rstrip("/"))])
        pick = self._select({p for p in changed | set(kept.recheck) if not protects(p)},
                            [p for p in new if not protects(p.rstrip("/"))], recorded)
        if new_own:  # auger's own files that an earlier snapshot recorded: out of the index
            held = await self.git("ls-files", "-z", "-c", "--", *(f":(literal){rel}" for rel in new_own))
            pick.odd += [os.fsdecode(p) for p in held.split(b"\0") if p]
        if index_paths is not None or any(map(protects, changed)):
            # protected files an earlier snapshot (or an earlier rule set) recorded: out of the index
            held = index_paths if index_paths is not None else await self.git("ls-files", "-z", "-c")
            pick.odd += [path for path in (os.fsdecode(p) for p in held.split(b"\0") if p) if protects(path)]
        for path in pick.gone + pick.odd + pick.present:
            kept.files.pop(path, None)
        kept.files.update({p: m for p, m in pick.perms.items() if m not in self.perms})
        # A chmod in the same second as the ctime the index records is invisible to git (it
        # keeps whole seconds): such files are looked at again next time.
        kept.recheck = [p for p, ctime in pick.ctimes.items() if ctime >= started]
        self._save_kept(kept)  # before the index: a kill in between only means another look
        if pick.odd:  # paths now beyond a symlink or turned into directories: git would refuse them
            await self.git("update-index", "-z", "--force-remove", "--stdin", stdin=_nul(pick.odd))
        if len(pick.present) >= self.bulk_files:
            await asyncio.to_thread(self._pack_blobs, pick.present)
        if pick.present or pick.gone:  # one pass over the index: it is rewritten whole each time
            await self.git("update-index", "-z", "--add", "--remove", "--replace", "--stdin",
                           stdin=_nul(pick.present + pick.gone))
        if not cleared:  # the index now holds nothing these rules protect
            _write_atomically(self.snapdir / _CLEARED, rules)
        bits = json.dumps({"perms": list(self.perms), "files": kept.files}, sort_keys=True)
        trailers = f"{_MODES_TRAILER}{bits}\n"
        if unrecorded:
            listed = dict(sorted(unrecorded.items())[:UNRECORDED_LISTED])
            trailers += f"{_UNRECORDED_TRAILER}{json.dumps(listed, sort_keys=True)}\n"
        described = None if pick.warnings or any(why[0] == "budget" for why in unrecorded.values()) \
            or len(unrecorded) > UNRECORDED_LISTED else (dict(kept.files), unrecorded, trailers.partition("\n")[2],
                                                          protects)
        last = self._last
        if last is not None and (last.trailers != trailers or time.monotonic() - last.at > REUSE_WINDOW):
            last = None
        if last is not None and not (pick.odd or pick.present or pick.gone) and \
                last.index == _stamp(self.snapdir / "auger-index"):
            return Snapshot(last.commit, last.tree, tuple(pick.warnings)), described  # nothing changed since
        tree = (await self.git("write-tree")).decode().strip()  # (it may write the index: stamped after)
        if last is not None and last.tree == tree:  # files looked at again, found as they were
            self._last = dataclasses.replace(last, index=_stamp(self.snapdir / "auger-index"))
            return Snapshot(last.commit, tree, tuple(pick.warnings)), described
        commit = await self._made(message, tree, trailers, _stamp(self.snapdir / "auger-index"))
        return Snapshot(commit, tree, tuple(pick.warnings)), described

    async def _made(self, message: str, tree: str, trailers: str, index: tuple[int, int, int] | None) -> str:
        """Store the commit of a new snapshot, and remember it (`index`: the index file's stamp it was written
        from, None when it was not)."""
        text = f"{message or 'auger snapshot'}\n\n{trailers}"
        commit = await self._commit(tree, text)
        self._last = _Made(commit, tree, trailers, index, time.monotonic())
        self._messages[commit] = text
        while len(self._messages) > 64:
            del self._messages[next(iter(self._messages))]
        return commit

    # ------------------------------------------------------------------ the tree as the last snapshot saw it

    @property
    def plain(self) -> bool:
        """Whether objects and refs may be written here without git (git_objects.plain), asked once."""
        if self._plain is None:
            self._plain = git_objects.plain(self.snapdir)
        return self._plain

    def _manifest_key(self) -> str:
        """What a manifest must have been made under to describe what a snapshot now would hold: the limits,
        the usual bits, auger's own paths, the protection rules and the exclude file."""
        exclude = _read(self.snapdir / "info" / "exclude") or b""
        return json.dumps([1, str(self.root), list(self.perms), self.max_file_bytes, list(self.own),
                           _rules_digest(self.protected).decode(), hashlib.sha1(exclude).hexdigest()])

    async def _index_the_last(self, manifest: tree_manifest.Manifest | None) -> None:
        """Make the snapshot index the last snapshot's when that one was taken from the manifest, with its
        permission bits: git then starts from the last snapshot, as it does after one of its own (a file it
        skips keeps what that one held). `read-tree --reset` keeps the stat data of the entries that are the same."""
        last = tree_manifest.unindexed(manifest)
        if last is None:
            return
        tree, kept, files = last
        try:
            await self.git("read-tree", "--reset", tree)
        except SnapshotError:
            with contextlib.suppress(FileNotFoundError):  # every file is looked at again
                os.unlink(self.snapdir / "auger-index")
        was = self._load_kept()
        self._save_kept(_Kept(kept, [p for p in (was.recheck if was is not None else []) if p in files]))

    async def _snapshot_known(self, message: str, known: tree_manifest.Manifest) -> Snapshot | None:
        """The snapshot from the manifest the last one left, when the tree has no name that one did not see
        (tree_manifest.py); None when git must take it. Nothing but the files whose stat data moved is read."""
        if known.packs != tree_manifest.packs_stamp(self.snapdir):
            return None
        try:
            with tree_manifest.Dirs(self.root) as opened:
                return await self._snapshot_from(message, known, opened)
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:  # a damaged manifest
            log.debug("the tree manifest could not be used (%s): git takes the snapshot", exc)
            return None

    async def _snapshot_from(self, message: str, known: tree_manifest.Manifest,
                             opened: tree_manifest.Dirs) -> Snapshot | None:
        """`_snapshot_known` with the manifest read and the tree's directories at hand."""
        looked = tree_manifest.look(opened, known, self.is_own)
        if looked is None:
            return None
        changed, gone, gone_dirs = looked
        since = tree_manifest.now_racy()
        files, kept = dict(known.files), dict(known.kept)
        touched = set(gone)
        for path in gone:
            del files[path]
            kept.pop(path, None)
        protects: Callable[[str], bool] | None = None
        for path, st in changed.items():
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)) or \
                    (stat.S_ISREG(st.st_mode) and st.st_size > self.max_file_bytes):
                return None  # git skips it with a warning
            if protects is None:
                protects = await self.protects()
            if protects(path):
                return None
            data = opened.read(path, st, self.max_file_bytes)
            if data is None:
                return None  # changed while read: git looks
            mode, oid = tree_manifest.git_mode(st), tree_manifest.blob_id(data)
            if files[path][:2] != [mode, oid]:
                if os.path.basename(path) in tree_manifest.RULE_FILES:
                    return None  # what is ignored or protected may have changed: git's to judge
                git_objects.write_object(self.snapdir, "blob", data, oid)
                touched.add(path)
            files[path] = [mode, oid, *tree_manifest.stat_of(st)]
            kept.pop(path, None)
            if stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) not in self.perms:
                kept[path] = stat.S_IMODE(st.st_mode)
        try:
            trees = tree_manifest.write_trees(self.snapdir, files, known.trees, touched) if touched else known.trees
        except KeyError:
            return None
        bits = json.dumps({"perms": list(self.perms), "files": kept}, sort_keys=True)
        trailers = f"{_MODES_TRAILER}{bits}\n{known.unrecorded}"
        tree = trees[""]
        last = self._last
        if last is not None and last.tree == tree and last.trailers == trailers and \
                time.monotonic() - last.at <= REUSE_WINDOW:
            commit = last.commit
        else:
            commit = await self._made(message, tree, trailers, None)
        away = gone | gone_dirs
        dirs = {d: [n for n in names if (f"{d}/{n}" if d else n) not in away]
                for d, names in known.dirs.items() if not (d in gone_dirs or tree_manifest.below(d, gone_dirs))}
        tree_manifest.save(self.snapdir, dataclasses.replace(known, since=since, tree=tree, kept=kept, files=files,
                                                             trees=trees, dirs=dirs, indexed=False))
        return Snapshot(commit, tree)

    async def _describe(self, snap: Snapshot, key: str, kept: dict[str, int], unrecorded: dict[str, list],
                        unrecorded_line: str, protects: Callable[[str], bool], *,
                        earlier: tree_manifest.Manifest | None) -> None:
        """After a snapshot by git, keep what it saw for the next one (tree_manifest.py), when the tree is small
        enough to walk and every name in it is accounted for. Each recorded file is hashed here, unless the
        `earlier` manifest had it with the same stat data: its stat data is kept only for the content git
        recorded."""
        if not self.plain or _index_bytes(self.snapdir) > tree_manifest.MAX_INDEX_BYTES:
            return
        since = tree_manifest.now_racy()
        listed = await self.git("ls-tree", "-r", "-t", "-z", "--full-tree", snap.tree)
        files: dict[str, list] = {}
        trees = {"": snap.tree}
        for mode, kind, oid, path in _tree_records(listed):
            if kind == "tree":
                trees[path] = oid
            elif kind == "blob" and mode in ("100644", "100755", "120000"):
                files[path] = [mode, oid]
            else:
                return  # a submodule's commit: git's to look at
        collapsed = [p[:-1] for p in unrecorded if p.endswith("/")]
        never = await self.ignored(collapsed)
        if earlier is not None and not (isinstance(earlier.files, dict) and isinstance(earlier.since, int)):
            earlier = None  # damaged: every file is hashed

        def walk() -> tree_manifest.Manifest | None:
            with tree_manifest.Dirs(self.root) as opened:
                return walked(opened)

        def walked(opened: tree_manifest.Dirs) -> tree_manifest.Manifest | None:
            surveyed = tree_manifest.survey(
                opened, files, never_entered=never, all_ignored=set(collapsed) - never,
                left_out={p: why for p, why in unrecorded.items() if not p.endswith("/")}, own=self.is_own,
                protected=protects)
            if surveyed is None:
                return None
            dirs, seen, watch, witness = surveyed
            if sum(st.st_size for st in seen.values()) > tree_manifest.MAX_HASHED:
                return None
            for path, st in seen.items():
                mode, oid = files[path]
                now = tree_manifest.stat_of(st)
                was = earlier.files.get(path) if earlier is not None else None
                if not (earlier is not None and isinstance(was, list) and was[:2] == [mode, oid] and was[2:] == now
                        and max(st.st_mtime_ns, st.st_ctime_ns) < earlier.since):
                    data = opened.read(path, st, self.max_file_bytes)
                    if data is None or tree_manifest.blob_id(data) != oid or tree_manifest.git_mode(st) != mode:
                        now = [0, 0, 0, 0, 0]  # not what git recorded (changed since): hashed again next time
                files[path] = [mode, oid, *now]
            return tree_manifest.Manifest(key, since, snap.tree, unrecorded_line, kept, files, trees, dirs, watch,
                                          packs=tree_manifest.packs_stamp(self.snapdir), witness=witness)

        made = await asyncio.to_thread(walk)
        if made is not None:
            tree_manifest.save(self.snapdir, made)

    async def _commit(self, tree: str, text: str) -> str:
        """Store a commit of `tree` and the ref that keeps it: written directly (git_objects: two git
        processes fewer on a tool step's path) in a repository as `git init` made it, else by git."""
        if self.plain and len(tree) == 40:
            commit = git_objects.write_object(self.snapdir, "commit", git_objects.commit_body(
                tree, text, self._env["GIT_COMMITTER_NAME"], self._env["GIT_COMMITTER_EMAIL"]))
            git_objects.write_ref(self.snapdir, REF_PREFIX + commit, commit)
            return commit
        commit = (await self.git("commit-tree", tree, "-F", "-", stdin=text.encode())).decode().strip()
        await self.git("update-ref", REF_PREFIX + commit, commit)
        return commit

    def _load_kept(self) -> _Kept | None:
        """The permission bits kept beside the index, or None when they cannot be trusted (written
        against other usual bits, or missing while an index exists)."""
        try:
            kept = json.loads((self.snapdir / _KEPT).read_text())
            if tuple(kept["perms"]) != self.perms:
                return None
            return _Kept(dict(kept["files"]), list(kept["recheck"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None if (self.snapdir / "auger-index").exists() else _Kept({}, [])

    def _save_kept(self, kept: _Kept) -> None:
        """Write the kept bits down, unless the file holds them already (most snapshots change none: a read
        costs less than a write and a rename)."""
        data = json.dumps({"perms": list(self.perms), "files": kept.files, "recheck": kept.recheck}).encode()
        if _read(self.snapdir / _KEPT) != data:
            _write_atomically(self.snapdir / _KEPT, data)

    async def modes(self, snapshot: Snapshot | str) -> tuple[tuple[int, int], dict[str, int]]:
        """The permission bits of a snapshot's regular files: the usual (plain, executable) pair,
        and the files that had other bits."""
        kept = await self._trailer(snapshot, _MODES_TRAILER)
        if kept is None:
            return DEFAULT_PERMS, {}
        return (kept["perms"][0], kept["perms"][1]), {p: int(m) for p, m in kept["files"].items()}

    async def unrecorded(self, snapshot: Snapshot | str) -> dict[str, list]:
        """The ignored paths a snapshot left out: `dir/` -> ["dir"], a file -> [why ("size": over
        ignored_max_file_bytes, "budget": over the per-snapshot limits), bytes, mtime in ns]."""
        return await self._trailer(snapshot, _UNRECORDED_TRAILER) or {}

    async def _trailer(self, snapshot: Snapshot | str, prefix: str) -> Any:
        """The JSON of a snapshot's commit message line starting with `prefix`, or None."""
        body = self._messages.get(_commit(snapshot))
        if body is None:
            body = (await self.git("cat-file", "commit", _commit(snapshot))).decode("utf-8", "surrogateescape")
        for line in reversed(body.splitlines()):
            if line.startswith(prefix):
                return json.loads(line[len(prefix):])
        return None

    async def ignored(self, paths: list[str]) -> set[str]:
        """Which of `paths` the project's ignore rules match (whether recorded or not)."""
        if not paths:
            return set()
        out = await self.git("check-ignore", "-z", "--stdin", "--no-index", stdin=_nul(paths), ok=(0, 1))
        return {os.fsdecode(p) for p in out.split(b"\0") if p}

    def _pack_blobs(self, paths: list[str]) -> None:
        """Store the blobs of many files in one pack (`git fast-import`), so the `update-index`
        that follows finds them stored and writes no loose object per file: creating tens of
        thousands of small object files is what makes a first snapshot slow. Runs in a thread.

        A file is opened without following links and without blocking (a FIFO swapped in must not
        hang us); one that vanished or changed kind is left to `update-index` to judge."""
        proc = subprocess.Popen([*_git_argv(), "fast-import", "--quiet", "--done"], cwd=self.root, env=self._env,
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert proc.stdin is not None
        try:
            for path in paths:
                data = _read_entry(self.root / path, self.max_file_bytes)
                if data is not None:
                    proc.stdin.write(b"blob\ndata %d\n" % len(data))
                    proc.stdin.write(data)
                    proc.stdin.write(b"\n")
            proc.stdin.write(b"done\n")
            proc.stdin.close()
        except BrokenPipeError:
            pass  # fast-import gave up: update-index then writes the objects itself, only slower
        proc.wait()

    async def touched(self) -> list[str]:
        """The paths that may have changed since the last snapshot, cheaply (two listings against the index,
        no hashing): those whose stat data differs from what the index recorded, and the new ones that are
        not ignored. More than what changed (a file touched but unchanged is listed), never less."""
        dirty, fresh = await asyncio.gather(
            self.git("diff-files", "-z", "--name-only", "--no-renames", "--ignore-submodules=all"),
            self.git("ls-files", "-z", "-o", "--exclude-standard"))
        return sorted({os.fsdecode(p) for p in dirty.split(b"\0") + fresh.split(b"\0") if p})

    async def _listing(self) -> tuple[set[str], list[str], list[str]]:
        """(recorded paths whose stat data changed, new paths, new ignored paths: a directory whose
        contents are all ignored as one `dir/`). `diff-files` is the plumbing that reports a changed
        ctime without looking at the content, so a bare chmod 600 is seen too."""
        dirty, fresh, ignored = await asyncio.gather(  # all only read the index: run side by side
            self.git("diff-files", "-z", "--name-only", "--no-renames", "--ignore-submodules=all"),
            self.git("ls-files", "-z", "-o", "--exclude-standard"),
            self.git("ls-files", "-z", "-o", "-i", "--exclude-standard", "--directory", "--no-empty-directory"))
        return ({os.fsdecode(p) for p in dirty.split(b"\0") if p},
                [os.fsdecode(p) for p in fresh.split(b"\0") if p],
                [os.fsdecode(p) for p in ignored.split(b"\0") if p])

    def _ignored(self, listed: list[str]) -> tuple[list[str], dict[str, list]]:
        """The new ignored files to record, and the ignored paths left out with what a later look
        needs to tell a change (see the module docstring)."""
        dirs = {p for p in listed if p.endswith("/")}
        record: list[str] = []
        unrecorded: dict[str, list] = {}
        total = 0
        for path in sorted(listed):
            if self.is_own(path.rstrip("/")) or _below_any(path, dirs):
                continue  # auger's own, or inside a directory listed whole (git lists some of both)
            if path.endswith("/"):
                unrecorded[path] = ["dir"]
                continue
            try:
                st = os.lstat(self.root / path)
            except OSError:
                continue
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                continue
            if st.st_size > self.ignored_max_file_bytes:
                unrecorded[path] = ["size", st.st_size, st.st_mtime_ns]
            elif len(record) >= self.ignored_max_files or total + st.st_size > self.ignored_max_bytes:
                unrecorded[path] = ["budget", st.st_size, st.st_mtime_ns]
            else:
                record.append(path)
                total += st.st_size
        return record, unrecorded

    def _select(self, changed: set[str], new: list[str], ignored: Sequence[str] = ()) -> _Selection:
        """What to drop from the index and what to hash (`ignored`: the new ignored files chosen to
        be recorded), with warnings for what is left out."""
        pick = _Selection()
        pick.warnings = [f"skipped {p}: it is a separate git repository" for p in new if p.endswith("/")]
        untracked = [p for p in new if not p.endswith("/")]
        per_dir = Counter(os.path.dirname(p) for p in untracked)
        crowded = {d for d, n in per_dir.items() if n > self.max_dir_files}
        for d in sorted(crowded):
            pick.warnings.append(f"skipped {per_dir[d]} new files in {d or '.'}/: more than {self.max_dir_files} "
                                 "new files in one directory (raise the limit to include them)")
        candidates = (sorted(p for p in changed if not self.is_own(p))
                      + [p for p in untracked if os.path.dirname(p) not in crowded and not self.is_own(p)]
                      + list(ignored))
        real_dirs: dict[str, bool] = {"": True}
        for path in candidates:
            if not self._real_dir(os.path.dirname(path), real_dirs):
                pick.odd.append(path)  # its directory is now a symlink (listed on its own) or gone
                continue
            try:
                st = os.lstat(self.root / path)
            except (FileNotFoundError, NotADirectoryError):
                pick.gone.append(path)
                continue
            if stat.S_ISDIR(st.st_mode):
                pick.odd.append(path)  # a file that became a directory: its files are listed on their own
            elif stat.S_ISREG(st.st_mode) and st.st_size > self.max_file_bytes:
                pick.warnings.append(f"skipped {path}: {st.st_size >> 20} MB is over the "
                                     f"{self.max_file_bytes >> 20} MB snapshot limit")
            elif stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                pick.present.append(path)
                pick.ctimes[path] = int(st.st_ctime)
                if stat.S_ISREG(st.st_mode):
                    pick.perms[path] = stat.S_IMODE(st.st_mode)
            else:
                pick.warnings.append(f"skipped {path}: not a regular file or symlink")
        return pick

    def _real_dir(self, rel: str, seen: dict[str, bool]) -> bool:
        """Whether `rel` is a directory reached without a symlink (git stores nothing beyond one)."""
        if rel not in seen:
            try:
                ok = stat.S_ISDIR(os.lstat(self.root / rel).st_mode)
            except OSError:
                ok = False
            seen[rel] = ok and self._real_dir(os.path.dirname(rel), seen)
        return seen[rel]

    async def entries(self, snapshot: Snapshot | str) -> dict[str, Entry]:
        """Every file of a snapshot, by path."""
        out = await self.git("ls-tree", "-r", "-z", "--full-tree", _commit(snapshot))
        return {path: Entry(mode, oid, path) for mode, kind, oid, path in _tree_records(out) if kind == "blob"}

    async def blobs(self, oids: list[str]) -> dict[str, bytes]:
        """The contents of blobs by id, read in one `cat-file --batch`."""
        if not oids:
            return {}
        unique = list(dict.fromkeys(oids))
        out = await self.git("cat-file", "--batch", stdin="".join(f"{o}\n" for o in unique).encode())
        found: dict[str, bytes] = {}
        pos = 0
        for oid in unique:
            end = out.index(b"\n", pos)
            header = out[pos:end].decode().split(" ")
            if len(header) != 3:
                raise SnapshotError(f"blob {oid} is missing from the snapshot repository")
            size = int(header[2])
            found[oid] = out[end + 1:end + 1 + size]
            pos = end + 1 + size + 1
        return found

    async def drop(self, snapshot: Snapshot | str) -> None:
        """Forget a snapshot (its objects go at the next `git gc` unless another snapshot shares them)."""
        commit = _commit(snapshot)
        tree_manifest.forget(self.snapdir)  # it may name objects only this snapshot kept
        await self.git("update-ref", "-d", REF_PREFIX + commit, commit)

    async def compact(self) -> None:
        """Pack the snapshot repository's loose objects (git never does it on its own here: gc.auto
        is off so that no git command starts a background gc while a snapshot is being taken)."""
        async with self._exclusive():
            tree_manifest.forget(self.snapdir)
            await self.git("gc", "--quiet")

    async def prune(self, keep: set[str], drop: set[str], older_than: float) -> PruneResult:
        """Forget the snapshots in `drop` and those in neither set whose commit is older than
        `older_than` (a Unix time); `keep` wins. Then `git gc --prune=now`, so their objects are really
        gone from disk. Holding the repository lock, no snapshot is half-written meanwhile: an object
        not yet named by a ref is never one a snapshot in progress still needs."""
        async with self._exclusive():
            listed = await self.git("for-each-ref", "--format=%(objectname) %(committerdate:unix)", REF_PREFIX)
            dated = [line.split() for line in listed.decode().splitlines() if line.strip()]
            drop = {commit for commit, when in dated
                    if commit not in keep and (commit in drop or int(when) < older_than)}
            before = _disk_bytes(self.snapdir / "objects")
            await self._index_the_last(tree_manifest.read(self.snapdir))  # what an older index holds, gc keeps
            tree_manifest.forget(self.snapdir)  # it may name objects pruned now
            if drop:
                await self.git("update-ref", "--stdin",
                               stdin="".join(f"delete {REF_PREFIX}{c} {c}\n" for c in drop).encode())
            await self.git("gc", "--quiet", "--prune=now")
            return PruneResult(len(drop), len(dated) - len(drop), before, _disk_bytes(self.snapdir / "objects"))

    async def exists(self, commit: str) -> bool:
        """Whether a snapshot's commit is still stored (pruned ones are not)."""
        try:
            await self.git("cat-file", "-e", f"{commit}^{{commit}}")
        except SnapshotError:
            return False
        return True

    async def list(self) -> list[str]:
        """The commits of the snapshots kept, newest first."""
        out = await self.git("for-each-ref", "--sort=-committerdate", "--format=%(objectname)", REF_PREFIX)
        return out.decode().split()


@dataclass(frozen=True)
class PruneResult(Deferred):
    """What a prune did: snapshots forgotten and kept, and the size of the objects before and after."""

    removed: int
    kept: int
    bytes_before: int
    bytes_after: int


def _tree_records(listed: bytes) -> Iterator[tuple[str, str, str, str]]:
    """(mode, kind, id, path) of each line of `git ls-tree -z`."""
    for record in listed.split(b"\0"):
        if record:
            meta, _, raw = record.partition(b"\t")
            mode, kind, oid = meta.decode().split(" ")
            yield mode, kind, oid, os.fsdecode(raw)


def _index_bytes(snapdir: Path) -> int:
    """The size of the snapshot index with its shared part (core.splitIndex): about 60 bytes and a path a file."""
    total = 0
    with contextlib.suppress(OSError):
        total = os.stat(snapdir / "auger-index").st_size
        total += max((e.stat().st_size for e in os.scandir(snapdir) if e.name.startswith("sharedindex.")),
                     default=0)
    return total


def _disk_bytes(top: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(top):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


@dataclass(frozen=True)
class _Made(Deferred):
    """A snapshot this store made, and what a later one must find unchanged to be the same snapshot."""

    commit: str
    tree: str
    trailers: str  # the permission bits and left-out paths, as the commit message holds them
    index: tuple[int, int, int] | None  # the index file's stamp after the tree was written
    at: float  # time.monotonic() when it was made


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """(inode, size, mtime in ns) of a file: git replaces the index whole (a new inode) when it changes it."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


@dataclass
class _Selection(Deferred):
    """One snapshot's plan: paths to drop from the index, paths to hash (with their permission
    bits and ctime seconds), and what was left out."""

    gone: list[str] = field(default_factory=list)  # missing files
    odd: list[str] = field(default_factory=list)  # entries to drop that update-index would refuse
    present: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    perms: dict[str, int] = field(default_factory=dict)
    ctimes: dict[str, int] = field(default_factory=dict)


@dataclass
class _Kept(Deferred):
    """What is kept beside the index (auger-modes.json): files whose bits are not the usual ones,
    and files to look at again because git's whole-second ctime could hide their next chmod."""

    files: dict[str, int]
    recheck: list[str]


def _git_argv() -> list[str]:
    argv = ["git"]
    for item in _CONFIG:
        argv += ["-c", item]
    return argv


def _read_entry(path: Path, limit: int) -> bytes | None:
    """A file's bytes (a symlink's target), or None if it is gone, too big or not a file now."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            return None
        try:
            return os.fsencode(os.readlink(path))
        except OSError:
            return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        return read_fd(fd)
    finally:
        os.close(fd)


def _below_any(path: str, dirs: set[str]) -> bool:
    """Whether a directory in `dirs` (each ending in "/") holds `path`."""
    parts = path.rstrip("/").split("/")
    return any("/".join(parts[:n]) + "/" in dirs for n in range(1, len(parts)))


def _literal_pattern(rel: str) -> str:
    """A gitignore pattern that matches exactly `rel` (and what lies below it)."""
    return "".join("\\" + c if c in "\\*?[]!# " else c for c in rel)


def _commit(snapshot: Snapshot | str) -> str:
    return snapshot.commit if isinstance(snapshot, Snapshot) else snapshot


def _nul(paths: list[str]) -> bytes:
    return b"".join(os.fsencode(p) + b"\0" for p in paths)


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _rules_digest(protected: ProtectedFiles) -> bytes:
    """What decides which paths are protected by name (the patterns, and those allowed), as a digest: an index
    cleared of protected paths by one process needs no clearing by the next with the same rules. Whatever
    another rule set recorded since (a session allowed a `.env`) is cleared out, as the digest differs."""
    rules = [[r.regex.pattern, r.negated, r.dir_only] for r in protected.rules.rules]
    allowed = [[r.regex.pattern, r.dir_only] for r in protected.allow.rules]
    return hashlib.sha256(json.dumps([rules, allowed]).encode()).hexdigest().encode()


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _project_git_dir(root: Path) -> Path | None:
    """The project's own git directory (for its info/exclude): `.git`, or the one a `.git` file
    names (a worktree or submodule, whose exclude lives in the common directory)."""
    dotgit = root / ".git"
    if dotgit.is_dir():
        return dotgit
    text = _read(dotgit)
    if not text or not text.startswith(b"gitdir:"):
        return None
    gitdir = (root / os.fsdecode(text[len(b"gitdir:"):].strip())).resolve()
    common = _read(gitdir / "commondir")
    return (gitdir / os.fsdecode(common.strip())).resolve() if common else gitdir
