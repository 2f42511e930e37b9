"""auger's own files, which no command may read, and what of them a session's commands still need.

auger's config, data and cache directories (all one directory under `AUGER_HOME`) and its session
database hold what no project's commands should see: every project's conversations (`sessions.db`),
tokens in `config.toml`, snapshots of other projects (files deleted since included). The sandbox
hides them (`SandboxPolicy.hidden`). Shown again inside them: the session's own writable dirs (a
worktree under the data dir is one; the sandbox shows those itself) and `exposed_paths`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from auger.policy.paths import is_inside

DB_SIDE_FILES = ("-wal", "-shm", "-journal")  # SQLite's, beside the database


def hidden_paths(dirs: Mapping[str, Path], db_path: str | None) -> tuple[Path, ...]:
    """The config, data and cache dirs, and a session database kept elsewhere (`--db`) with its side files."""
    paths = [Path(dirs["config"]), Path(dirs["data"]), Path(dirs["cache"])]
    if db_path:
        db = Path(db_path).expanduser()
        paths += [db, *(db.with_name(db.name + suffix) for suffix in DB_SIDE_FILES)]
    return tuple(dict.fromkeys(paths))


def exposed_paths(dirs: Mapping[str, Path], root: Path, hidden: tuple[Path, ...]) -> tuple[Path, ...]:
    """What commands read inside the hidden dirs: the user's skills (the instructions name their
    SKILL.md files, and the scripts beside them are meant to be run), and, when the project itself is
    a tree auger made in its data dir (a worktree), the object stores its repository borrows through
    git's alternates — without them git there cannot read a commit."""
    exposed = [Path(dirs["config"]) / "skills"]
    real_root = Path(os.path.realpath(root))
    if any(is_inside(Path(os.path.realpath(h)), real_root) for h in hidden):
        exposed += _alternates(real_root / ".git")
    return tuple(exposed)


def _alternates(git: Path) -> list[Path]:
    """The object directories a repository borrows (`objects/info/alternates`, one per line)."""
    try:
        lines = (git / "objects" / "info" / "alternates").read_text("utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    found = []
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        path = Path(line) if os.path.isabs(line) else git / "objects" / line
        if path.name == "objects" and path.is_dir():
            found.append(path)
    return found
