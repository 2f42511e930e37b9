"""Which writes the file tools refuse because they would change a git repository's own machinery.

Git runs code named in `.git/config`, `.git/hooks` and friends the next time the user types a `git`
command, outside any sandbox. So no tool writes anywhere inside a git directory, or creates,
replaces or renames `.git` itself. Reading stays allowed. The check lives here, once, so every tool
that writes files (and any later patch tool) asks the same question.

The question is asked of the *resolved* location (symlinks followed inside the project), so an alias
`hooks -> .git/hooks` is caught, and of every spelling: `.GIT` is refused too, because on a
case-insensitive file system it is the same directory. A `.git` *file* (worktrees, submodules)
points at the real git directory; when that lies inside the project it is protected as well. So is a
directory of any name that git would take for a git directory (a bare repository: `HEAD` beside
`objects/` and `refs/`, or beside a `commondir`), since a git run there reads its config too.
"""

from __future__ import annotations

import os
from collections.abc import Collection

from auger.policy.fs import RootHandle, open_beneath, read_beneath

GIT = ".git"
_POINTER_MAX = 4096  # a `.git` file is one short line
# Code points HFS+ ignores in names, so `.g\u200cit` is `.git` there (git's own is_hfs_dotgit list).
_IGNORABLE = dict.fromkeys(map(ord, "\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                                    "\u206a\u206b\u206c\u206d\u206e\u206f\ufeff"))


def is_git_name(name: str) -> bool:
    """`.git` as some file system may read it: any case, HFS+ ignorable code points, NTFS trailing
    dots and spaces, and NTFS's short name `GIT~1`."""
    folded = name.translate(_IGNORABLE).lower().rstrip(". ")
    return folded in (GIT, "git~1")


def looks_like_git_dir(names: Collection[str]) -> bool:
    """Whether a directory with these entries is one git would use as a git directory (bare, or a
    linked worktree's)."""
    return "HEAD" in names and ("commondir" in names or ("objects" in names and "refs" in names))


def git_write_refusal(root: RootHandle, rel: str) -> str | None:
    """Why writing the resolved root-relative path `rel` is refused, or None if it is allowed."""
    parts = [p for p in rel.split("/") if p]
    if any(is_git_name(p) for p in parts):
        return (f"{rel} is inside a git directory (or is .git itself); the file tools do not write there, "
                "because git runs code configured in it outside any sandbox")
    for gitdir in _pointed_git_dirs(root, parts[:-1]):
        if rel == gitdir or rel.startswith(gitdir + "/"):
            return (f"{rel} is inside the git directory {gitdir} (named by a .git file); "
                    "the file tools do not write there")
    for depth in range(1, len(parts)):
        base = "/".join(parts[:depth])
        if _exists(root, f"{base}/HEAD") and looks_like_git_dir(
                ["HEAD", *(name for name in ("objects", "refs", "commondir") if _exists(root, f"{base}/{name}"))]):
            return (f"{rel} is inside {base}, which git would use as a git directory (a bare repository); "
                    "the file tools do not write there")
    return None


def _pointed_git_dirs(root: RootHandle, dirs: list[str]) -> list[str]:
    """Root-relative git directories named by `.git` files in the root or in `dirs` (the chain of
    directories down to the target), with their common dirs; those outside the root are left to
    the sandbox, since the file tools cannot write outside the root anyway."""
    found: list[str] = []
    for depth in range(len(dirs) + 1):
        base = "/".join(dirs[:depth])
        pointer = _read_small(root, f"{base}/{GIT}" if base else GIT)
        if pointer is None or not pointer.startswith("gitdir:"):
            continue
        gitdir = _inside(root, base, pointer[len("gitdir:"):].strip())
        if gitdir is None:
            continue
        found.append(gitdir)
        common = _read_small(root, f"{gitdir}/commondir")
        if common:
            shared = _inside(root, gitdir, common.strip())
            if shared is not None:
                found.append(shared)
    return found


def _exists(root: RootHandle, rel: str) -> bool:
    try:
        os.close(open_beneath(root, rel, os.O_PATH, follow=False))
    except (OSError, ValueError):
        return False
    return True


def _read_small(root: RootHandle, rel: str) -> str | None:
    """The first line of a small regular file beneath the root, or None."""
    try:
        text = read_beneath(root, rel, limit=_POINTER_MAX).decode("utf-8", "replace")
    except (OSError, ValueError):
        return None
    return text.splitlines()[0] if text else None


def _inside(root: RootHandle, base: str, target: str) -> str | None:
    """`target` (relative to `base`, or absolute) resolved beneath the root; None if it is outside."""
    path = target if os.path.isabs(target) else (f"{base}/{target}" if base else target)
    try:
        where = root.resolve(path)
    except (OSError, ValueError):
        return None
    os.close(where.parent_fd)
    return where.rel
