"""Writable roots: directories outside the project that the user let commands write beneath for the rest of
a session (Codex's `additional_writable_roots`).

A command that touches paths outside the project asks, in every mode. Its approval may offer one more
answer: allow writes beneath the directory that holds those paths, for the rest of the session. Chosen,
the directory is the session's like the project is: a later command whose outside paths all lie beneath
it decides as if they were inside (auto mode runs it unasked, safe mode asks as for any change), and the
sandbox binds it writable for commands that may write.

The directory offered is where the command's outside paths are (each one's directory, or the path itself
when it is one; their common ancestor when there are several), resolved, so a symlink cannot make a
harmless-looking name stand for another place. Some directories are never offered and never granted
(`refusal`), whatever a model, a client or a stored session asks: `/`, the home directory or any
directory holding it, any directory holding the project (and so its `.git`) or auger's own files, or lying
inside them, a git directory, a credential path the sandbox hides, and the kernel's pseudo-filesystems.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from auger.policy.paths import is_inside
from auger.policy.types import Classification

PSEUDO = (Path("/proc"), Path("/sys"), Path("/dev"))


def offered_root(c: Classification) -> Path | None:
    """The directory an approval of `c` may offer as a writable root, before `refusal` judges it; None when
    one of its outside paths could not be resolved."""
    if not c.outside_paths or len(c.outside_real) != len(c.outside_paths) or not all(c.outside_real):
        return None
    dirs = [_directory(Path(real)) for real in c.outside_real]
    return Path(os.path.commonpath([str(d) for d in dirs]))


def _directory(path: Path) -> Path:
    """`path` if it is a directory, else the nearest existing directory above it (a file a command
    creates, in a directory it may create too)."""
    while not path.is_dir() and path != path.parent:
        path = path.parent
    return path


def refusal(root: Path, *, projects: Sequence[Path], homes: Sequence[Path], own: Iterable[Path],
            hidden: Iterable[Path] = ()) -> str | None:
    """Why `root` can never be a writable root (None: it can). `projects`: the project root (and the copy
    the tools work on in pending mode); `own`: auger's config, data and cache dirs and its database;
    `homes`: the user's home directories; `hidden`: the credential paths the sandbox hides."""
    if not root.is_absolute() or Path(os.path.realpath(root)) != root:
        return f"{root} is not a resolved absolute path"
    if not root.is_dir():
        return f"{root} is not a directory"
    if root == Path("/"):
        return "/ is the whole filesystem"
    if any(is_inside(root, home) for home in homes):
        return f"{root} is the home directory or holds it"
    if any(part == ".git" for part in root.parts):
        return f"{root} is inside a git directory, whose hooks and config git runs"
    for project in projects:
        if is_inside(root, project) or is_inside(project, root):
            return f"{root} holds the project or lies inside it"
    for path in own:
        if is_inside(root, path) or is_inside(path, root):
            return f"{root} holds auger's own files or lies inside them"
    for path in hidden:
        if is_inside(path, root):
            return f"{root} lies inside {path}, which the sandbox hides"
    for path in PSEUDO:
        if is_inside(path, root):
            return f"{root} is a kernel filesystem"
    return None


def covered(roots: Sequence[Path], c: Classification) -> bool:
    """Whether every outside path of `c` lies beneath one of `roots` (never when one could not be resolved)."""
    if not roots or not c.outside_paths or len(c.outside_real) != len(c.outside_paths):
        return False
    return all(real and any(is_inside(root, Path(real)) for root in roots) for real in c.outside_real)
