"""Protected files committed to git: what no sandbox can hide.

A file committed once stays in the repository's objects, whatever the work tree holds now: `git show
REV:.env`, `git log -p` or `git cat-file` print it, and `.git` must stay readable for git to work at all.
So auger cannot keep a committed secret from commands; `auger secrets check` says which protected paths the
history holds (tracked now, or only in earlier commits), so the user can rotate the secret and rewrite or
expire the history.

Git runs with hooks and fsmonitor off (the commands used run neither, but a repository's config is
hostile input) and without a pager; a missing git or a directory that is not a repository is simply no answer.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from auger.secrets.protected import ProtectedFiles

GIT_TIMEOUT = 60.0  # seconds a history listing may take (a huge repository's log can take a while)
_SAFE = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "--no-pager")


@dataclass(frozen=True)
class Committed:
    """A protected path git holds: whether HEAD's index tracks it now, and a commit that has it."""

    path: str
    tracked: bool
    commit: str  # abbreviated: `git show COMMIT:PATH` prints it


def committed(protected: ProtectedFiles) -> tuple[list[Committed], str | None]:
    """The protected paths the repository at the project root has ever committed (every ref), and why none
    could be listed (None when git answered)."""
    root = protected.root
    listed = _git(root, "log", "--all", "--pretty=format:", "--name-only", "-z")
    if listed is None:
        return [], "not a git repository (or git is not installed)"
    tracked = set(_split(_git(root, "ls-files", "-z") or b""))
    paths = sorted({p for p in _split(listed) if protected.why(p) is not None} |
                   {p for p in tracked if protected.why(p) is not None})
    found = []
    for path in paths:
        last = _git(root, "log", "--all", "-1", "--format=%h", "--", f":(literal){path}")
        found.append(Committed(path, path in tracked, (last or b"").decode().strip()))
    return found, None


def _git(root: Path, *args: str) -> bytes | None:
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        proc = subprocess.run(["git", *_SAFE, *args], cwd=root, env=env, capture_output=True, timeout=GIT_TIMEOUT,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _split(data: bytes) -> list[str]:
    return [os.fsdecode(p).strip("\n") for p in data.split(b"\0") if p.strip(b"\n")]
