"""Files this session created, and the one thing they buy: deleting them needs no extra approval.

A model that writes a scratch file and removes it again should not make the user approve the
removal in safe mode: the file did not exist before the session. The exception is kept narrow:

* only `rm [-f] PATH…` as the whole command line (no other command, operator or redirection) and
  `apply_patch` patches made only of `*** Delete File:` lines qualify;
* each path, resolved beneath the project root, must be a regular file (not a link) that a file tool
  of this session created (write_file, apply_patch Add File), with the bytes it had right after that
  tool call (a SHA-256 check): a file the user or a command changed since is theirs again;
* a later rewrite by the session's own file tools (write_file, edit_file, apply_patch) keeps the file
  the session's, but only if it was still unchanged just before that call;
* once such a file is gone it is forgotten (recorded, so a resumed session forgets it too): the same
  bytes made again at that path by a command or the user are not the session's;
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
    from auger.engine.turn.tool_runtime import PlannedCall
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
        self._rewriting: dict[str, set[Path]] = {}  # call id -> own, unchanged files its file tool rewrites
        for item in items:  # a resumed session: what it created before (an empty hash: since deleted)
            if isinstance(item, CreatedFile):
                path = root / item.path
                if item.sha256:
                    self.hashes[path] = item.sha256
                    state.created_files.add(path)
                else:
                    self.hashes.pop(path, None)
                    state.created_files.discard(path)

    async def before_mutation(self, call: PlannedCall) -> None:
        """Note the session's own files, still unchanged, that this call's file tool is about to rewrite."""
        rewritten = {p for p in map(self._exact, _rewritten_paths(call.tool, call.args)) if p is not None
                     and p in self.hashes and _digest(p) == self.hashes[p]}
        if rewritten:
            self._rewriting[call.call_id] = rewritten

    async def after_mutation(self, call: PlannedCall) -> None:
        """Hash and record the files the call just created (the tools add them to `state.created_files`)
        or rewrote while they were the session's; forget own files that are gone."""
        rewritten = self._rewriting.pop(call.call_id, set())
        for path in sorted((self.state.created_files - self.hashes.keys()) | rewritten):
            digest = _digest(path)
            if digest is not None:
                self.hashes[path] = digest
                await self._record(call.turn_id, CreatedFile(str(path.relative_to(self.root)), digest))
        for path in sorted(p for p in self.hashes if not os.path.lexists(p)):
            del self.hashes[path]
            self.state.created_files.discard(path)
            await self._record(call.turn_id, CreatedFile(str(path.relative_to(self.root)), ""))

    def deletes_only_own(self, tool: str, args: dict[str, Any], c: Classification) -> bool:
        """Whether this call does nothing but delete unchanged files this session created."""
        if c.outside_paths:
            return False
        paths = _rm_paths(args, c) if tool == "shell" else _patch_deletions(args) if tool == "apply_patch" else None
        return paths is not None and bool(paths) and all(self._own(raw) for raw in paths)

    def _own(self, raw: str) -> bool:
        path = self._exact(raw)
        try:
            if path is None or not stat.S_ISREG(os.lstat(path).st_mode):
                return False
        except OSError:
            return False
        expected = self.hashes.get(path)
        return expected is not None and _digest(path) == expected

    def _exact(self, raw: str) -> Path | None:
        """`raw` beneath the root, when it is spelled without a link on the way (exact paths only)."""
        try:
            path = resolve_inside(self.root, raw)
        except (PathEscape, OSError, ValueError):
            return None
        return path if path == self.root / os.path.normpath(raw) else None


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


def _rewritten_paths(tool: str, args: dict[str, Any]) -> list[str]:
    """The files a file-tool call writes in place (none for other tools, or a patch that does not parse)."""
    if tool in ("write_file", "edit_file") and isinstance(args.get("path"), str):
        return [args["path"]]
    if tool != "apply_patch":
        return []
    from auger.changes.apply_patch import PatchError, UpdateFile, parse_patch

    try:
        return [op.path for op in parse_patch(args.get("patch", "")) if isinstance(op, UpdateFile) and not op.move_to]
    except PatchError:
        return []


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
