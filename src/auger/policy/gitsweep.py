"""Git directories a session's commands could turn into code the user runs later: found and defused.

Git runs code named in a repository's hooks and config the next time the user types a git command
there, outside any sandbox. The project's own `.git` is protected by the sandbox's mounts
(policy/sandbox.py: config, hooks, info … read-only, `.git` itself a mount point), but a mount
needs something to mount over, and nothing is created in the user's repository to mount over
(a session leaves `.git` as it found it). What mounts cannot cover is left to this module, which
looks after every command that could write, and when the session ends:

* Names the sandbox protects that the project's `.git` did not have when the session began
  (`hooks`, `info`, `config`, `commondir`, `config.worktree`, `objects/info`): one a command
  creates is removed.
* Repositories that appear during the session anywhere in the project — `git init sub`, a bare
  repository, a submodule's or linked worktree's git dir under `.git/modules` or `.git/worktrees`,
  a directory a new `.git` file points at: their hooks are removed (git's `*.sample` files stay),
  their config keeps only keys that run nothing (`KEPT_CONFIG`; `core.hooksPath`,
  `core.fsmonitor`, pagers, editors, filter and diff drivers, aliases, includes … go), and a
  `commondir` leading out of the project is removed. A new `.git` file pointing out of the project
  is removed. This is checked again after every command, so a hook planted later is removed too.

Finding them cheaply: the first scan walks the project (in a thread, as the session's first command
that could write starts), watching each directory with inotify (policy/dirnotify.py, one instance for
the whole process) and remembering its inode and change time. Later scans read only the directories
inotify names (and what is new below them), so a scan costs next to nothing when nothing was added.
Where inotify cannot answer (no watches left, an overflowing queue, a directory moved), a scan stats
every known directory and reads those whose change time moved — ctime, which the kernel sets whenever
an entry is added, removed or renamed, and which a command cannot set back (unlike mtime).
Repositories that existed before the session are the user's and are left alone.

`GitWatch` runs it on threads the process's sessions share: the first walk as the first command that
could write starts (that command waits for it), a walk after each command that could write. While the
session's sandbox is stopped (no command can run), the root handle and the watches are let go; what is
known stays, and the first walk after the sandbox starts again reads every directory whose change time
moved meanwhile. A command's result waits for the
walk after it at most `WALK_WAIT`; what a longer walk finds is told with a later command. So a large
project costs a command no more than that, and the walk overlaps the model's next reply.

What this cannot do: it acts after the fact. A repository planted by a background command is found
by the next command's scan or when the session ends; a git the user runs in between could use it.
A repository the project held before the session (other than the project's own `.git`, which the
bwrap sandbox protects) is not protected.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import subprocess
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from auger.policy.dirnotify import DirNotify
from auger.policy.fs import RootHandle, open_beneath
from auger.policy.gitguard import is_git_name, looks_like_git_dir

# Inside the project's `.git`: what the sandbox keeps read-only when it exists, and so what a command
# must not add when it does not (`modules` and `worktrees` hold git dirs of their own, which are
# defused like any new repository instead, so that `git submodule add` and `git worktree add` work).
GIT_PROTECTED: tuple[str, ...] = ("config", "config.worktree", "hooks", "info", "commondir", "modules",
                                  "worktrees", "objects/info")
_HOLDS_GIT_DIRS = ("modules", "worktrees")
REMOVED_WHEN_ADDED = tuple(name for name in GIT_PROTECTED if name not in _HOLDS_GIT_DIRS)

# Config keys a repository made during the session keeps (lowercase section and variable; `*` is any
# subsection). Everything else goes: an allow-list, because the keys that make git run a program
# (or read config from elsewhere) are many and grow with every release.
KEPT_CONFIG: dict[str, frozenset[str]] = {
    "core": frozenset({"repositoryformatversion", "filemode", "bare", "logallrefupdates", "ignorecase",
                       "precomposeunicode", "symlinks", "autocrlf", "eol", "safecrlf", "quotepath",
                       "checkstat", "trustctime", "sparsecheckout", "sparsecheckoutcone", "abbrev",
                       "compression", "bigfilethreshold"}),
    "extensions": frozenset({"objectformat", "refstorage", "worktreeconfig", "noop", "preciousobjects"}),
    "init": frozenset({"defaultbranch"}),
    "user": frozenset({"name", "email"}),
    "remote.*": frozenset({"url", "pushurl", "fetch", "push", "tagopt", "mirror", "prune", "prunetags"}),
    "branch.*": frozenset({"remote", "merge", "rebase", "pushremote", "description"}),
    "submodule.*": frozenset({"url", "active", "branch", "ignore", "shallow"}),
}
_URL_KEYS = frozenset({"url", "pushurl"})
_RUNNING_URL = ("ext::", "fd::")  # transports that run a command
_POINTER_MAX = 4096
SYSTEM_BIN = "/usr/bin:/bin:/usr/local/bin"
WALK_WAIT = 0.25  # seconds a command's result waits for the walk after it (µs when nothing is new)


@dataclass
class _Dir:
    ident: tuple[int, int]  # (inode, ctime in ns) when last read
    walk: tuple[str, ...]  # entries to walk into: subdirectories, or a git dir's modules/worktrees


@dataclass
class _Scan:
    """What one pass found that needs acting on."""

    git_dirs: list[str] = field(default_factory=list)  # root-relative git dirs seen in changed directories
    pointers: list[str] = field(default_factory=list)  # root-relative `.git` files seen likewise


class GitSweep:
    """The git directories of one project, watched for a session (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(os.path.realpath(root))
        self._root_text = os.fspath(self.root)
        self._handle: RootHandle | None = None
        self._notify: DirNotify | None = None  # which directories changed, without a walk (else: ctime)
        self._lock = threading.Lock()
        self._dirs: dict[str, _Dir] = {}
        self._existing: set[tuple[int, int]] = set()  # (dev, inode) of the user's git dirs
        self._created: dict[str, tuple[tuple[int, int], ...]] = {}  # git dir -> fingerprint when last defused
        self._pointers: dict[str, tuple[tuple[int, int], str | None]] = {}  # `.git` file or link -> when last
        # judged: its (inode, ctime), and where it pointed
        git = self.root / ".git"
        self._absent = tuple(name for name in REMOVED_WHEN_ADDED
                             if git.is_dir() and not git.is_symlink() and not os.path.lexists(git / name))
        self._ready = False
        self._rewatch = False  # the watches are new: the next walk looks at everything (and watches it)

    # --- the public face -------------------------------------------------------------------------

    def start(self) -> None:
        """The first walk: everything found now is the user's. Blocking; run it in a thread."""
        with self._lock:
            try:
                self._handle = RootHandle(self.root)
            except OSError:
                return
            self._notify = DirNotify.open()
            found = self._walk()
            for rel in found.git_dirs:
                ident = self._ident(rel)
                if ident is not None:
                    self._existing.add(ident)
            for rel in found.pointers:
                self._pointers[rel] = (_changed(self.root / rel) or (0, 0), self._pointed(rel))
            self._ready = True

    def sweep(self) -> list[str]:
        """Defuse what commands added since the last sweep; one note per thing done (for the model)."""
        with self._lock:
            if not self._ready or self._handle is None:
                return []
            notes = self._remove_added_names()
            found = self._walk()
            for rel in dict.fromkeys([*self._pointers, *found.pointers]):
                notes += self._pointer(rel)
            for rel in found.git_dirs:
                ident = self._ident(rel)
                if ident is not None and ident not in self._existing and rel not in self._created:
                    self._created[rel] = ()
            for rel in list(self._created):
                notes += self._recheck(rel)
            return notes

    def release(self) -> None:
        """Let go of the root handle and the watches while no command can run (the session's sandbox
        stopped), keeping what is known: what is the user's, what was made during the session."""
        with self._lock:
            if self._handle is not None:
                self._handle.close()
                self._handle = None
            if self._notify is not None:
                self._notify.close()
                self._notify = None

    def resume(self) -> None:
        """Take the handle and the watches again; the next walk stats every directory (and watches it
        again), so what changed meanwhile is read. Blocking; run it in a thread."""
        with self._lock:
            if self._handle is not None or not self._ready:
                return
            try:
                self._handle = RootHandle(self.root)
            except OSError:
                return
            self._notify = DirNotify.open()
            self._rewatch = True

    close = release

    # --- names added to the project's own .git ---------------------------------------------------

    def _remove_added_names(self) -> list[str]:
        removed = []
        for name in self._absent:
            rel = f".git/{name}"
            if os.path.lexists(self.root / rel) and self._remove(rel):
                removed.append(rel)
        if not removed:
            return []
        return ["removed " + ", ".join(removed) + " (created by a command; the sandbox keeps these read-only "
                "because git would read config or run hooks from them)"]

    # --- walking ---------------------------------------------------------------------------------

    def _walk(self) -> _Scan:
        """Read the directories that changed since the last walk (and every new one)."""
        if self._notify is not None and self._dirs and not self._rewatch:
            changed = self._notify.drain()
            if changed is not None:
                return self._walk_changed(changed)
        self._rewatch = False
        return self._walk_all()

    def _walk_all(self) -> _Scan:
        """Visit every known directory (an `lstat` each); read the ones whose change time moved."""
        assert self._handle is not None
        found = _Scan()
        seen: dict[str, _Dir] = {}
        stack = [""]
        fd = self._handle.fd
        while stack:
            rel = stack.pop()
            if rel in seen:
                continue
            if self._notify is not None:  # first, so that nothing made from now on goes unseen
                self._notify.watch(self._path(rel), rel)
            try:
                st = os.stat(rel or ".", dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISDIR(st.st_mode):
                continue
            ident = (st.st_ino, st.st_ctime_ns)
            known = self._dirs.get(rel)
            if known is None or known.ident != ident:
                known = self._read(rel, ident, found)
            seen[rel] = known
            stack.extend(f"{rel}/{name}" if rel else name for name in known.walk)
        self._dirs = seen
        return found

    def _walk_changed(self, changed: set[str]) -> _Scan:
        """Read the directories inotify names, and whatever is new below them."""
        assert self._handle is not None and self._notify is not None
        found = _Scan()
        stack = sorted(changed)
        fd = self._handle.fd
        while stack:
            rel = stack.pop()
            self._notify.watch(self._path(rel), rel)
            try:
                st = os.stat(rel or ".", dir_fd=fd, follow_symlinks=False)
            except OSError:
                self._dirs.pop(rel, None)
                continue
            if not stat.S_ISDIR(st.st_mode):
                self._dirs.pop(rel, None)
                continue
            old = self._dirs.get(rel)
            now = self._read(rel, (st.st_ino, st.st_ctime_ns), found)
            self._dirs[rel] = now
            for name in set(old.walk if old else ()) - set(now.walk):
                self._dirs.pop(f"{rel}/{name}" if rel else name, None)
            for name in now.walk:
                child = f"{rel}/{name}" if rel else name
                known = self._dirs.get(child)
                try:
                    inode = os.stat(child, dir_fd=fd, follow_symlinks=False).st_ino
                except OSError:
                    continue
                if known is None or known.ident[0] != inode:  # new here (or replaced): read it and below
                    self._dirs.pop(child, None)
                    stack.append(child)
        return found

    def _path(self, rel: str) -> str:
        return f"{self._root_text}/{rel}" if rel else self._root_text

    def _read(self, rel: str, ident: tuple[int, int], found: _Scan) -> _Dir:
        """Read a new or changed directory: note the git dirs and `.git` files in it, and what to walk into."""
        try:
            with os.scandir(self._path(rel)) as it:
                entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
        except OSError:
            return _Dir(ident, ())
        names = {name for name, _ in entries}
        if rel and (is_git_name(rel.rsplit("/", 1)[-1]) or looks_like_git_dir(names)):
            found.git_dirs.append(rel)
            return _Dir(ident, tuple(n for n in _HOLDS_GIT_DIRS if n in names))
        walk = []
        for name, is_dir in entries:
            if is_dir:
                walk.append(name)
            elif is_git_name(name):  # a `.git` file (or link) naming the git dir
                found.pointers.append(f"{rel}/{name}" if rel else name)
        return _Dir(ident, tuple(walk))

    def _ident(self, rel: str) -> tuple[int, int] | None:
        try:
            st = os.lstat(self.root / rel)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    # --- defusing --------------------------------------------------------------------------------

    def _pointer(self, rel: str) -> list[str]:
        """A `.git` file or link made or re-pointed during the session: one leading out of the project goes;
        the git dir it names inside the project is defused like any new one (unless it is the user's)."""
        changed = _changed(self.root / rel)
        if changed is None:
            self._pointers.pop(rel, None)
            return []
        known = self._pointers.get(rel)
        if known is not None and known[0] == changed:
            return []
        text = self._pointed(rel)
        self._pointers[rel] = (changed, text)
        if known is not None and known[1] == text:  # touched, not re-pointed
            return []
        target = self._inside(os.path.dirname(rel), text) if text is not None else None
        if target is None:
            self._remove(rel)
            self._pointers.pop(rel, None)
            return [f"removed {rel} (it pointed git at a directory outside the project, whose hooks and config "
                    "git would use)"]
        target_ident = self._ident(target)
        if target_ident is not None and target_ident not in self._existing:
            self._created.setdefault(target, ())
        return []

    def _pointed(self, rel: str) -> str | None:
        """Where a `.git` link or `gitdir:` file points, as written; None when it names nothing."""
        if os.path.islink(self.root / rel):
            try:
                return os.readlink(self.root / rel)
            except OSError:
                return None
        text = self._read_small(rel)
        if text is None or not text.startswith("gitdir:"):
            return None
        return text[len("gitdir:"):].strip() or None

    def _recheck(self, rel: str) -> list[str]:
        """Defuse a git dir made during the session if it changed since it was last defused."""
        fingerprint = self._fingerprint(rel)
        if not fingerprint:  # gone
            self._created.pop(rel, None)
            return []
        if fingerprint == self._created.get(rel):
            return []
        done = self._defuse(rel)
        self._created[rel] = self._fingerprint(rel)
        if not done:
            return []
        return [f"in the git repository {rel} created during this session, removed " + ", ".join(done) +
                " (git would run them outside the sandbox)"]

    def _fingerprint(self, rel: str) -> tuple[tuple[int, int], ...]:
        """(inode, ctime) of the parts of a git dir that can make git run code; () when it is gone."""
        if not os.path.isdir(self.root / rel):
            return ()
        return tuple(_changed(self.root / rel / name) or (0, 0)
                     for name in ("hooks", "config", "config.worktree", "commondir"))

    def _defuse(self, rel: str) -> list[str]:
        done = []
        hooks = self._hooks(f"{rel}/hooks")
        if hooks:
            done.append("hooks " + ", ".join(hooks))
        for name in ("config", "config.worktree"):
            dropped = self._filter_config(f"{rel}/{name}")
            if dropped:
                done.append(f"{name} keys " + ", ".join(dropped))
        common = self._read_small(f"{rel}/commondir")
        if common is not None:
            target = self._inside(rel, common.strip())
            if target is None:
                self._remove(f"{rel}/commondir")
                done.append("a commondir leading out of the project")
            else:
                target_ident = self._ident(target)
                if target_ident is not None and target_ident not in self._existing:
                    self._created.setdefault(target, ())
        return done

    def _hooks(self, rel: str) -> list[str]:
        """Remove every hook (git's own `*.sample` files stay); a `hooks` that is not a directory goes whole."""
        try:
            st = os.lstat(self.root / rel)
        except OSError:
            return []
        if not stat.S_ISDIR(st.st_mode):
            return [os.path.basename(rel)] if self._remove(rel) else []
        removed = []
        fd = self._open_dir(rel)
        if fd is None:
            return []
        try:
            for entry in os.scandir(fd):
                if entry.name.endswith(".sample") and entry.is_file(follow_symlinks=False):
                    continue
                try:
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.name, dir_fd=fd)
                    else:
                        os.unlink(entry.name, dir_fd=fd)
                    removed.append(entry.name)
                except OSError:
                    pass
        finally:
            os.close(fd)
        return sorted(removed)

    def _filter_config(self, rel: str) -> list[str]:
        """Rewrite a config file with only the KEPT_CONFIG keys; the names of the keys dropped."""
        parent, name = os.path.split(rel)
        fd = self._open_dir(parent)
        if fd is None:
            return []
        try:
            try:
                file_fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                return []
            except OSError:  # a symlink (or worse) where a config file belongs
                self._remove(rel)
                return [f"(the {name} link)"]
            try:
                data = _read_all(file_fd, 1 << 20)
            finally:
                os.close(file_fd)
            entries = parse_config(data)
            if entries is None:  # git cannot read it either: nothing in it runs
                return []
            kept = [(k, v) for k, v in entries if keeps(k, v)]
            dropped = sorted({k for k, v in entries if not keeps(k, v)})
            if not dropped:
                return []
            temp = f".{name}.auger-{os.getpid()}"
            out = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=fd)
            try:
                os.write(out, render_config(kept).encode("utf-8", "surrogateescape"))
            finally:
                os.close(out)
            os.replace(temp, name, src_dir_fd=fd, dst_dir_fd=fd)
            return dropped
        except OSError:
            return []
        finally:
            os.close(fd)

    # --- files beneath the root ------------------------------------------------------------------

    def _open_dir(self, rel: str) -> int | None:
        assert self._handle is not None
        try:
            return open_beneath(self._handle, rel or ".", os.O_RDONLY | os.O_DIRECTORY, follow=False)
        except (OSError, ValueError):
            return None

    def _remove(self, rel: str) -> bool:
        """Remove a file or a whole directory beneath the root, never following a symlink."""
        parent, name = os.path.split(rel)
        fd = self._open_dir(parent)
        if fd is None:
            return False
        try:
            try:
                os.unlink(name, dir_fd=fd)
            except IsADirectoryError:
                shutil.rmtree(name, dir_fd=fd)
            return True
        except OSError:
            return False
        finally:
            os.close(fd)

    def _read_small(self, rel: str) -> str | None:
        """The first line of a small regular file beneath the root, or None."""
        assert self._handle is not None
        try:
            fd = open_beneath(self._handle, rel, os.O_RDONLY, follow=False)
        except (OSError, ValueError):
            return None
        try:
            text = _read_all(fd, _POINTER_MAX).decode("utf-8", "replace")
        except OSError:
            return None
        finally:
            os.close(fd)
        return text.splitlines()[0] if text else ""

    def _inside(self, base: str, target: str) -> str | None:
        """`target` (absolute, or relative to the root-relative `base`) as a root-relative path, or None
        when it leads out of the project."""
        path = target if os.path.isabs(target) else os.path.join(self.root, base, target)
        real = os.path.realpath(path)
        root = os.fspath(self.root)
        if real == root or not real.startswith(root + os.sep):
            return None
        return real[len(root) + 1:]


class GitWatch:
    """A project's GitSweep, run on the process's walking threads for one session (see the module docstring).

    Released while the session's sandbox is stopped (no command can run then): after a last walk, the
    root handle and the watches go; resumed when a sandbox starts again."""

    def __init__(self, root: Path) -> None:
        self.sweep = GitSweep(root)
        self._started = _walker().submit(self._start)
        self._pending: list[Future[list[str]]] = []  # walks not yet reported, in order
        self._queued = False  # a walk is submitted and has not begun: it will see every change made so far
        self._released = False

    def _start(self) -> list[str]:
        self.sweep.start()
        return []

    async def before_command(self) -> None:
        """What exists before the first command is the user's: the first walk must be over."""
        await asyncio.wrap_future(self._started)

    async def after_command(self, walk: bool) -> list[str]:
        """Start a walk when a command that could write ran (unless one not yet begun will see its changes
        anyway), wait for it up to WALK_WAIT, and return the notes of every walk finished since the last call.
        (Walks of one project are one at a time: GitSweep holds its lock.)"""
        if walk and not self._queued and not self._released:
            self._queued = True
            self._pending.append(_walker().submit(self._walk))
        if walk and self._pending:
            await asyncio.wait([asyncio.wrap_future(self._pending[-1])], timeout=WALK_WAIT)
        done = [future for future in self._pending if future.done()]
        self._pending = [future for future in self._pending if not future.done()]
        return [note for future in done for note in future.result()]

    def _walk(self) -> list[str]:
        self._queued = False  # from here on, a change may come too late for this walk
        return self.sweep.sweep()

    async def release(self) -> None:
        """A last walk (its notes are told with the next command), then the handle and the watches go."""
        if self._released:
            return
        await asyncio.wrap_future(self._started)
        walk = _walker().submit(self._walk)
        self._pending.append(walk)
        await asyncio.wrap_future(walk)
        await asyncio.wrap_future(_walker().submit(self.sweep.release))
        self._released = True

    def resume(self) -> None:
        """Watch again (a released watch; a running one is left as it is)."""
        if self._released:
            self._released = False
            self._started = _walker().submit(self._resume)

    def _resume(self) -> list[str]:
        self.sweep.resume()
        return []

    async def close(self) -> None:
        """A last walk (nobody reads its notes: the defusing is what counts), then the handle and watches go."""
        if not self._released:
            await asyncio.wrap_future(self._started)
            await asyncio.wrap_future(_walker().submit(self.sweep.sweep))
        await asyncio.wrap_future(_walker().submit(self.sweep.close))


_walkers: ThreadPoolExecutor | None = None


def _walker() -> ThreadPoolExecutor:
    """The threads every session's walks run on: a few for the process, whatever its number of sessions
    (a thread per session would be a thousand threads in a process running a thousand)."""
    global _walkers
    if _walkers is None:
        _walkers = ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1), thread_name_prefix="auger-gitsweep")
    return _walkers


def _changed(path: Path) -> tuple[int, int] | None:
    """(inode, ctime in ns) of `path` itself (a link is not followed), or None when it does not exist."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_ino, st.st_ctime_ns


def _read_all(fd: int, limit: int) -> bytes:
    chunks = []
    total = 0
    while total < limit:
        chunk = os.read(fd, min(65536, limit - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


# --- config files ----------------------------------------------------------------------------------

def parse_config(data: bytes) -> list[tuple[str, str | None]] | None:
    """(key, value) pairs as git reads them (value None for a bare boolean key), includes not
    followed; None when git cannot parse the file (or is not installed)."""
    git = shutil.which("git", path=SYSTEM_BIN)
    if git is None:
        return None
    env = {"PATH": SYSTEM_BIN, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "HOME": "/"}
    try:
        proc = subprocess.run([git, "config", "--no-includes", "--file", "-", "--list", "-z"], input=data,
                              capture_output=True, env=env, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    entries: list[tuple[str, str | None]] = []
    for record in proc.stdout.decode("utf-8", "surrogateescape").split("\0"):
        if not record:
            continue
        key, newline, value = record.partition("\n")
        entries.append((key, value if newline else None))
    return entries


def keeps(key: str, value: str | None) -> bool:
    """Whether a repository made during the session keeps this config entry (see KEPT_CONFIG)."""
    section, _, rest = key.partition(".")
    subsection, _, variable = rest.rpartition(".")
    allowed = KEPT_CONFIG.get(f"{section}.*" if subsection else section, frozenset())
    if variable not in allowed:
        return False
    return not (variable in _URL_KEYS and value is not None and value.strip().lower().startswith(_RUNNING_URL))


def render_config(entries: list[tuple[str, str | None]]) -> str:
    """Entries as a git config file, one section header per run of the same section."""
    lines: list[str] = []
    current = None
    for key, value in entries:
        section, _, rest = key.partition(".")
        subsection, _, variable = rest.rpartition(".")
        header = f'[{section} "{_escape(subsection)}"]' if subsection else f"[{section}]"
        if header != current:
            lines.append(header)
            current = header
        lines.append(f"\t{variable}" if value is None else f'\t{variable} = "{_escape(value)}"')
    return "\n".join(lines) + "\n" if lines else ""


def _escape(text: str) -> str:
    return (text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
            .replace("\b", "\\b"))
