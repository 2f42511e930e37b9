"""Commits and refs written without git (auger.changes.git_objects) are what git itself writes, and a
repository git would write differently (SHA-256 objects) is left to git."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from auger.changes import git_objects
from auger.changes.snapshots import REF_PREFIX, SnapshotStore

ENV = {"PATH": os.environ["PATH"], "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
       "GIT_AUTHOR_NAME": "auger", "GIT_AUTHOR_EMAIL": "auger@localhost",
       "GIT_COMMITTER_NAME": "auger", "GIT_COMMITTER_EMAIL": "auger@localhost"}


def git(repo: Path, *args: str, stdin: bytes | None = None, **env: str) -> str:
    done = subprocess.run(["git", "--git-dir", str(repo), *args], input=stdin, capture_output=True,
                          env={**ENV, **env}, check=True)
    return done.stdout.decode().strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo.git"
    subprocess.run(["git", "init", "-q", "--bare", "--template=", str(path)], env=ENV, check=True)
    return path


def test_a_commit_written_directly_is_the_commit_git_writes(repo):
    tree = git(repo, "mktree", stdin=b"")  # the empty tree, stored
    message = "auger s1 turn 1: before\n\nauger-modes: {\"files\": {}}\n"
    when = 1_764_000_000
    ours = git_objects.write_object(repo, "commit", git_objects.commit_body(tree, message, "auger", "auger@localhost",
                                                                             when))
    theirs = git(repo, "commit-tree", tree, "-F", "-", stdin=message.encode(),
                 GIT_AUTHOR_DATE=f"{when} +0000", GIT_COMMITTER_DATE=f"{when} +0000")
    assert ours == theirs
    assert git(repo, "cat-file", "-t", ours) == "commit"
    assert oct((repo / "objects" / ours[:2] / ours[2:]).stat().st_mode & 0o777) == "0o444"  # read-only, as git's
    git_objects.write_ref(repo, REF_PREFIX + ours, ours)
    assert git(repo, "for-each-ref", "--format=%(objectname) %(committerdate:unix)", REF_PREFIX) == f"{ours} {when}"
    git(repo, "fsck", "--strict", "--no-dangling")  # raises on any malformed object or ref


def test_writing_an_object_again_or_over_a_stale_ref_lock_succeeds(repo):
    tree = git(repo, "mktree", stdin=b"")
    body = git_objects.commit_body(tree, "same\n", "auger", "auger@localhost", 1)
    first = git_objects.write_object(repo, "commit", body)
    assert git_objects.write_object(repo, "commit", body) == first
    lock = repo / (REF_PREFIX + first + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("left by a killed git\n")
    git_objects.write_ref(repo, REF_PREFIX + first, first)
    assert not lock.exists()
    assert git(repo, "rev-parse", REF_PREFIX + first) == first
    assert not [p for p in (repo / "objects").rglob("tmp_obj_*")]


def test_a_repository_with_extensions_is_not_plain(repo, tmp_path):
    assert git_objects.plain(repo)
    sha256 = tmp_path / "sha256.git"
    made = subprocess.run(["git", "init", "-q", "--bare", "--object-format=sha256", str(sha256)], env=ENV,
                          capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"this git cannot make a SHA-256 repository: {made.stderr.decode().strip()}")
    assert not git_objects.plain(sha256)
    assert not git_objects.plain(tmp_path / "missing.git")


def test_snapshots_in_a_repository_git_would_write_differently_are_made_by_git(tmp_path):
    """A snapshot repository with SHA-256 objects (made by hand, or by a future default) still gets
    commits git can read: written by git, not directly."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("one\n")
    snapdir = tmp_path / "snap"
    made = subprocess.run(["git", "init", "-q", "--bare", "--template=", "--object-format=sha256", str(snapdir)],
                          env=ENV, capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"this git cannot make a SHA-256 repository: {made.stderr.decode().strip()}")
    store = SnapshotStore(project, snapdir)
    snap = asyncio.run(store.snapshot("first"))
    assert len(snap.commit) == 64
    assert git(snapdir, "cat-file", "-t", snap.commit) == "commit"
    assert asyncio.run(store.list()) == [snap.commit]


def test_a_snapshot_commit_is_read_back_by_git_with_its_message_and_ref(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("one\n")
    snapdir = tmp_path / "snap"
    store = SnapshotStore(project, snapdir)
    snap = asyncio.run(store.snapshot("the message"))
    assert git(snapdir, "rev-parse", f"{snap.commit}^{{tree}}") == snap.tree
    assert git(snapdir, "log", "-1", "--format=%an <%ae>|%s", snap.commit) == "auger <auger@localhost>|the message"
    assert asyncio.run(store.list()) == [snap.commit]
    fresh = SnapshotStore(project, snapdir)  # another process: the trailers are read back from git
    assert asyncio.run(fresh.modes(snap))[1] == {}
    git(snapdir, "fsck", "--strict", "--no-dangling")
