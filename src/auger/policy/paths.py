"""Containment: every path a tool touches must resolve inside the project root.

Resolution follows symlinks (a link pointing out is refused) and compares whole
path components, so `<root>-evil/x` is not mistaken for a child of `<root>`.

This answers "where is it?" for a path a command will use (a shell's working directory).
A file auger itself opens must not be checked here and then reopened by name; it is
opened beneath a root handle instead (`auger.policy.fs`).
"""

from __future__ import annotations

import os
from pathlib import Path


class PathEscape(ValueError):
    """A path that resolves outside the project root."""


def resolve_inside(root: Path, path: str | os.PathLike[str], base: Path | None = None) -> Path:
    """Resolve `path` (relative to `base`, default `root`) and refuse anything outside `root`.

    `root` must already be a resolved (realpath) directory.
    """
    raw = os.fspath(path)
    if "\x00" in raw:
        raise PathEscape(f"path contains a NUL byte: {raw!r}")
    candidate = Path(os.path.expanduser(raw)) if raw.startswith("~") else Path(raw)
    if not candidate.is_absolute():
        candidate = (base or root) / candidate
    real = Path(os.path.realpath(candidate))
    if not is_inside(root, real):
        raise PathEscape(
            f"path {raw!r} resolves to {real}, which is outside the project root {root}; "
            "only files inside the project can be accessed"
        )
    return real


def is_inside(root: Path, path: Path) -> bool:
    root_s, path_s = os.fspath(root), os.fspath(path)
    return path_s == root_s or os.path.commonpath([root_s, path_s]) == root_s


def display(root: Path, path: Path) -> str:
    """The path as the model should see it: relative to the root where possible."""
    try:
        rel = path.relative_to(root)
    except ValueError:
        return str(path)
    return str(rel) or "."
