"""History cannot be destroyed behind git's back: deleting or rewriting inside `.git` with anything but
git is destructive (auto mode asks; headless, it is not run), and under bubblewrap the repository's
pack files cannot be deleted or rewritten even by a command the classifier cannot see into.
Judged by the repository afterwards (its object files, `git fsck`, `git log`), with controls."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from auger.policy.effects import DESTRUCTIVE, analyze_command
from tests.support.redteam_sandbox import KINDS, shell


def _git(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=project,
                          capture_output=True, text=True, timeout=60)


def _repo(project: Path) -> None:
    """History in a pack (what a clone has) and in loose objects (recent commits)."""
    _git(project, "init", "-q")
    for n in range(3):
        (project / f"f{n}.txt").write_text(f"{n}\n")
        _git(project, "add", "-A")
        _git(project, "commit", "-q", "-m", f"c{n}")
    assert _git(project, "gc", "-q").returncode == 0
    (project / "late.txt").write_text("late\n")
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "late")


def _objects(project: Path) -> set[str]:
    return {str(p.relative_to(project)) for p in (project / ".git" / "objects").rglob("*") if p.is_file()}


def _intact(project: Path) -> bool:
    return _git(project, "fsck", "--full").returncode == 0 and _git(project, "log", "--oneline").stdout.count("\n") == 4


@pytest.mark.parametrize("kind", [*KINDS, "off"])
def test_deleting_objects_by_hand_is_not_run_without_approval(project, server, kind):
    _repo(project)
    before = _objects(project)
    assert any("/pack/" in p for p in before) and any("/pack/" not in p for p in before)
    outs = shell(project, server, kind, "rm -f .git/objects/*/*", approve_all=False)
    if kind == "off":  # unsandboxed, auto asks anyway; headless, the command is not run either
        assert outs[0].startswith("Not run"), outs[0]
    else:
        assert outs[0].startswith("Not run") and "destructive" in outs[0], outs[0]
    assert _objects(project) == before and _intact(project)


COMMANDS = [
    "rm -f .git/objects/*/*", "cd .git && rm -f objects/pack/*", "rm -f .g?t/objects/*/*", "echo x > .git/HEAD",
    "truncate -s 0 .git/index", "mv .git/objects/pack /tmp/packs", "find .git -name '*.pack' -exec rm {} +",
    "sed -i s/x/y/ .git/packed-refs", "cp evil .git/hooks/pre-commit", "chmod 000 .git/refs/heads/main",
]
NOT_DESTRUCTIVE = ["git gc", "cat .git/HEAD", "ls -la .git/objects", "du -sh .git", "cp .git/config backup.cfg",
                   "rm -f .gitignore"]


def test_the_classifier_calls_changes_inside_dot_git_destructive(project):
    _repo(project)
    for command in COMMANDS:
        result = analyze_command(command, project)
        assert result.effect == DESTRUCTIVE, (command, result)
    for command in NOT_DESTRUCTIVE:
        result = analyze_command(command, project)
        assert result.effect != DESTRUCTIVE, (command, result)


UNSEEN = "python3 -c \"import glob, os; [os.unlink(p) for p in glob.glob('.git/objects/pack/*')]\""


@pytest.mark.parametrize("kind", ["bwrap", "off"])
def test_pack_files_survive_a_deletion_the_classifier_cannot_see(project, server, kind):
    """Approved (or misjudged) as an ordinary change, the deletion still fails under bubblewrap: each
    pack file is a read-only mount point. (Landlock cannot protect part of the project; in a git
    repository auto mode asks before any change there.)"""
    _repo(project)
    packs = {p for p in _objects(project) if "/pack/" in p}
    outs = shell(project, server, kind, UNSEEN)
    left = {p for p in _objects(project) if "/pack/" in p}
    if kind == "off":  # control: the payload does delete them
        assert not left, outs[0]
    else:
        assert left == packs and "busy" in outs[0], outs[0]
        assert _git(project, "fsck", "--full").returncode == 0


def test_commits_still_work_under_bwrap(project, server):
    _repo(project)
    outs = shell(project, server, "bwrap", "echo more > more.txt && git add more.txt && "
                 "git -c user.email=t@t -c user.name=t commit -q -m more && git log --oneline | wc -l")
    assert outs[0].startswith("Exit code: 0") and outs[0].rstrip().endswith("5"), outs[0]
    assert _git(project, "fsck", "--full").returncode == 0
