"""Protected files: which paths of a project the agent may not read, and why.

A path is protected when a pattern says so — DEFAULT_FILES, then the user's `[secrets] files`, then the
project's (`.auger/config.toml`), then the lines of `.augerignore` in the project root — and no pattern of
the user's `[secrets] allow` unprotects it. Patterns are gitignore syntax, matched against the path relative
to the project root: a pattern without a `/` (but a trailing one) matches a name in any directory, `dir/`
only directories, `**` any number of directories, a later `!pattern` unprotects what an earlier one
protected; a protected directory protects everything beneath it, which nothing re-includes (as in git).
Matching ignores case (`.ENV` is `.env`: on a case-insensitive filesystem they are one file). A project
(its config or its `.augerignore`) only adds: its `!` lines are ignored, and within a session a line
once read from `.augerignore` stays in force even when the file changes, so a command that edits the file
cannot unprotect anything before the session ends.

`ProtectedFiles` answers for one project root, and is shared by what a session's tools, sandbox and
snapshots ask of it:

* `why(rel)` — by name: the `Reason` (pattern, where it comes from), or None.
* `check(rel, st)` — by name, or by inode: a hard link to a protected file, or a protected file renamed
  (by a command, under a name no pattern covers), is the same inode, and stays protected for the session.
* `scan()` — the protected paths that exist, for the sandbox to hide: a breadth-first walk of the project
  (`.git` left out; directories that hold dependencies and caches last), bounded by `scan_limit` entries so
  a huge tree cannot stall a session's start; what lies beyond the bound is protected by the file tools
  (by name) but not hidden from commands. A protected directory is one path (its contents are walked only
  for their inodes, or entry by entry when the user allows something inside it).
* `look_again()` — the scan's paths plus protected names that appeared since in the directories a new one
  is most likely in (the root, and each directory holding a protected path, at most WATCH_LIMIT of them, the
  shallowest): cheap enough for every command.

Stdlib only; nothing here runs a command or writes a file.
"""

from __future__ import annotations

import os
import re
import stat
import threading
from collections import deque
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, NamedTuple

from auger.lazy_regex import lazy_compile
from auger.secrets.settings import (
    DEFAULT_LAYER,
    IGNORE_FILE,
    PROJECT_LAYER,
    USER_LAYER,
    SecretsSettings,
    secrets_settings,
)

if TYPE_CHECKING:
    from auger.config import Config
    from auger.policy.fs import RootHandle

IGNORE_LAYER = IGNORE_FILE  # where a pattern read from .augerignore comes from
ALLOW_LAYER = "allowed in the user config"
SCAN_LIMIT = 50_000  # directory entries one scan looks at, at most (see the module docstring)
WATCH_LIMIT = 64  # directories `look_again` reads before each command, at most (the shallowest)
IGNORE_FILE_MAX = 1 << 20  # a larger .augerignore is not read (its first MiB is)
# Directories a scan walks after all others: dependencies and caches, often huge, rarely the user's secrets.
BULK_DIRS = frozenset({"node_modules", ".venv", "venv", "__pycache__", ".tox", ".nox", ".mypy_cache",
                       ".pytest_cache", ".ruff_cache", ".gradle", ".cache", "target", "dist", "build", "vendor"})


# --------------------------------------------------------------------------- patterns


class Rule(NamedTuple):
    """One pattern: as written, where it comes from, and its compiled form."""

    text: str
    source: str
    negated: bool
    dir_only: bool
    regex: re.Pattern[str]


@lru_cache(maxsize=4096)
def compile_rule(text: str, source: str) -> Rule | None:
    """A gitignore-syntax line as a Rule; None for a blank line or a comment. Kept per line: every
    session of a process starts from the same few dozen default patterns, and a Rule never changes."""
    line = text.rstrip("\n\r")
    if line.startswith("#"):
        return None
    while line.endswith(" ") and not line.endswith("\\ "):
        line = line[:-1]
    negated = False
    if line.startswith("!"):
        negated, line = True, line[1:]
    elif line.startswith(("\\!", "\\#")):
        line = line[1:]
    dir_only = line.endswith("/")
    line = line.rstrip("/")
    if not line:
        return None
    anchored = "/" in line  # a '/' at the start or in the middle ties the pattern to the root
    body = _glob_regex(line.lstrip("/"))
    regex = body if anchored else "(?:.*/)?" + body
    # compiled when first used: the rules' joint pattern (Rules) answers most questions without it
    return Rule(text.strip(), source, negated, dir_only, lazy_compile(regex, re.IGNORECASE | re.DOTALL))


def _glob_regex(glob: str) -> str:
    """A glob as a regex for `fullmatch` on a '/'-separated path: `*` and `?` stay within a name, a whole
    `**` component spans directories, `[...]` is a class (never matching '/'), `\\` escapes."""
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        if c == "*":
            j = i
            while j < n and glob[j] == "*":
                j += 1
            whole = (i == 0 or glob[i - 1] == "/") and (j == n or glob[j] == "/")
            if j - i >= 2 and whole:
                if j == n:
                    out.append(".*")  # `dir/**`: everything inside
                else:
                    out.append("(?:.*/)?")  # `**/`: any number of directories, none too
                    j += 1
            else:
                out.append("[^/]*")
            i = j
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[" and (end := _class_end(glob, i)) is not None:
            inner = glob[i + 1:end]
            negated = inner[:1] in ("!", "^")
            inner = inner[1:] if negated else inner
            body = "".join(ch if ch == "-" else re.escape(ch) for ch in inner)
            out.append(f"[^{body}/]" if negated else f"[{body}]")
            i = end + 1
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(glob[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def _class_end(glob: str, start: int) -> int | None:
    """Where the class opened at `start` closes (a `]` first in it is a member), or None."""
    j = start + 1
    if j < len(glob) and glob[j] in "!^":
        j += 1
    if j < len(glob) and glob[j] == "]":
        j += 1
    end = glob.find("]", j)
    return end if end != -1 else None


class Rules:
    """Patterns in order; for one path, the last that matches decides."""

    def __init__(self, rules: Iterable[Rule]) -> None:
        self.rules = tuple(rules)
        # one pattern for all, so most paths are answered by one match; compiled when first asked
        self._any = lazy_compile("|".join(f"(?:{r.regex.pattern})" for r in self.rules),
                                 re.IGNORECASE | re.DOTALL) if self.rules else None

    def verdict(self, rel: str, is_dir: bool) -> Rule | None:
        """The last rule matching exactly `rel` (not its parents), or None."""
        if self._any is None or self._any.fullmatch(rel) is None:
            return None
        for rule in reversed(self.rules):
            if (is_dir or not rule.dir_only) and rule.regex.fullmatch(rel):
                return rule
        return None

    def decide(self, rel: str, is_dir: bool = False) -> tuple[Rule, str] | None:
        """The rule that covers `rel` — matching it or a directory above it, and not negated — with what it
        matched; None when none does."""
        parts = rel.split("/")
        for n in range(1, len(parts) + 1):
            prefix = "/".join(parts[:n])
            rule = self.verdict(prefix, is_dir or n < len(parts))
            if rule is not None and not rule.negated:
                return rule, prefix
        return None


def normalized(rel: str) -> str:
    """A root-relative path as the patterns see it: '/'-separated, without '.', '' for the root."""
    rel = os.path.normpath(rel.replace(os.sep, "/")).lstrip("/")
    return "" if rel == "." else rel


# --------------------------------------------------------------------------- answers


_WHERE = {DEFAULT_LAYER: "auger's defaults", USER_LAYER: "your user config", PROJECT_LAYER: "the project's config",
          IGNORE_LAYER: "the project's .augerignore"}


class Reason(NamedTuple):
    """Why a path is protected."""

    path: str  # root-relative, as asked about
    pattern: str  # the pattern that protects it ("" when it is the same file as a protected one)
    source: str  # DEFAULT_LAYER, USER_LAYER, PROJECT_LAYER, IGNORE_LAYER
    matched: str  # the path, or the directory above it, the pattern matched
    same_as: str = ""  # a hard link or a renamed file: the protected path it was found as

    def describe(self) -> str:
        if self.same_as:
            return f"{self.path} is the same file as the protected {self.same_as} (a hard link to it, or it renamed)"
        inside = "" if self.matched == self.path else f", which covers its directory {self.matched}/"
        where = _WHERE.get(self.source, self.source)
        return f"{self.path} is a protected file (pattern '{self.pattern}' in {where}{inside})"


class Scan(NamedTuple):
    """What one scan found: the protected paths that exist (root-relative, sorted), how many entries it
    looked at, whether it saw the whole tree, and the directories `look_again` reads."""

    paths: tuple[str, ...]
    entries: int
    complete: bool
    watched: tuple[str, ...]
    allowed: tuple[tuple[str, str], ...] = ()  # (path, allow pattern): files a pattern protects, the user allowed


class ProtectedFiles:
    """The protected files of the project at `root` (see the module docstring). Thread-safe: the file tools
    ask from worker threads."""

    def __init__(self, root: Path | str, settings: SecretsSettings | None = None, *,
                 scan_limit: int = SCAN_LIMIT) -> None:
        self.root = Path(os.path.realpath(root))
        self.settings = settings or SecretsSettings()
        self.scan_limit = scan_limit
        self._lock = threading.RLock()
        sources = self.settings.file_sources
        self._base = [r for r in (compile_rule(p, sources[i] if i < len(sources) else USER_LAYER)
                                  for i, p in enumerate(self.settings.files)) if r is not None]
        self.allow = Rules(r for r in (compile_rule(p, ALLOW_LAYER) for p in self.settings.allow)
                           if r is not None and not r.negated)
        self._ignore_lines: list[str] = []  # .augerignore's lines seen this session: they stay
        self._ignore_stamp: tuple[int, ...] | None = None
        self._ignore_read = False
        self.ignore_problems: list[str] = []
        self.rules = Rules(self._base)
        self._inodes: dict[tuple[int, int], str] = {}  # (st_dev, st_ino) of a protected file -> its path
        self._scan: Scan | None = None
        self._absolute: tuple[Scan | None, tuple[Path, ...]] = (None, ())  # `paths()` of a scan

    # -- patterns ------------------------------------------------------------------------------

    def refresh(self) -> bool:
        """Read `.augerignore` again if it changed; whether the patterns changed (a new scan is then due)."""
        with self._lock:
            stamp = _stamp(self.root / IGNORE_FILE)
            if self._ignore_read and stamp == self._ignore_stamp:
                return False
            self._ignore_read, self._ignore_stamp = True, stamp
            lines = _read_ignore_file(self.root / IGNORE_FILE) if stamp is not None else []
            added = False
            for line in lines:
                rule = compile_rule(line, IGNORE_LAYER)
                if rule is None or line.strip() in self._ignore_lines:
                    continue
                if rule.negated:
                    problem = f"{IGNORE_FILE}: '{line.strip()}' ignored: a project may only add protected files"
                    if problem not in self.ignore_problems:
                        self.ignore_problems.append(problem)
                    continue
                self._ignore_lines.append(line.strip())
                added = True
            if added:
                self.rules = Rules([*self._base, *(r for r in map(lambda t: compile_rule(t, IGNORE_LAYER),
                                                                  self._ignore_lines) if r is not None)])
                self._scan = None
            return added

    @property
    def diagnostics(self) -> tuple[str, ...]:
        """Problems with the patterns: the configuration's, then `.augerignore`'s."""
        return (*self.settings.diagnostics, *self.ignore_problems)

    def allowed(self, rel: str, is_dir: bool = False) -> str | None:
        """The `[secrets] allow` pattern that unprotects `rel` (or a directory above it), or None."""
        found = self.allow.decide(normalized(rel), is_dir)
        return found[0].text if found is not None else None

    def why(self, rel: str, is_dir: bool = False, *, refresh: bool = True) -> Reason | None:
        """Why `rel` (root-relative) is protected by its name, or None: not protected, or allowed. `refresh`:
        look whether `.augerignore` changed first (a walk asks once, then for each entry without)."""
        rel = normalized(rel)
        if not rel or rel == ".." or rel.startswith("../"):
            return None
        if refresh:
            self.refresh()
        found = self.rules.decide(rel, is_dir)
        if found is None or self.allowed(rel, is_dir) is not None:
            return None
        rule, matched = found
        return Reason(rel, rule.text, rule.source, matched)

    def check(self, rel: str, st: os.stat_result | None = None, *, refresh: bool = True) -> Reason | None:
        """Why the file at `rel`, whose stat is `st` (when it exists), is protected: by its name, or as the
        same inode as a protected file. None: it is not. `refresh` as for `why`."""
        reason = self.why(rel, is_dir=st is not None and stat.S_ISDIR(st.st_mode), refresh=refresh)
        if st is None or not stat.S_ISREG(st.st_mode):
            return reason
        key = (st.st_dev, st.st_ino)
        with self._lock:
            if reason is not None:
                self._inodes.setdefault(key, reason.path)
                return reason
            if self._scan is None and st.st_nlink > 1:  # a hard link made before any scan: scan now to know
                self.scan()  # (a rename a command makes comes after the sandbox's own scan, which notes inodes)
            found = self._inodes.get(key)
        if found is None or found == normalized(rel) or self.allowed(rel) is not None:
            return None
        return Reason(normalized(rel), "", "", normalized(rel), same_as=found)

    def beneath(self, handle: RootHandle, rel: str, *, follow: bool = True) -> Reason | None:
        """Why the file `rel` beneath `handle` (the project root's, or a directory's in it) is protected — by its
        name, where a symlink leads, or its inode — for a reader about to open it; None: it is not."""
        try:
            if follow:
                real, fd = handle.open_resolved(rel, os.O_PATH)
            else:
                real, fd = rel, handle.open(rel, os.O_PATH, follow=False)
        except (OSError, ValueError):
            return self.why(rel)  # the read will say what else is wrong
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
        return self.check(rel, st) or self.check(real, st)

    # -- what exists ---------------------------------------------------------------------------

    def scan(self, *, again: bool = False) -> Scan:
        """The protected paths that exist now (kept until `again`, or until the patterns change)."""
        with self._lock:
            self.refresh()
            if self._scan is None or again:
                self._scan = self._walk()
            return self._scan

    def look_again(self) -> Scan:
        """The last scan (one is made if none was, or the patterns changed) plus the protected names that
        appeared since in the directories it watches."""
        with self._lock:
            if self.refresh() or self._scan is None:
                return self.scan()
            scan = self._scan
            found = set(scan.paths)
            numbers = {ino for _, ino in self._inodes}
            listed: dict[str, set[str]] = {}  # a watched directory -> the names in it now
            new = []
            for directory in scan.watched:
                entries = _entries(self.root / directory if directory else self.root)
                listed[directory] = {entry.name for entry in entries}
                for entry in entries:
                    rel = f"{directory}/{entry.name}" if directory else entry.name
                    if rel in found or entry.name == ".git":
                        continue
                    rule = self.rules.verdict(rel, entry.kind == "dir")  # the directory itself is not protected
                    if (rule is not None and not rule.negated and self.allowed(rel) is None) or (
                            entry.kind == "file" and entry.inode in numbers and self._same_inode(rel)):
                        new.append(rel)  # a new protected file, or one renamed or linked where it was
            known = {rel for rel in scan.paths  # without those gone from a watched directory since
                     if os.path.basename(rel) in listed.get(os.path.dirname(rel), (os.path.basename(rel),))}
            if new or len(known) < len(scan.paths):
                self._scan = scan = Scan(tuple(sorted(known | set(new))), scan.entries, scan.complete,
                                         tuple(sorted(set(scan.watched) | {os.path.dirname(p) for p in new},
                                                      key=lambda d: (d.count("/"), d))[:WATCH_LIMIT]),
                                         scan.allowed)
                for rel in new:
                    self._note(rel)
            return scan

    def paths(self) -> tuple[Path, ...]:
        """The protected paths that exist, absolute (`look_again`'s), nearest the root first."""
        scan = self.look_again()
        if self._absolute[0] is not scan:
            nearest = sorted(scan.paths, key=lambda p: (p.count("/"), p))
            self._absolute = (scan, tuple(self.root / rel for rel in nearest))
        return self._absolute[1]

    def _same_inode(self, rel: str) -> bool:
        """Whether `rel` is (a hard link to, or the renamed) protected file, and not allowed."""
        try:
            st = os.lstat(self.root / rel)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) in self._inodes and self.allowed(rel) is None

    def _note(self, rel: str) -> None:
        try:
            st = os.lstat(self.root / rel)
        except OSError:
            return
        if stat.S_ISREG(st.st_mode):
            self._inodes.setdefault((st.st_dev, st.st_ino), rel)

    def _walk(self) -> Scan:
        """Breadth first from the root, bulk directories last, at most `scan_limit` entries."""
        found: list[str] = []
        allowed: list[tuple[str, str]] = []
        protected_files: list[str] = []  # whose inodes are protected
        others: list[tuple[str, int]] = []  # (path, d_ino) of the other regular files
        # (directory, how its entries count: "" by their names, "split" each protected unless allowed,
        # "inside" a directory hidden whole, walked for the inodes of its files)
        queue: deque[tuple[str, str]] = deque([("", "")])
        bulk: deque[tuple[str, str]] = deque()
        seen = 0
        complete = True
        while complete and (queue or bulk):
            directory, how = queue.popleft() if queue else bulk.popleft()
            for entry in _entries(self.root / directory if directory else self.root):
                seen += 1
                if seen > self.scan_limit:
                    complete = False
                    break
                name = entry.name
                if name == ".git":
                    continue
                rel = f"{directory}/{name}" if directory else name
                is_dir, is_file, inode = entry.kind == "dir", entry.kind == "file", entry.inode
                if how == "inside":
                    if is_dir:
                        queue.append((rel, "inside"))
                    elif is_file:
                        protected_files.append(rel)
                    continue
                rule = self.rules.verdict(rel, is_dir) if how == "" else None
                protected = how == "split" or (rule is not None and not rule.negated)
                allow = self.allowed(rel, is_dir) if protected else None
                if allow is not None:
                    allowed.append((rel, allow))
                if protected and allow is None:
                    if is_dir and self.allow.rules:  # something inside may be allowed: entry by entry
                        queue.append((rel, "split"))
                        continue
                    found.append(rel)
                    if is_dir:
                        queue.append((rel, "inside"))
                    elif is_file:
                        protected_files.append(rel)
                    continue
                if is_dir:
                    (bulk if name in BULK_DIRS else queue).append((rel, how))
                elif is_file:
                    others.append((rel, inode))
        seen_inodes: dict[tuple[int, int], str] = {}
        for rel in protected_files:
            try:
                st = os.lstat(self.root / rel)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                seen_inodes.setdefault((st.st_dev, st.st_ino), self._inodes.get((st.st_dev, st.st_ino), rel))
        known = {**self._inodes, **seen_inodes}  # earlier scans' too: a protected file renamed since
        numbers = {ino for _, ino in known}
        for rel, ino in others:
            if ino not in numbers:
                continue
            try:
                st = os.lstat(self.root / rel)
            except OSError:
                continue
            key = (st.st_dev, st.st_ino)
            if key in known and self.allowed(rel) is None:
                found.append(rel)  # a hard link to a protected file, or one renamed
                seen_inodes[key] = known[key]
        # a protected file gone from the tree (deleted) is forgotten: its inode number may be reused
        self._inodes = seen_inodes if complete else known
        watched = sorted({"", *(os.path.dirname(p) for p in found)}, key=lambda d: (d.count("/"), d))[:WATCH_LIMIT]
        return Scan(tuple(sorted(found)), min(seen, self.scan_limit), complete, tuple(watched), tuple(allowed))


def protected_files(config: Config, root: Path | str) -> ProtectedFiles:
    """The protected files of the project at `root`, as `config`'s `[secrets]` section says."""
    return ProtectedFiles(root, secrets_settings(config))


def refused_beneath(handle: RootHandle, rel: str | os.PathLike[str]) -> Reason | None:
    """Why a file an instruction reader (skills, custom prompts, agent definitions in the project) is about to read
    beneath the project's handle is protected — a `SKILL.md` that is a link to `.env`, say — by the defaults and
    the project's `.augerignore`; None: it is not."""
    return ProtectedFiles(handle.path).beneath(handle, os.fspath(rel))


def default_protected(root: Path | str) -> ProtectedFiles:
    """The protected files of `root` by the defaults and its `.augerignore` (where no configuration is at hand)."""
    return ProtectedFiles(root)


# --------------------------------------------------------------------------- helpers


def _stamp(path: Path) -> tuple[int, ...] | None:
    """What tells a changed file (its inode, size, modification and change times), or None when absent."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _read_ignore_file(path: Path) -> list[str]:
    """The lines of `.augerignore` (not through a symlink, at most IGNORE_FILE_MAX bytes, UTF-8)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return []
        data = os.read(fd, IGNORE_FILE_MAX)
    except OSError:
        return []
    finally:
        os.close(fd)
    return data.decode("utf-8", "replace").removeprefix("\ufeff").splitlines()


class _Entry(NamedTuple):
    name: str
    kind: str  # "dir", "file", "link" or "other"
    inode: int


def _entries(directory: Path) -> list[_Entry]:
    """A directory's entries, listed without following a symlink in its place; none when it cannot be read."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return []
    out = []
    try:
        with os.scandir(fd) as it:
            for entry in it:
                try:
                    kind = ("link" if entry.is_symlink() else "dir" if entry.is_dir(follow_symlinks=False)
                            else "file" if entry.is_file(follow_symlinks=False) else "other")
                    out.append(_Entry(entry.name, kind, entry.inode()))
                except OSError:
                    continue
    except OSError:
        return []
    finally:
        os.close(fd)
    return out
