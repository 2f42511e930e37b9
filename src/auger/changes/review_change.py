"""The change a review looks at, as git describes it, read without changing anything.

The uncommitted work (staged, unstaged and untracked files against HEAD), a branch (from its merge
base with BRANCH to HEAD) or one commit (against its first parent). Git runs in the scrubbed environment
the snapshots use (no user or system configuration, no hooks, no fsmonitor, no optional index writes)
and without external diff programs or textconv filters, so reading a change never runs what a
configuration names and never touches the user's index, HEAD or stash. Untracked files are diffed one
by one against /dev/null (`--no-index`), never added to any index.
"""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

MAX_DIFF_CHARS = 400_000  # the diff sent to the model; past it the model is told which files to read
MAX_UNTRACKED = 300  # untracked files diffed; more are listed by name only
MAX_UNTRACKED_BYTES = 1 << 20  # a larger untracked file is named, not shown
GIT_TIMEOUT = 60.0  # seconds for one git command
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


class ReviewError(Exception):
    """The change cannot be read (not a git repository, an unknown branch or commit); one line."""




@dataclass(frozen=True)
class ReviewTarget:
    """What to review: `uncommitted` work, a branch against `base`, or one `commit`."""

    kind: Literal["uncommitted", "base", "commit"] = "uncommitted"
    ref: str | None = None

    def describe(self) -> str:
        if self.kind == "base":
            return f"changes on this branch since it left {self.ref}"
        if self.kind == "commit":
            return f"commit {self.ref}"
        return "uncommitted changes (staged, unstaged and untracked) against HEAD"


@dataclass
class Change:
    """The diff under review. `ranges` maps each file the diff touches to the line ranges of its new
    side that the hunks show; `revision` is the commit whose files the lines refer to (None: the
    working tree)."""

    target: ReviewTarget
    text: str
    ranges: dict[str, list[tuple[int, int]]]
    revision: str | None
    omitted: list[str] = field(default_factory=list)  # files named but not shown (too many, too big, cut)
    truncated: bool = False  # the diff was longer than MAX_DIFF_CHARS and is cut

    @property
    def empty(self) -> bool:
        return not self.ranges and not self.omitted


class GitReader:
    """Read-only git in the project, in the scrubbed environment of snapshots."""

    def __init__(self, root: Path, home: str) -> None:
        from auger.changes.snapshots import GIT_HOOKS_OFF, scrubbed_git_env

        self.root = root
        self.env = scrubbed_git_env(Path(home))
        self.argv = ["git"] + [arg for item in (*GIT_HOOKS_OFF, "core.quotePath=false", "color.ui=false",
                                                "core.attributesFile=/dev/null") for arg in ("-c", item)]

    async def run(self, *args: str, ok: tuple[int, ...] = (0,)) -> bytes:
        proc = await asyncio.create_subprocess_exec(
            *self.argv, *args, cwd=self.root, env=self.env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), GIT_TIMEOUT)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise ReviewError(f"git {args[0]} took longer than {GIT_TIMEOUT:.0f} s") from None
        if proc.returncode not in ok:
            lines = err.decode("utf-8", "replace").strip().splitlines()
            said = next((x for x in lines if x.startswith(("fatal:", "error:"))), lines[-1] if lines else "")
            raise ReviewError(f"git {args[0]} failed: {said or f'exit status {proc.returncode}'}")
        return out

    async def commit(self, ref: str, what: str) -> str:
        """The commit `ref` names, or a ReviewError naming what was asked for."""
        if not ref or ref.startswith("-") or any(c in ref for c in "\0\n"):
            raise ReviewError(f"{what} {ref!r} is not a branch or commit name")
        try:
            return (await self.run("rev-parse", "--verify", "--quiet", "--end-of-options",
                                   f"{ref}^{{commit}}")).decode().strip()
        except ReviewError:
            raise ReviewError(f"{what} {ref!r} names no commit in this repository") from None

    async def empty_tree(self) -> str:
        return (await self.run("hash-object", "-t", "tree", "/dev/null")).decode().strip()

    async def diff(self, *args: str) -> bytes:
        return await self.run("diff", "--no-color", "--no-ext-diff", "--no-textconv", "--relative", "-M",
                              *args)


async def collect_change(root: Path, target: ReviewTarget) -> Change:
    """Read the diff `target` names in the git repository at (or above) `root`, changing nothing."""
    with tempfile.TemporaryDirectory(prefix="auger-review-home-") as home:
        git = GitReader(Path(root), home)
        try:
            await git.run("rev-parse", "--git-dir")
        except ReviewError:
            raise ReviewError(f"{root} is not in a git repository: review reads the change from git") from None
        omitted: list[str] = []
        if target.kind == "commit":
            commit = await git.commit(target.ref or "", "--commit")
            parents = (await git.run("rev-list", "--parents", "-n", "1", commit)).decode().split()[1:]
            text = await git.diff(parents[0] if parents else await git.empty_tree(), commit)
            revision: str | None = commit
        elif target.kind == "base":
            base = await git.commit(target.ref or "", "--base")
            head = await git.commit("HEAD", "HEAD")
            fork = (await git.run("merge-base", base, head, ok=(0, 1))).decode().strip()
            if not fork:
                raise ReviewError(f"{target.ref} and HEAD have no common history")
            text, revision = await git.diff(fork, head), head
        else:
            try:
                head = await git.commit("HEAD", "HEAD")
            except ReviewError:  # a repository without commits yet: everything is new
                head = await git.empty_tree()
            text, revision = await git.diff(head) + await _untracked(git, omitted), None
    decoded = text.decode("utf-8", "replace")
    truncated = len(decoded) > MAX_DIFF_CHARS
    if truncated:  # whole files' diffs only, where possible; the others are named
        cut = decoded.rfind("\ndiff --git ", 0, MAX_DIFF_CHARS)
        shown = decoded[:cut + 1] if cut > 0 else decoded[:MAX_DIFF_CHARS]
        omitted += [p for p in _ranges(decoded[len(shown):]) if p not in _ranges(shown)]
        decoded = shown
    ranges = _ranges(decoded)
    return Change(target, decoded, {**{p: [] for p in omitted}, **ranges}, revision, omitted, truncated)


async def _untracked(git: GitReader, omitted: list[str]) -> bytes:
    """Untracked files (not ignored) as diffs against /dev/null; only regular files and symlinks
    (a FIFO would block the reader), at most MAX_UNTRACKED of them, none over MAX_UNTRACKED_BYTES."""
    import stat

    listed = (await git.run("ls-files", "-z", "-o", "--exclude-standard")).split(b"\0")
    out: list[bytes] = []
    for raw in filter(None, listed):
        path = os.fsdecode(raw)
        if path.endswith("/"):
            continue  # a nested repository
        try:
            st = os.lstat(git.root / path)
        except OSError:
            continue
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            continue
        if len(out) >= MAX_UNTRACKED or st.st_size > MAX_UNTRACKED_BYTES:
            omitted.append(path)
            continue
        out.append(await git.run("diff", "--no-color", "--no-ext-diff", "--no-textconv", "--no-index", "--",
                                 "/dev/null", path, ok=(0, 1)))
    return b"".join(out)


def _ranges(diff: str) -> dict[str, list[tuple[int, int]]]:
    """File -> the new-side line ranges its hunks show (a deleted file: no range)."""
    files: dict[str, list[tuple[int, int]]] = {}
    current: str | None = None
    old: str | None = None
    for line in diff.splitlines():
        if line.startswith("diff --git "):  # a mode change or a binary file has no ---/+++ lines
            current = old = None
            if (named := _header_path(line[len("diff --git "):])) is not None:
                files.setdefault(named, [])
        elif line.startswith("--- "):
            old = _diff_path(line[4:])
        elif line.startswith("+++ "):
            current = _diff_path(line[4:]) or old
            if current is not None:
                files.setdefault(current, [])
        elif current is not None and (m := _HUNK.match(line)):
            start, count = int(m.group(1)), int(m.group(2) or 1)
            if count:
                files[current].append((start, start + count - 1))
    return files


def _header_path(rest: str) -> str | None:
    """The path of a `diff --git a/P b/P` header when both sides name the same path (else None: a
    rename, which has ---/+++ lines naming its sides)."""
    if rest.startswith('"'):
        first, sep, second = rest[1:].partition('" "')
        if sep and second.endswith('"') and first[2:] == second[2:-1]:
            return _unquote(first[2:])
        return None
    n = (len(rest) - 5) // 2
    path = rest[2:2 + n]
    return path if n > 0 and rest == f"a/{path} b/{path}" else None


def _diff_path(spec: str) -> str | None:
    """The path of a `---`/`+++` line without its a/ or b/ prefix (git C-quotes unusual names)."""
    spec = spec.rstrip("\t")
    if spec == "/dev/null":
        return None
    if spec.startswith('"') and spec.endswith('"'):
        spec = _unquote(spec[1:-1])
    return spec[2:] if spec[:2] in ("a/", "b/") else spec


def _unquote(text: str) -> str:
    escapes = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
    out = bytearray()
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in escapes:
                out.append(escapes[nxt])
                i += 2
                continue
            if text[i + 1:i + 4].isdigit():
                out.append(int(text[i + 1:i + 4], 8) & 0xFF)
                i += 4
                continue
        out += ch.encode("utf-8", "surrogateescape")
        i += 1
    return os.fsdecode(bytes(out))
