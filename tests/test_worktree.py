"""Worktrees of real git repositories (and a plain directory): made, diffed, applied, removed."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
from pathlib import Path

import pytest
from tests.support.trees import sh

from auger.changes.snapshots import snapshot_dir
from auger.changes.worktree import (
    KEPT_PREFIX, WORKTREES, WorktreeError, create_worktree, list_worktrees, open_worktree,
)



@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    path.mkdir()
    return path


@pytest.fixture
def repo(project: Path) -> Path:
    """A git repository with a commit, an ignored directory, an uncommitted edit, a stash and a branch."""
    sh(project, """
        git init -q -b main
        printf 'one\\ntwo\\n' > a.txt; printf 'x\\n' > b.txt; printf '#!/bin/sh\\n' > run.sh
        mkdir -p src; printf 'print(1)\\n' > src/m.py
        printf 'build/\\n' > .gitignore
        git add -A; git commit -qm first
        git branch feature
        echo stashed >> b.txt; git stash -q
        echo 'local edit' >> a.txt
    """)
    return project


def user_state(root: Path) -> tuple[str, ...]:
    """Everything of the user's repository a worktree must never change."""
    index = hashlib.sha256((root / ".git" / "index").read_bytes()).hexdigest()
    return (index, sh(root, "git rev-parse HEAD; git symbolic-ref HEAD"), sh(root, "git branch -a"),
            sh(root, "git stash list"), sh(root, "git worktree list --porcelain"),
            sh(root, "git status --porcelain"), sh(root, "git for-each-ref"))


def test_starts_at_head_and_leaves_the_users_repository_alone(repo: Path, data: Path) -> None:
    before = user_state(repo)
    head = sh(repo, "git rev-parse HEAD").strip()
    wt = create_worktree(repo, name="agent", data_dir=data)
    assert wt.base_commit == head
    assert (data / WORKTREES) in wt.path.parents and repo not in wt.path.parents
    assert (wt.path / "a.txt").read_text() == "one\ntwo\n"  # HEAD's, not the uncommitted edit
    assert os.access(wt.path / "src" / "m.py", os.R_OK)
    assert sh(wt.path, "git rev-parse HEAD").strip() == head
    assert sh(wt.path, "git status --porcelain") == ""  # a clean checkout of its base
    assert wt.diff() == ""
    (wt.path / "b.txt").write_text("changed\n")
    sh(wt.path, "git add -A && git commit -qm 'the model commits'")  # git works in it; commits count as changes
    assert "+changed" in wt.diff()
    assert user_state(repo) == before
    wt.remove()
    assert not wt.path.exists() and not snapshot_dir(data, wt.path).exists()
    assert user_state(repo) == before


def test_diff_has_untracked_and_binary_files_not_ignored_ones(repo: Path, data: Path) -> None:
    wt = create_worktree(repo, name="d", data_dir=data)
    (wt.path / "new.txt").write_text("fresh\n")
    (wt.path / "blob.bin").write_bytes(b"\x00\x01\x02binary")
    (wt.path / "build").mkdir()
    (wt.path / "build" / "out.o").write_text("ignored")
    (wt.path / "src" / "m.py").unlink()
    text = wt.diff()
    assert "diff --git a/new.txt b/new.txt" in text and "+fresh" in text
    assert "Binary files /dev/null and b/blob.bin differ" in text
    assert "deleted file mode" in text and "a/src/m.py" in text
    assert "build/out.o" not in text and ".git" not in text


def test_apply_writes_changes_and_reports_conflicts_without_writing_them(repo: Path, data: Path) -> None:
    wt = create_worktree(repo, name="apply", data_dir=data)
    (wt.path / "a.txt").write_text("agent's a\n")  # the user edited a.txt since the base: a conflict
    (wt.path / "b.txt").write_text("agent's b\n")
    (wt.path / "src" / "m.py").unlink()
    (wt.path / "docs").mkdir()
    (wt.path / "docs" / "new.md").write_text("# new\n")
    os.chmod(wt.path / "run.sh", 0o755)
    os.symlink("b.txt", wt.path / "link")
    report = wt.apply_to(repo)
    assert report.conflicts == ["a.txt"]
    assert sorted(report.applied) == ["b.txt", "docs/new.md", "link", "run.sh", "src/m.py"]
    assert "1 conflict" in report.message and "a.txt" in report.message
    assert (repo / "a.txt").read_text() == "one\ntwo\nlocal edit\n"  # untouched
    assert (repo / "b.txt").read_text() == "agent's b\n"
    assert not (repo / "src" / "m.py").exists()
    assert (repo / "docs" / "new.md").read_text() == "# new\n"
    assert os.stat(repo / "run.sh").st_mode & 0o111
    assert os.readlink(repo / "link") == "b.txt"
    again = wt.apply_to(repo)  # applying twice changes nothing more and still names the conflict
    assert again.conflicts == ["a.txt"] and sorted(again.applied) == sorted(report.applied)


def test_a_file_the_project_also_made_identically_is_not_a_conflict(repo: Path, data: Path) -> None:
    wt = create_worktree(repo, name="same", data_dir=data)
    (wt.path / "both.txt").write_text("same\n")
    (wt.path / "other.txt").write_text("agent\n")
    (repo / "both.txt").write_text("same\n")
    (repo / "other.txt").write_text("user\n")
    report = wt.apply_to(repo)
    assert report.applied == ["both.txt"] and report.conflicts == ["other.txt"]
    assert (repo / "other.txt").read_text() == "user\n"


def test_snapshot_base_starts_from_the_uncommitted_state(repo: Path, data: Path) -> None:
    (repo / "untracked.txt").write_text("mine\n")
    os.chmod(repo / "b.txt", 0o600)
    wt = create_worktree(repo, base="snapshot", name="snap", data_dir=data)
    assert (wt.path / "a.txt").read_text() == "one\ntwo\nlocal edit\n"
    assert (wt.path / "untracked.txt").read_text() == "mine\n"
    assert os.stat(wt.path / "b.txt").st_mode & 0o777 == 0o600
    # HEAD is still the user's: the uncommitted state shows as changes there too
    assert sh(wt.path, "git rev-parse HEAD") == sh(repo, "git rev-parse HEAD")
    assert sh(wt.path, "git status --porcelain") == sh(repo, "git status --porcelain")
    assert wt.diff() == ""
    (wt.path / "a.txt").write_text("one\ntwo\nlocal edit\nagent line\n")
    report = wt.apply_to(repo)
    assert report.applied == ["a.txt"] and not report.conflicts  # the user's edit was the base
    assert (repo / "a.txt").read_text().endswith("agent line\n")


def test_a_plain_directory_is_refused_at_head_and_works_from_a_snapshot(project: Path, data: Path) -> None:
    (project / "notes.txt").write_text("n\n")
    with pytest.raises(WorktreeError, match="not the top directory of a git repository.*'snapshot'"):
        create_worktree(project, name="plain", data_dir=data)
    assert not any((data / WORKTREES).iterdir())  # nothing left behind
    wt = create_worktree(project, base="snapshot", name="plain", data_dir=data)
    assert (wt.path / "notes.txt").read_text() == "n\n"
    (wt.path / "notes.txt").write_text("m\n")
    assert "+m" in wt.diff()
    assert wt.apply_to(project).applied == ["notes.txt"]
    assert (project / "notes.txt").read_text() == "m\n"
    assert not (project / ".git").exists()


def test_hostile_names_and_bases(repo: Path, data: Path, tmp_path: Path) -> None:
    wt = create_worktree(repo, name="../../../evil name/..", data_dir=data)
    assert wt.path.parent.parent == data / WORKTREES
    for base in ("--output=/tmp/x", "no-such-rev", "HEAD:a.txt"):
        with pytest.raises(WorktreeError, match="is not a commit"):
            create_worktree(repo, base=base, name="b", data_dir=data)
    assert not (tmp_path / "x").exists()
    assert sh(repo, "git rev-parse feature").strip() == create_worktree(repo, base="feature", name="f",
                                                                         data_dir=data).base_commit


def test_apply_never_writes_through_a_symlink_in_the_project(repo: Path, data: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    wt = create_worktree(repo, name="link", data_dir=data)
    (wt.path / "docs").mkdir()
    (wt.path / "docs" / "x.md").write_text("x\n")
    os.symlink(outside, repo / "docs")  # planted in the project after the base
    report = wt.apply_to(repo)
    assert not list(outside.iterdir())
    assert report.applied == [] and len(report.failed) == 1 and report.failed[0].startswith("docs/x.md: ")


def test_dead_processes_worktrees_are_removed_and_kept_ones_stay(repo: Path, data: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = data / WORKTREES / f"auger-worktree-{dead.pid}-abc123"  # left by a killed process
    (stale / "project").mkdir(parents=True)
    stale_snapshots = snapshot_dir(data, stale / "project")
    stale_snapshots.mkdir(parents=True)
    kept = create_worktree(repo, name="session", data_dir=data, persistent=True)
    assert kept.path.parent.name.startswith(KEPT_PREFIX + "session-")
    assert not stale.exists() and not stale_snapshots.exists()
    live = create_worktree(repo, name="live", data_dir=data)
    assert kept.path.exists() and live.path.exists()
    assert {w.path for w in list_worktrees(data)} == {kept.path, live.path}
    assert open_worktree(kept.path, data) == kept
    assert open_worktree(repo, data) is None


def test_the_plain_interface_works_inside_an_event_loop(repo: Path, data: Path) -> None:
    async def agent() -> tuple[str, list[str]]:
        wt = create_worktree(repo, name="async", data_dir=data)
        (wt.path / "b.txt").write_text("from a coroutine\n")
        text = wt.diff()
        report = wt.apply_to(repo)
        wt.remove()
        return text, report.applied

    text, applied = asyncio.run(agent())
    assert "+from a coroutine" in text and applied == ["b.txt"]


def test_remove_copes_with_read_only_directories(repo: Path, data: Path) -> None:
    wt = create_worktree(repo, name="ro", data_dir=data)
    (wt.path / "locked").mkdir()
    (wt.path / "locked" / "f").write_text("f")
    os.chmod(wt.path / "locked", 0o500)
    wt.remove()
    assert not wt.path.parent.exists()
    with pytest.raises(WorktreeError, match="no longer exists"):
        wt.diff()


def test_what_the_worktree_cannot_carry_is_said_not_silently_dropped(repo: Path, data: Path) -> None:
    wt = create_worktree(repo, name="big", data_dir=data)
    (wt.path / "huge.bin").write_bytes(b"\0" * (11 << 20))  # over the snapshot limit
    (wt.path / "small.txt").write_text("s\n")
    report = wt.apply_to(repo)
    assert report.applied == ["small.txt"] and not (repo / "huge.bin").exists()
    assert "not applied: skipped huge.bin" in report.message
