"""Protected files as the file tools see them: refused by name or by inode, unless this one call was allowed.

Every file tool (read_file, write_file, edit_file, apply_patch, grep on a file, list_dir/glob/grep on a
protected directory) asks `refuse_protected` about the path it resolved beneath the root — after links and
`..` are resolved, so a symlink to `.env` is `.env` — and about the path as the model wrote it, and, once
the file is open, about its inode (a hard link or a renamed protected file). The walks (list_dir, glob,
grep) leave protected entries out and say how many. A refusal is a `ProtectedFileRefused`: the tool runtime
tells the user and may ask to allow this one call (`ToolContext.protected_grant`).
"""

from __future__ import annotations

import os
from typing import Iterable

from auger.secrets.protected import ProtectedFiles, Reason, default_protected
from auger.tools.base import ProtectedFileRefused, ToolContext


def protection(ctx: ToolContext) -> ProtectedFiles:
    """The session's protected files of its root (the defaults and `.augerignore` when it was given none)."""
    found = ctx.state.protected
    if found is None or found.root != ctx.root.resolve():
        found = ctx.state.protected = default_protected(ctx.root)
    return found


def reason_for(ctx: ToolContext, rel: str, st: os.stat_result | None = None) -> Reason | None:
    """Why the call may not touch `rel` (root-relative), or None (not protected, or granted for this call)."""
    rel = os.path.normpath(rel) if rel else ""
    if rel in ctx.protected_grant:
        return None
    return protection(ctx).check("" if rel == "." else rel, st)


def refuse_protected(ctx: ToolContext, tool: str, paths: Iterable[tuple[str, os.stat_result | None]]) -> None:
    """Raise ProtectedFileRefused naming every protected path of `paths` ((root-relative path, stat or None))."""
    reasons = [r for r in (reason_for(ctx, rel, st) for rel, st in paths) if r is not None]
    if reasons:
        raise ProtectedFileRefused(tool, list({r.path: r for r in reasons}.values()))


class WalkFilter:
    """What a listing or a search leaves out: protected paths by name (a directory with all it holds), and the
    hard links and renamed protected files the last scan found; counted, for the note at the end."""

    def __init__(self, ctx: ToolContext) -> None:
        self.protected = protection(ctx)
        self.found = set(self.protected.look_again().paths)
        self.grant = ctx.protected_grant
        self.left_out: set[str] = set()

    def excludes(self, rel: str, is_dir: bool = False) -> bool:
        """Whether the entry at `rel` (root-relative) is left out; counted (once per protected path) if so."""
        if rel in self.grant:
            return False
        if rel in self.found:
            self.left_out.add(rel)
            return True
        reason = self.protected.why(rel, is_dir, refresh=False)
        if reason is None:
            return False
        self.left_out.add(reason.matched)
        return True

    def excludes_file(self, rel: str) -> bool:
        """`excludes` for a file about to be searched, and by its inode too (one renamed or linked since)."""
        if self.excludes(rel):
            return True
        try:
            st = os.lstat(self.protected.root / rel)
        except OSError:
            return False
        if rel not in self.grant and self.protected.check(rel, st, refresh=False) is not None:
            self.left_out.add(rel)
            return True
        return False

    def note(self) -> str:
        return skipped_note(len(self.left_out))


def skipped_note(count: int) -> str:
    """The line a listing or a search ends with when it left protected files out."""
    if not count:
        return ""
    noun = "file or directory" if count == 1 else "files or directories"
    return (f"({count} protected {noun} left out: the agent may not read them; "
            "`auger secrets check` lists them)")
