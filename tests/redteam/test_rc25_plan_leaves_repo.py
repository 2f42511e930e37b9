"""A session leaves the user's repository as it found it: a plan-mode session (and a safe or auto one
that runs no git command) changes nothing in `.git` — no file, no directory, not even an empty mount
point for the sandbox. Judged by every entry of `.git` (type, mode, bytes) before and after."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from tests.support.redteam_sandbox import KINDS, shell


def _repo(project: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    (project / "README").write_text("hello\n")
    subprocess.run(["git", "add", "README"], cwd=project, check=True)
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "init"],
                   cwd=project, check=True)
    assert not (project / ".git" / "modules").exists() and not (project / ".git" / "worktrees").exists()


def _state(git: Path) -> dict[str, tuple[str, int, bytes | None]]:
    """Every entry below `git`: its type, permission bits and (for files and links) its bytes."""
    state: dict[str, tuple[str, int, bytes | None]] = {}
    for dirpath, dirnames, filenames in os.walk(git):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = os.lstat(path)
            rel = str(path.relative_to(git))
            if stat.S_ISLNK(st.st_mode):
                state[rel] = ("link", 0, os.readlink(path).encode())
            elif stat.S_ISDIR(st.st_mode):
                state[rel] = ("dir", stat.S_IMODE(st.st_mode), None)
            else:
                state[rel] = ("file", stat.S_IMODE(st.st_mode), path.read_bytes())
    return state


SESSIONS = {
    "plan": ("plan", ["git status", "git log --oneline", "ls -la .git", "cat README"]),
    "safe": ("safe", ["ls -la", "cat README", "echo note > notes.txt"]),
    "auto": ("auto", ["echo note > notes.txt", "mkdir -p build && touch build/out", "ls -la .git"]),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("session", SESSIONS)
def test_a_session_leaves_dot_git_byte_identical(project, server, kind, session):
    _repo(project)
    before = _state(project / ".git")
    mode, commands = SESSIONS[session]
    outs = shell(project, server, kind, *commands, mode=mode)
    if session == "plan":
        assert "Exit code: 0" in outs[0], outs[0]  # the commands did run, in the read-only sandbox
    else:
        assert all(out.startswith("Exit code: 0") for out in outs), outs
    after = _state(project / ".git")
    assert sorted(set(after) - set(before)) == [], "entries added to .git"
    assert sorted(set(before) - set(after)) == [], "entries removed from .git"
    assert {k for k in before if before[k] != after[k]} == set(), "entries changed in .git"
