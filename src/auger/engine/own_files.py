"""Files this session created, and the one thing they buy: deleting them needs no extra approval.

A model that writes a scratch file and removes it again should not make the user approve the
removal in safe mode: the file did not exist before the session. The exception is kept narrow:

* only `rm [-f] PATH…` as the whole command line (no other command, operator or redirection) and
  `apply_patch` patches made only of `*** Delete File:` lines qualify;
* each path, resolved beneath the project root, must be a regular file (not a link) that a file tool
  of this session created (write_file, apply_patch Add File), with the bytes it had right after that
  tool call (a SHA-256 check): a file the user or a command changed since is theirs again;
* a denial stays a denial; this only turns an "ask" into "allow".
"""

from __future__ import annotations

import hashlib
import os
import shlex
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable

from auger.policy.paths import PathEscape, resolve_inside
from auger.protocol.items import CreatedFile, Item

if TYPE_CHECKING:
    from auger.engine.tool_runtime import PlannedCall
    from auger.policy.types import Classification
    from auger.tools.base import SessionToolState

_RM_FLAGS = {"-f", "--"}


class OwnFiles:
    """The session's created files and their hashes right after creation (an `after_mutation` hook),
    recorded as `created_file` items so a resumed session still knows them."""

    def __init__(self, root: Path, state: SessionToolState, record: Callable[[str, Item], Awaitable[None]],
                 items: Iterable[Item] = ()) -> None:
        self.root = root
        self.state = state
        self._record = record
        self.hashes: dict[Path, str] = {}
        for item in items:  # a resumed session: what it created before
            if isinstance(item, CreatedFile):
                path = root / item.path
                self.hashes[path] = item.sha256
                state.created_files.add(path)

    async def after_mutation(self, call: PlannedCall) -> None:
        """Hash and record the files the call just created (the tools add them to `state.created_files`)."""
        for path in sorted(self.state.created_files - self.hashes.keys()):
            digest = _digest(path)
            if digest is not None:
                self.hashes[path] = digest
                await self._record(call.turn_id, CreatedFile(str(path.relative_to(self.root)), digest))

    def deletes_only_own(self, tool: str, args: dict[str, Any], c: Classification) -> bool:
        """Whether this call does nothing but delete unchanged files this session created."""
        if c.outside_paths:
            return False
        paths = _rm_paths(args, c) if tool == "shell" else _patch_deletions(args) if tool == "apply_patch" else None
        return paths is not None and bool(paths) and all(self._own(raw) for raw in paths)

    def _own(self, raw: str) -> bool:
        try:
            path = resolve_inside(self.root, raw)
            st = os.lstat(self.root / raw)
        except (PathEscape, OSError, ValueError):
            return False
        if not stat.S_ISREG(st.st_mode) or path != self.root / os.path.normpath(raw):
            return False  # a link, or a path spelled through one: exact paths only
        expected = self.hashes.get(path)
        return expected is not None and _digest(path) == expected


def _rm_paths(args: dict[str, Any], c: Classification) -> list[str] | None:
    """The paths of a command line that is exactly `rm [-f] [--] PATH…`, else None."""
    if args.get("workdir") or len(c.commands) != 1:
        return None
    try:
        words = shlex.split(args["command"])
    except ValueError:
        return None
    if tuple(words) != tuple(c.commands[0]) or not words or words[0] != "rm":
        return None  # operators, redirections or expansions: something more than one rm
    paths = [w for w in words[1:] if w not in _RM_FLAGS]
    if any(p.startswith("-") or any(ch in p for ch in "*?[]$`~{}") for p in paths):
        return None
    return paths


def _patch_deletions(args: dict[str, Any]) -> list[str] | None:
    from auger.changes.apply_patch import DeleteFile, PatchError, parse_patch

    try:
        ops = parse_patch(args.get("patch", ""))
    except PatchError:
        return None
    if not all(isinstance(op, DeleteFile) for op in ops):
        return None
    return [op.path for op in ops]


def _digest(path: Path) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        h = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
        return h.hexdigest()
    finally:
        os.close(fd)
