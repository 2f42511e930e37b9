"""A repository a command creates cannot make the user's next `git` there (outside any sandbox) run
planted code: `git init sub` plus a hook, a hooks path, an fsmonitor, a separate git dir, a `.git`
at the root of a project that had none, a hook planted by a later command or by a background one
just before the session ends. Each is judged by running the real git on the host afterwards, with
the same attacks unconfined as the control; the user approved every command (the sandbox is what
is tested, not the classifier)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.harness import run_session
from tests.support.mock_openai import Reply, ToolCall
from tests.support.redteam_sandbox import KINDS, shell

HOOK = "printf '#!/bin/sh\\ntouch {pwned}\\n' > {path} && chmod +x {path}"


def _attacks(project: Path) -> dict[str, tuple[str, list[str]]]:
    """name -> (the repository the user works in afterwards, the commands)."""
    pwned = project / "PWNED"
    return {
        "hook": ("sub", ["git init -q sub && " + HOOK.format(pwned=pwned, path="sub/.git/hooks/pre-commit")]),
        "hooks-path": ("sub", ["git init -q sub && mkdir sub/h && " + HOOK.format(pwned=pwned, path="sub/h/pre-commit")
                               + " && git -C sub config core.hooksPath h"]),
        "fsmonitor": ("sub", [f"git init -q sub && git -C sub config core.fsmonitor 'touch {pwned}'"]),
        "separate-git-dir": ("sub", ["git init -q --separate-git-dir=.store sub && "
                                     + HOOK.format(pwned=pwned, path=".store/hooks/pre-commit")]),
        "project-root": (".", ["git init -q && " + HOOK.format(pwned=pwned, path=".git/hooks/pre-commit")]),
        "later-command": ("sub", ["git init -q sub", HOOK.format(pwned=pwned, path="sub/.git/hooks/pre-commit")]),
        "include": ("sub", [f"git init -q sub && printf '[core]\\n\\tfsmonitor = touch {pwned}\\n' > sub/evil.cfg && "
                            "git -C sub config include.path ../evil.cfg"]),
        "moved-in": ("deep/sub", ["mkdir -p build deep && git init -q build/sub && "
                                  + HOOK.format(pwned=pwned, path="build/sub/.git/hooks/pre-commit"), "mv build/sub deep/"]),
    }


def _user_commits(repo: Path) -> None:
    """What the user does next in that repository, outside the sandbox."""
    for cmd in (["git", "status"], ["git", "add", "-A"],
                ["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "x"]):
        subprocess.run(cmd, cwd=repo, capture_output=True, timeout=30)


@pytest.mark.parametrize("kind", [*KINDS, "off"])
@pytest.mark.parametrize("name", ["hook", "hooks-path", "fsmonitor", "separate-git-dir", "project-root",
                                  "later-command", "include", "moved-in"])
def test_a_repository_made_in_the_session_runs_no_planted_code(project, server, kind, name):
    where, commands = _attacks(project)[name]
    outs = shell(project, server, kind, *commands)
    assert all("Exit code: 0" in out for out in outs), outs  # the plant itself worked
    _user_commits(project / where)
    if kind == "off":  # control: the user's git runs the planted code
        assert (project / "PWNED").exists(), outs
        return
    assert not (project / "PWNED").exists(), outs
    assert any("[sandbox]" in out and "removed" in out for out in outs), outs  # the model is told
    log = subprocess.run(["git", "log", "--oneline"], cwd=project / where, capture_output=True, text=True)
    assert log.returncode == 0 and log.stdout.strip(), log.stderr  # the repository still works


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["hook", "later-command", "moved-in"])
def test_without_inotify_the_change_times_find_them(project, server, kind, name, monkeypatch):
    """Where inotify is unavailable (or out of watches), each scan reads the directories whose change
    time moved: the same attacks are defused."""
    from auger.policy.dirnotify import DirNotify

    monkeypatch.setattr(DirNotify, "open", classmethod(lambda cls: None))
    where, commands = _attacks(project)[name]
    outs = shell(project, server, kind, *commands)
    assert all("Exit code: 0" in out for out in outs), outs
    _user_commits(project / where)
    assert not (project / "PWNED").exists(), outs


@pytest.mark.parametrize("kind", KINDS)
def test_a_hook_planted_by_a_background_command_is_removed_when_the_session_ends(project, server, kind):
    pwned = project / "PWNED"
    plant = "git init -q sub && " + HOOK.format(pwned=pwned, path="sub/.git/hooks/pre-commit") + " && sleep 30"
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": plant, "background": True})]),
               Reply(text="done", delay=1.0))  # the session ends while the command still runs
    run_session(project, server, "go", overrides=(f"sandbox={kind}", "mode=auto", "approve_all=true"))
    assert (project / "sub" / ".git").is_dir()
    _user_commits(project / "sub")
    assert not pwned.exists()


@pytest.mark.parametrize("kind", KINDS)
def test_git_in_a_new_repository_still_works_in_the_session(project, server, kind):
    outs = shell(project, server, kind,
                 "git init -q sub && cd sub && echo a > a && git add a && "
                 "git -c user.email=t@t -c user.name=t commit -q -m one && git log --oneline | wc -l",
                 "cd sub && git remote add origin https://example.com/x.git && git config user.name someone && "
                 "git remote get-url origin && git config user.name")
    assert outs[0].startswith("Exit code: 0") and outs[0].rstrip().endswith("1"), outs[0]
    assert "[sandbox]" not in outs[0] + outs[1], outs  # nothing that runs code: nothing removed
    assert "https://example.com/x.git" in outs[1] and "someone" in outs[1], outs[1]


def test_the_file_tools_do_not_write_in_a_bare_repository(project):
    """git run inside a bare repository reads its config (a pager, an fsmonitor), whatever its name."""
    from tests.support.redteam import scripted_session, tool_outputs

    subprocess.run(["git", "init", "-q", "--bare", "store.git"], cwd=project, check=True)
    config = (project / "store.git" / "config").read_bytes()
    run, _ = scripted_session(project, [
        ToolCall("write_file", {"path": "store.git/config", "content": "[core]\n\tpager = touch PWNED\n"}),
        ToolCall("write_file", {"path": "store.git/hooks/post-update", "content": "#!/bin/sh\ntouch PWNED\n"})])
    outs = tool_outputs(run)
    assert all("git would use as a git directory" in out for out in outs), outs
    assert (project / "store.git" / "config").read_bytes() == config
    assert not (project / "store.git" / "hooks" / "post-update").exists()


@pytest.mark.parametrize("kind", [*KINDS, "off"])
def test_a_git_file_pointing_out_of_the_project_is_removed(project, server, kind):
    """A git dir outside the project (the session's temp dir, here) named by a new `.git` file."""
    pwned = project / "PWNED"
    outs = shell(project, server, kind, "git init -q --separate-git-dir=$TMPDIR/evil sub && "
                 + HOOK.format(pwned=pwned, path="$TMPDIR/evil/hooks/pre-commit") + " && git -C sub status --short")
    assert "Exit code: 0" in outs[0], outs[0]
    if kind != "off":
        assert not (project / "sub" / ".git").exists() and "removed sub/.git" in outs[0], outs[0]
    _user_commits(project / "sub")
    assert pwned.exists() == (kind == "off")  # (the control: the user's commit there runs the hook)


@pytest.mark.parametrize("kind", KINDS)
def test_a_walk_longer_than_a_command_waits_is_told_with_the_next_command(project, server, kind, monkeypatch):
    """A command's result waits for the walk after it only briefly (a large project): the walk goes on
    meanwhile, and what it finds is told once, with a later command."""
    from auger.policy import gitsweep

    monkeypatch.setattr(gitsweep, "WALK_WAIT", 0.0)
    outs = shell(project, server, kind,
                 "git init -q sub && " + HOOK.format(pwned=project / "PWNED", path="sub/.git/hooks/pre-commit"),
                 "sleep 0.5; test -e sub/.git/hooks/pre-commit; echo present=$?")
    told = [out for out in outs if "removed hooks pre-commit" in out]
    assert len(told) == 1, outs
    assert "present=1" in outs[1], outs[1]  # gone while the next command ran
    _user_commits(project / "sub")
    assert not (project / "PWNED").exists()
