"""The project walker and glob matcher shared by every tool that lists or searches files.

`list_dir`, `glob` and `grep` must agree on which files are "in the project", and
`grep` must answer the same with ripgrep as with its pure-Python fallback. So this
module reproduces ripgrep's own rules (its `ignore` and `globset` crates, as run by
`rg --hidden --no-require-git --no-ignore-global --glob '!.git'`) rather than git's
or pathspec's slightly different readings of the same files:

* Ignore files are read in every directory walked and in every ancestor of the start
  directory (so a walk that starts in `src/` still obeys the root's `.gitignore`, and
  a project inside a bigger repository obeys that repository's rules too). Each file's
  patterns are relative to its own directory; the nearest file with a matching pattern
  decides, and within one file the last matching pattern wins (`!pattern` re-includes).
* `.gitignore` and `.git/info/exclude` apply whether or not there is a repository, but
  not across a repository boundary: rules above a directory containing `.git` do not
  reach into it. `.ignore` and `.rgignore` files (ripgrep's own ignore files, which
  `rg` cannot be told to skip) are honoured too and take precedence over `.gitignore`.
* Each entry is matched by its own path only; an ignored directory is pruned, never
  entered. Hence an explicitly requested start directory is walked even when it is
  itself ignored (`list_dir node_modules` shows its contents, like `rg x node_modules`).
* Hidden files are included; anything named `.git` is always skipped; symlinks are
  never followed (so nothing outside the root is reached through one), and special
  files (FIFOs, sockets, devices) are never yielded, because reading them can block.
* The walk descends through directory descriptors (`openat` with `O_NOFOLLOW`), never
  by path, and reads ignore files inside the walked tree the same way: a directory
  swapped for a symlink while we walk is skipped, not followed. (Consequence: an ignore
  file that is itself a symlink is not read; ripgrep would follow it.)

We do not use pathspec here although it is installed: it answers git's whole-path
question ("is this path ignored, given its parents?"), and with pruning that gives
different answers from ripgrep, e.g. `x/**` + `!x/keep` would prune `x/` and lose
`x/keep`, and a walk started inside an ignored directory would yield nothing.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterator

__all__ = [
    "GlobError",
    "PathFilter",
    "WalkEntry",
    "glob_matcher",
    "glob_to_regex",
    "path_sort_key",
    "walk",
]

# Ripgrep's ignore files, highest precedence first; `.git/info/exclude` comes last.
_CUSTOM_IGNORE = ".rgignore"
_DOT_IGNORE = ".ignore"
_GIT_IGNORE = ".gitignore"
_GIT = ".git"
_PROBED_NAMES = (_CUSTOM_IGNORE, _DOT_IGNORE, _GIT_IGNORE, _GIT)


class GlobError(ValueError):
    """A glob (or ignore-file line) that cannot be parsed; the message says why."""


# --------------------------------------------------------------------------- globs
#
# The translator mirrors globset's parser (literal_separator + backslash_escape, the
# options ripgrep uses for --glob and ignore files) token for token, so that edge cases
# such as `a**b` (two plain stars) or `[!a]` (which, as in globset, may match `/`) mean
# the same thing to both grep backends.

_LIT, _ANY, _STAR, _RPREFIX, _RSUFFIX, _RZERO, _CLASS, _ALT = range(8)


class _GlobParser:
    def __init__(self, glob: str) -> None:
        self.glob = glob
        self.pos = 0
        self.prev: str | None = None  # the character before `cur`
        self.cur: str | None = None
        # The bottom list is the glob; while inside `{...}`, one list per alternative.
        self.stack: list[list[tuple]] = [[]]

    def bump(self) -> str | None:
        self.prev = self.cur
        if self.pos < len(self.glob):
            self.cur = self.glob[self.pos]
            self.pos += 1
        else:
            self.cur = None
        return self.cur

    def peek(self) -> str | None:
        return self.glob[self.pos] if self.pos < len(self.glob) else None

    def push(self, token: tuple) -> None:
        self.stack[-1].append(token)

    def parse(self) -> list[tuple]:
        while (c := self.bump()) is not None:
            if c == "?":
                self.push((_ANY,))
            elif c == "*":
                self._star()
            elif c == "[":
                self._class()
            elif c == "{":
                if len(self.stack) > 1:
                    raise GlobError("nested {...} alternatives are not supported")
                self.stack.append([])
            elif c == "}":
                alternatives = []
                while len(self.stack) >= 2:
                    alternatives.append(self.stack.pop())
                self.push((_ALT, alternatives))
            elif c == "," and len(self.stack) > 1:
                self.stack.append([])
            elif c == "\\":
                escaped = self.bump()
                if escaped is None:
                    raise GlobError("dangling '\\' at the end")
                self.push((_LIT, escaped))
            else:
                self.push((_LIT, c))
        if len(self.stack) > 1:
            raise GlobError("unclosed '{'")
        return self.stack[0]

    def _star(self) -> None:
        prev = self.prev
        if self.peek() != "*":
            self.push((_STAR,))
            return
        self.bump()
        if not self.stack[-1]:  # `**` opening the glob (or an alternative)
            if self.peek() in (None, "/"):
                self.push((_RPREFIX,))
                self.bump()
            else:
                self.push((_STAR,))
                self.push((_STAR,))
            return
        if prev != "/" and (len(self.stack) <= 1 or prev not in (",", "{")):
            self.push((_STAR,))  # `a**`: not a whole path component, two plain stars
            self.push((_STAR,))
            return
        nxt = self.peek()
        if nxt is None:
            self.bump()
            is_suffix = True
        elif nxt in (",", "}") and len(self.stack) >= 2:
            is_suffix = True
        elif nxt == "/":
            self.bump()
            is_suffix = False
        else:
            self.push((_STAR,))
            self.push((_STAR,))
            return
        last = self.stack[-1].pop()  # the '/' before `**` is part of the recursive token
        if last[0] in (_RPREFIX, _RSUFFIX):
            self.push(last)
        else:
            self.push((_RSUFFIX,) if is_suffix else (_RZERO,))

    def _class(self) -> None:
        ranges: list[tuple[str, str]] = []
        negated = False
        if self.peek() in ("!", "^"):
            self.bump()
            negated = True
        first, in_range = True, False
        while True:
            c = self.bump()
            if c is None:
                raise GlobError("unclosed character class '['")
            if c == "]" and not first:
                break
            if c == "-" and not first and not in_range:
                in_range = True
            elif in_range:
                start = ranges[-1][0]
                if c < start:
                    raise GlobError(f"invalid range {start}-{c}")
                ranges[-1] = (start, c)
                in_range = False
            else:
                ranges.append((c, c))
            first = False
        if in_range:
            ranges.append(("-", "-"))
        self.push((_CLASS, negated, ranges))


def _tokens_to_regex(tokens: list[tuple]) -> str:
    out: list[str] = []
    for token in tokens:
        kind = token[0]
        if kind == _LIT:
            out.append(re.escape(token[1]))
        elif kind == _ANY:
            out.append("[^/]")
        elif kind == _STAR:
            out.append("[^/]*")
        elif kind == _RPREFIX:
            out.append("(?:/?|.*/)")
        elif kind == _RSUFFIX:
            out.append("/.*")
        elif kind == _RZERO:
            out.append("(?:/|/.*/)")
        elif kind == _CLASS:
            body = "".join(
                re.escape(a) if a == b else f"{re.escape(a)}-{re.escape(b)}" for a, b in token[2]
            )
            out.append(f"[{'^' if token[1] else ''}{body}]")
        elif kind == _ALT:
            parts = [p for p in (_tokens_to_regex(alt) for alt in token[1]) if p]
            if parts:
                out.append("(?:" + "|".join(parts) + ")")
    return "".join(out)


@lru_cache(maxsize=1024)
def glob_to_regex(glob: str) -> str:
    """Translate a glob to a regex meant for `fullmatch` against a '/'-separated path.

    `*` and `?` never cross '/', a whole-component `**` spans any number of directories,
    `[abc]`/`[!abc]`/`[a-z]` are classes, `{a,b}` alternatives, `\\` escapes the next
    character. No implicit anchoring: see `glob_matcher` for where a glob applies.
    """
    tokens = _GlobParser(glob).parse()
    if tokens == [(_RPREFIX,)]:  # `**` alone matches everything
        return ".*"
    return _tokens_to_regex(tokens)


@dataclass(frozen=True, slots=True)
class _Rule:
    """One gitignore-syntax line: `negated` is a leading `!`, `dir_only` a trailing `/`."""

    regex: re.Pattern[str]
    negated: bool
    dir_only: bool


@lru_cache(maxsize=4096)
def _parse_rule(line: str) -> _Rule | None:
    """Compile one gitignore-syntax line; None for blank lines and comments.

    The same syntax serves ignore files and the `glob` argument, as in ripgrep: a
    pattern with no '/' (other than a trailing one) matches the last component at any
    depth; otherwise, or with a leading '/', it is anchored to its base directory.
    """
    if line.startswith("#"):
        return None
    if not line.endswith("\\ "):
        line = line.rstrip()
    if not line:
        return None
    negated = anchored = False
    if line.startswith(("\\!", "\\#")):
        line = line[1:]
    else:
        if line.startswith("!"):
            negated, line = True, line[1:]
        if line.startswith("/"):
            anchored, line = True, line[1:]
    dir_only = line.endswith("/")
    if dir_only:
        line = line[:-1]
    if not anchored and "/" not in line and not (line.startswith("**/") or line == "**"):
        line = "**/" + line
    if line.endswith("/**"):
        line += "/*"  # `dir/**` means everything inside `dir`, not `dir` itself
    try:
        regex = re.compile(glob_to_regex(line))
    except re.error as exc:  # not expected: the translator only emits valid regexes
        raise GlobError(str(exc)) from None
    return _Rule(regex, negated, dir_only)


def glob_matcher(pattern: str) -> Callable[[str], bool]:
    """Compile a `glob` tool/grep pattern into a test on file paths relative to the search dir.

    Semantics are exactly ripgrep's `--glob` (which is why `grep --glob` and the `glob`
    tool agree): no '/' → matches the file's basename at any depth (`*.py`); with a '/'
    → matches the whole relative path (`src/**/*.ts`, `**/test_*.py`); a trailing '/'
    matches directories only, so no file; a leading `!` excludes matching files and
    everything under matching directories. Raises GlobError for a malformed pattern.
    """
    rule = _parse_rule(pattern)
    if rule is None:
        return lambda rel: True
    fullmatch = rule.regex.fullmatch
    if not rule.negated:
        if rule.dir_only:
            return lambda rel: False
        return lambda rel: fullmatch(rel) is not None

    def not_excluded(rel: str) -> bool:
        if not rule.dir_only and fullmatch(rel):
            return False
        cut = rel.find("/")
        while cut != -1:
            if fullmatch(rel[:cut]):
                return False
            cut = rel.find("/", cut + 1)
        return True

    return not_excluded


# --------------------------------------------------------------------- ignore rules


class _RuleSet:
    """The rules of one ignore file, with a combined regex to reject non-matches fast."""

    __slots__ = ("rules", "_any")

    def __init__(self, rules: list[_Rule]) -> None:
        self.rules = rules
        self._any = re.compile("|".join(f"(?:{r.regex.pattern})" for r in rules))

    def match(self, rel: str, is_dir: bool) -> bool | None:
        """True: ignored; False: re-included by a `!` rule; None: no rule matches."""
        if not self._any.fullmatch(rel):
            return None
        for rule in reversed(self.rules):
            if (is_dir or not rule.dir_only) and rule.regex.fullmatch(rel):
                return not rule.negated
        return None


_NOFOLLOW_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR_OPEN = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _load_rules(path: str, dir_fd: int | None = None) -> _RuleSet | None:
    """Read an ignore file; unreadable files and malformed lines are skipped (as rg does).

    With `dir_fd`, `path` is a name in that directory and a symlink there is not followed."""
    try:
        if dir_fd is None:
            with open(path, "rb") as fh:
                data = fh.read()
        else:
            fd = os.open(path, _NOFOLLOW_READ, dir_fd=dir_fd)
            with open(fd, "rb") as fh:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    return None
                data = fh.read()
    except OSError:
        return None
    rules: list[_Rule] = []
    for number, raw in enumerate(data.split(b"\n")):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            break  # ripgrep stops reading an ignore file at its first non-UTF-8 line
        if number == 0:
            line = line.removeprefix("\ufeff")
        try:
            rule = _parse_rule(line)
        except GlobError:
            continue
        if rule is not None:
            rules.append(rule)
    return _RuleSet(rules) if rules else None


def _exclude_file(directory: str) -> str:
    """Where `.git/info/exclude` lives for the repository whose `.git` is in `directory`.

    `.git` may be a file (worktrees, submodules) pointing at the real git directory.
    """
    git = os.path.join(directory, _GIT)
    if os.path.isfile(git):
        try:
            with open(git, encoding="utf-8", errors="replace") as fh:
                first = fh.readline().strip()
        except OSError:
            first = ""
        if first.startswith("gitdir:"):
            git = os.path.join(directory, first[len("gitdir:"):].strip())
            try:
                with open(os.path.join(git, "commondir"), encoding="utf-8") as fh:
                    git = os.path.join(git, fh.read().strip())
            except OSError:
                pass
    return os.path.join(git, "info", "exclude")


class _Node:
    """The ignore rules found in one directory, linked to those of its parent."""

    __slots__ = ("prefix", "custom", "dot", "git", "exclude", "has_git", "chain")

    def __init__(self, directory: str, names: set[str] | frozenset[str], parent: _Node | None,
                 dir_fd: int | None = None):
        self.prefix = directory if directory.endswith("/") else directory + "/"

        def load(name: str) -> _RuleSet | None:
            if name not in names:
                return None
            return _load_rules(name, dir_fd) if dir_fd is not None else _load_rules(os.path.join(directory, name))

        self.custom = load(_CUSTOM_IGNORE)
        self.dot = load(_DOT_IGNORE)
        self.git = load(_GIT_IGNORE)
        self.has_git = _GIT in names
        self.exclude = _load_rules(_exclude_file(directory)) if self.has_git else None
        relevant = self.has_git or self.custom or self.dot or self.git or self.exclude
        inherited = parent.chain if parent is not None else ()
        # Only directories that can influence a decision, nearest first.
        self.chain: tuple[_Node, ...] = (self, *inherited) if relevant else inherited

    def ignores(self, path: str, is_dir: bool) -> bool:
        """Whether the entry at absolute `path`, a child of this directory, is ignored."""
        return _decide(self.chain, path, is_dir)


def _decide(chain: tuple[_Node, ...], path: str, is_dir: bool) -> bool:
    custom = dot = git = exclude = None
    saw_git = False
    for node in chain:
        rel = path[len(node.prefix):]
        if custom is None and node.custom is not None:
            custom = node.custom.match(rel, is_dir)
        if dot is None and node.dot is not None:
            dot = node.dot.match(rel, is_dir)
        if not saw_git:  # git rules stop at the enclosing repository's top directory
            if git is None and node.git is not None:
                git = node.git.match(rel, is_dir)
            if exclude is None and node.exclude is not None:
                exclude = node.exclude.match(rel, is_dir)
        saw_git = saw_git or node.has_git
    for verdict in (custom, dot, git, exclude):
        if verdict is not None:
            return verdict
    return False


def _probe(directory: str) -> frozenset[str]:
    """Which of the names that matter to ignore rules exist in `directory` (no listing)."""
    return frozenset(n for n in _PROBED_NAMES if os.path.lexists(os.path.join(directory, n)))


def _ancestors_node(directory: str) -> _Node | None:
    """The rule chain of `directory` and all its ancestors up to the filesystem root."""
    node: _Node | None = None
    parts = Path(directory).parts
    for i in range(1, len(parts) + 1):
        current = os.path.join(*parts[:i])
        node = _Node(current, _probe(current), node)
    return node


# --------------------------------------------------------------------------- walking


@dataclass(frozen=True, slots=True)
class WalkEntry:
    path: str  # absolute
    rel: str  # relative to the start directory, '/'-separated
    name: str
    depth: int  # 1 for the start directory's own children
    kind: str  # "dir", "file" or "symlink"
    link: str | None = None  # a symlink's target, read through the directory's descriptor


def _scan(directory: str, parent: _Node | None, dir_fd: int) -> tuple[_Node, list[tuple[str, str, str, str | None]]]:
    """List one directory (open at `dir_fd`): its rule node and its kept (name, kind, path, link
    target), dirs first, by name."""
    try:
        with os.scandir(dir_fd) as it:
            raw = list(it)
    except OSError:  # unreadable or vanished: nothing to show, like rg (minus its message)
        raw = []
    node = _Node(directory, {e.name for e in raw}, parent, dir_fd)
    kept: list[tuple[str, str, str, str | None]] = []
    for entry in raw:
        if entry.name == _GIT:
            continue
        link = None
        kind = ""
        try:
            if entry.is_symlink():
                kind = "symlink"
                link = os.readlink(entry.name, dir_fd=dir_fd)
            elif entry.is_dir(follow_symlinks=False):
                kind = "dir"
            elif entry.is_file(follow_symlinks=False):
                kind = "file"
            else:
                continue
        except OSError:
            if kind != "symlink":
                continue
        path = os.path.join(directory, entry.name)
        if node.ignores(path, kind == "dir"):
            continue
        kept.append((entry.name, kind, path, link))
    kept.sort(key=lambda item: (item[1] != "dir", item[0]))
    return node, kept


def walk(
    start: Path,
    *,
    max_depth: int | None = None,
    include_dirs: bool = False,
    include_symlinks: bool = False,
    start_fd: int | None = None,
) -> Iterator[WalkEntry]:
    """Yield the non-ignored entries under the directory `start`, depth-first.

    Each directory's entries come dirs first, then by name, each directory directly
    followed by its own contents (a ready-made tree order). Files are always yielded;
    directories and symlinks (never followed) only when asked. `max_depth` 1 means the
    start directory's children only. `start` should be a resolved path inside the root;
    the caller is responsible for containment, the walker only ever descends, through
    descriptors. `start_fd` is a descriptor on `start` opened safely by the caller (it is
    not closed); without it `start` is opened by path.
    """
    start_s = os.fspath(start)
    parent_dir = os.path.dirname(start_s)
    parent_node = _ancestors_node(parent_dir) if parent_dir != start_s else None
    try:
        fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=start_fd) if start_fd is not None \
            else os.open(start_s, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    node, entries = _scan(start_s, parent_node, fd)
    stack: list[tuple[Iterator[tuple[str, str, str, str | None]], _Node, str, int, int]] = [
        (iter(entries), node, "", 1, fd)
    ]
    try:
        while stack:
            it, node, rel_dir, depth, dir_fd = stack[-1]
            item = next(it, None)
            if item is None:
                os.close(stack.pop()[4])
                continue
            name, kind, path, link = item
            rel = rel_dir + name
            if kind == "dir":
                if include_dirs:
                    yield WalkEntry(path, rel, name, depth, kind)
                if max_depth is None or depth < max_depth:
                    try:  # a directory swapped for a symlink since the listing is not followed
                        child_fd = os.open(name, _DIR_OPEN, dir_fd=dir_fd)
                    except OSError:
                        continue
                    child, child_entries = _scan(path, node, child_fd)
                    stack.append((iter(child_entries), child, rel + "/", depth + 1, child_fd))
            elif kind == "file" or include_symlinks:
                yield WalkEntry(path, rel, name, depth, kind, link)
    finally:
        for frame in stack:
            os.close(frame[4])


class PathFilter:
    """Answers "would `walk(start)` yield this file?" for paths found some other way.

    grep uses it on ripgrep's results when a glob is given: ripgrep lets a `--glob`
    match override ignore rules (`--glob '*.log'` also searches ignored logs), whereas
    our `glob` tool only ever lists non-ignored files. Filtering restores agreement.
    """

    def __init__(self, start: Path) -> None:
        self._start = os.fspath(start).rstrip("/") or "/"
        parent_dir = os.path.dirname(self._start)
        parent = _ancestors_node(parent_dir) if parent_dir != self._start else None
        self._nodes: dict[str, _Node] = {"": _Node(self._start, _probe(self._start), parent)}

    def _join(self, rel: str) -> str:
        return self._start + rel if self._start.endswith("/") else f"{self._start}/{rel}"

    def includes(self, rel: str) -> bool:
        """`rel` is a regular file's path relative to `start`, '/'-separated."""
        parts = rel.split("/")
        node = self._nodes[""]
        for i, part in enumerate(parts):
            if part == _GIT:
                return False
            sub = "/".join(parts[: i + 1])
            is_dir = i < len(parts) - 1
            path = self._join(sub)
            if node.ignores(path, is_dir):
                return False
            if is_dir:
                child = self._nodes.get(sub)
                if child is None:
                    child = self._nodes[sub] = _Node(path, _probe(path), node)
                node = child
        return True


def path_sort_key(rel: str) -> list[str]:
    """Sort paths component by component, so a directory's files stay together."""
    return rel.split("/")
