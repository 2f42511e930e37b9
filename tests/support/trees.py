"""Project trees for the tests: run git or a shell script in one with a fixed identity, and take the exact
state of its files (bytes and modes) to compare before and after."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from pathlib import Path

IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


def git(root: Path, *args: str) -> str:
    """`git -C root ARGS…` with the caller's environment and a test identity; its stdout (fails loudly)."""
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True,
                          env={**os.environ, **IDENTITY}).stdout


def sh(root: Path, script: str) -> str:
    """A bash script run in `root` with a minimal environment (no user git config); its stdout."""
    env = {"PATH": os.environ["PATH"], "HOME": str(root.parent / "home"), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "u", "GIT_AUTHOR_EMAIL": "u@x", "GIT_COMMITTER_NAME": "u",
           "GIT_COMMITTER_EMAIL": "u@x", "LC_ALL": "C"}
    done = subprocess.run(["bash", "-euc", script], cwd=root, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def tree_state(root: Path) -> dict[str, tuple[str, int]]:
    """Every file and link outside .git: (sha256 of its bytes or link target, its full mode)."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files + [d for d in dirs if os.path.islink(os.path.join(dirpath, d))]:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            data = os.readlink(path).encode() if stat.S_ISLNK(st.st_mode) else Path(path).read_bytes()
            out[os.path.relpath(path, root)] = (hashlib.sha256(data).hexdigest(), st.st_mode)
    return out
