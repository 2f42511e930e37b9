"""A command cannot make the user's next `git` (run outside any sandbox) execute planted code:
.git cannot be renamed, replaced or re-pointed, and its config, hooks and info are read-only.
Judged by running the real git on the host afterwards."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.redteam_sandbox import shell


def _repo(project):
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "init"],
                   cwd=project, check=True)


def _host_git_runs_planted_code(project) -> bool:
    """What the user does next, outside the sandbox: status, a checkout, a commit."""
    pwned = project / "PWNED"
    env_cmds = [["git", "status"], ["git", "checkout", "-q", "-b", "next"], ["git", "add", "-A"],
                ["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "x"]]
    for cmd in env_cmds:
        subprocess.run(cmd, cwd=project, capture_output=True, timeout=30)
    return pwned.exists()


def _attacks(project):
    hook = "printf '#!/bin/sh\\ntouch %s/PWNED\\n'" % project
    evil_config = f"[core]\\n\\tfsmonitor = touch {project}/PWNED\\n"
    return {
        "hook": f"{hook} > .git/hooks/post-checkout; chmod +x .git/hooks/post-checkout; "
                f"{hook} > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit",
        "config": f"git config core.fsmonitor 'touch {project}/PWNED' || printf '{evil_config}' >> .git/config",
        "hooks-path": f"mkdir -p h && {hook} > h/post-checkout && chmod +x h/post-checkout && "
                      "git config core.hooksPath h",
        "rename": f"mv .git .git-old && cp -r .git-old .git && {hook} > .git/hooks/post-checkout && "
                  "chmod +x .git/hooks/post-checkout",
        "replace-by-file": "cp -r .git evil.git; "
                          f"rm -rf .git; echo 'gitdir: {project}/evil.git' > .git; "
                          f"{hook} > evil.git/hooks/post-checkout; chmod +x evil.git/hooks/post-checkout",
        "commondir": f"cp -r .git evil && printf '{evil_config}' >> evil/config && echo {project}/evil > .git/commondir",
        "info": f"echo x > f; mkdir -p .git/info; echo '* filter=evil' > .git/info/attributes; "
                f"git config filter.evil.clean 'touch {project}/PWNED'",
    }


ATTACK_NAMES = ["hook", "config", "hooks-path", "rename", "replace-by-file", "commondir", "info"]


@pytest.mark.parametrize("name", ATTACK_NAMES)
def test_git_cannot_be_made_to_run_planted_code_under_bwrap(project, server, name):
    _repo(project)
    outs = shell(project, server, "bwrap", _attacks(project)[name])
    assert not outs[0].startswith("Not run"), outs[0]
    assert not _host_git_runs_planted_code(project), outs[0]
    assert (project / ".git").is_dir()  # not renamed, not replaced (its contents may be deleted: a destructive
    # command, which the classifier does not let run without asking)


@pytest.mark.parametrize("name", ATTACK_NAMES)
def test_control_the_same_attacks_work_unconfined(project, server, name):
    _repo(project)
    outs = shell(project, server, "off", _attacks(project)[name])
    assert _host_git_runs_planted_code(project), outs[0]


def test_under_landlock_auto_mode_asks_before_changes_in_a_repository(project, server):
    """Landlock cannot make part of the writable project read-only, so .git is not protected:
    auto mode then behaves as safe mode (headless: the change is not run)."""
    _repo(project)
    outs = shell(project, server, "landlock", _attacks(project)["hook"], approve_all=False)
    assert outs[0].startswith("Not run"), outs[0]
    assert not _host_git_runs_planted_code(project)


def test_commits_still_work_in_the_sandbox(project, server):
    _repo(project)
    (project / "a.txt").write_text("a\n")
    outs = shell(project, server, "bwrap",
                 "git add a.txt && git -c user.email=t@t -c user.name=t commit -q -m add && git log --oneline | wc -l")
    assert outs[0].startswith("Exit code: 0") and "\n2" in outs[0], outs[0]
