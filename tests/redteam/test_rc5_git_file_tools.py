"""Root cause 5, in the file tools: write_file/edit_file must not change a git directory.

The payloads plant code that the user's next `git commit` runs outside any sandbox (a hook, a
`core.hooksPath`). Each attack goes through a real session (the mock model calls the tool); the
effect is judged by running real git afterwards: the marker file the hook would create must not
exist. Each payload has a control: written directly, the same hook does run.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.mock_openai import ToolCall
from tests.support.redteam import sandbox, scripted_session  # noqa: F401 - fixture

HOOK = "#!/bin/sh\ntouch \"$RC5_MARKER\"\n"


def git(repo: Path, *args: str, marker: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
           "RC5_MARKER": str(marker or "/nonexistent/marker")}
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True)


def commit_runs_hook(repo: Path) -> bool:
    """Effect check: does the next `git commit` run code planted by the model?"""
    marker = repo.parent / "hook-ran"
    marker.unlink(missing_ok=True)
    git(repo, "commit", "--allow-empty", "-q", "-m", "probe", marker=marker)
    return marker.exists()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    assert git(root, "init", "-q").returncode == 0
    (root / "a.txt").write_text("a\n")
    git(root, "add", "a.txt")
    git(root, "commit", "-q", "-m", "init")
    return root.resolve()


def test_control_planted_hooks_do_run(repo: Path) -> None:
    """The payloads are real: a hook or hooksPath written directly runs at the next commit."""
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(HOOK)
    hook.chmod(0o755)
    assert commit_runs_hook(repo)
    hook.unlink()
    (repo / "evil").mkdir()
    (repo / "evil" / "pre-commit").write_text(HOOK)
    (repo / "evil" / "pre-commit").chmod(0o755)
    with open(repo / ".git" / "config", "a") as f:
        f.write("[core]\n\thooksPath = evil\n")
    assert commit_runs_hook(repo)


def _attack(repo: Path, sandbox: str, *calls: ToolCall) -> str:
    run, sent = scripted_session(repo, list(calls), sandbox=sandbox)
    assert run.ended.reason == "complete"
    return sent


def test_hooks_cannot_be_planted(sandbox, repo: Path) -> None:
    (repo / "alias").symlink_to(".git", target_is_directory=True)
    (repo / "hooks-alias").symlink_to(".git/hooks", target_is_directory=True)
    (repo / "hook-file").symlink_to(".git/hooks/pre-commit")  # dangling until the hook exists
    sent = _attack(repo, sandbox,
                   ToolCall("write_file", {"path": "hook-file", "content": HOOK}),
                   ToolCall("write_file", {"path": ".git/hooks/pre-commit", "content": HOOK}),
                   ToolCall("write_file", {"path": "alias/hooks/pre-commit", "content": HOOK}),
                   ToolCall("write_file", {"path": "alias/hooks/new/dir/x", "content": HOOK}),
                   ToolCall("write_file", {"path": "hooks-alias/../refs/new/x", "content": HOOK}),
                   ToolCall("write_file", {"path": "hooks-alias/pre-commit", "content": HOOK}),
                   ToolCall("write_file", {"path": "./sub/../.git/hooks/pre-commit", "content": HOOK}),
                   ToolCall("write_file", {"path": str(repo / ".git/hooks/pre-commit"), "content": HOOK}))
    assert "inside a git directory" in sent
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    assert not (repo / "sub").exists()
    assert not (repo / ".git" / "hooks" / "new").exists() and not (repo / ".git" / "refs" / "new").exists()
    assert not commit_runs_hook(repo)


def test_config_cannot_be_edited_or_replaced(sandbox, repo: Path) -> None:
    (repo / "evil").mkdir()
    (repo / "evil" / "pre-commit").write_text(HOOK)
    (repo / "evil" / "pre-commit").chmod(0o755)
    config = (repo / ".git" / "config").read_text()
    sent = _attack(repo, sandbox,
                   ToolCall("read_file", {"path": ".git/config"}),  # reading stays allowed
                   ToolCall("edit_file", {"path": ".git/config", "old_string": "[core]",
                                          "new_string": "[core]\n\thooksPath = evil"}),
                   ToolCall("write_file", {"path": ".git/config", "content": config + "[core]\n\thooksPath = evil\n"}),
                   ToolCall("write_file", {"path": ".GIT/config", "content": "[core]\n\thooksPath = evil\n"}),
                   ToolCall("write_file", {"path": ".git/info/attributes", "content": "* filter=x\n"}))
    assert "repositoryformatversion" in sent  # read_file of .git/config worked
    assert (repo / ".git" / "config").read_text() == config
    assert not (repo / ".GIT").exists() and not (repo / ".git" / "info" / "attributes").exists()
    assert not commit_runs_hook(repo)


def test_dot_git_itself_cannot_be_replaced(sandbox, repo: Path, tmp_path: Path) -> None:
    evil = tmp_path / "evil-gitdir"
    assert git(tmp_path, "init", "-q", "--bare", str(evil)).returncode == 0
    (evil / "hooks" / "pre-commit").write_text(HOOK)
    (evil / "hooks" / "pre-commit").chmod(0o755)
    git(repo, "worktree", "add", "-q", "wt")
    wt_pointer = (repo / "wt" / ".git").read_text()
    _attack(repo, sandbox,
            ToolCall("write_file", {"path": ".git", "content": f"gitdir: {evil}\n"}),
            ToolCall("write_file", {"path": "wt/.git", "content": f"gitdir: {evil}\n"}),
            ToolCall("edit_file", {"path": "wt/.git", "old_string": "gitdir:", "new_string": f"gitdir: {evil}\n#"}),
            ToolCall("write_file", {"path": "wt/.Git", "content": f"gitdir: {evil}\n"}))
    assert (repo / ".git").is_dir() and (repo / "wt" / ".git").read_text() == wt_pointer
    assert not (repo / "wt" / ".Git").exists()
    assert not commit_runs_hook(repo) and not commit_runs_hook(repo / "wt")


def test_git_dir_named_by_a_dot_git_file_is_protected(sandbox, tmp_path: Path) -> None:
    """A repository whose git dir lives elsewhere in the project (`git init --separate-git-dir`)."""
    project = tmp_path / "project"
    (project / "store").mkdir(parents=True)
    assert git(project, "init", "-q", "--separate-git-dir", str(project / "store" / "repo")).returncode == 0
    project = project.resolve()
    hooks = project / "store" / "repo" / "hooks"
    sent = _attack(project, sandbox,
                   ToolCall("write_file", {"path": "store/repo/hooks/pre-commit", "content": HOOK}),
                   ToolCall("write_file", {"path": "store/repo/config", "content": "[core]\n\thooksPath = x\n"}))
    assert "named by a .git file" in sent
    assert not (hooks / "pre-commit").exists()
    assert "hooksPath" not in (project / "store" / "repo" / "config").read_text()
    assert not commit_runs_hook(project)
    # control: the same write made directly would have run at the next commit
    (hooks / "pre-commit").write_text(HOOK)
    (hooks / "pre-commit").chmod(0o755)
    assert commit_runs_hook(project)


@pytest.mark.parametrize("spelling", [".GIT", ".Git", ".git.", ".git ", ".g\u200cit", "GIT~1"])
def test_spellings_other_file_systems_read_as_dot_git_are_refused(repo: Path, tmp_path: Path, spelling: str) -> None:
    """On case-insensitive, HFS+ or NTFS file systems these names are the .git directory."""
    import asyncio

    from auger.tools.base import SessionToolState, ToolContext, ToolError
    from auger.tools.files import WRITE_FILE

    ctx = ToolContext(root=repo, state=SessionToolState(scratch_dir=tmp_path / "s"), call_id="c",
                      archive=None)  # type: ignore[arg-type]
    with pytest.raises(ToolError, match="git directory"):
        asyncio.run(WRITE_FILE.handler({"path": f"{spelling}/hooks/pre-commit", "content": HOOK}, ctx))
    assert not (repo / spelling).exists()
    assert not commit_runs_hook(repo)
