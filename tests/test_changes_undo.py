"""Snapshots, turn diffs and undo on real trees with real git and real shell commands."""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest
from tests.support.trees import sh
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auger.changes.apply_patch import apply_patch
from auger.changes.diff import changes, diff_since, summary, unified_diff, unrecorded_changes
from auger.changes.snapshots import SnapshotStore, snapshot_dir
from auger.changes.undo import UndoRefused, restore, undo
from auger.policy.fs import RootHandle



def tree(root: Path) -> dict[str, tuple[str, int]]:
    """Every path but .git's contents: content hash (or link target) and full mode."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == root:
            dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                what = "link:" + os.readlink(p)
            elif stat.S_ISDIR(st.st_mode):
                what = "dir"
            else:
                what = hashlib.sha256(p.read_bytes()).hexdigest()
            out[str(p.relative_to(root))] = (what, st.st_mode)
    return out


def git_state(root: Path) -> dict[str, object]:
    """Everything of the user's repository undo must leave alone."""
    index = (root / ".git/index").read_bytes()  # first: nothing below may rewrite it
    return {
        "index": index,
        "status": sh(root, "git --no-optional-locks status --porcelain=v1 --untracked-files=all"),
        "head": sh(root, "git rev-parse HEAD"),
        "branches": sh(root, "git branch -a -v"),
        "stash": sh(root, "git stash list"),
        "reflog": sh(root, "git reflog --all"),
        "config": (root / ".git/config").read_bytes(),
        "refs": sh(root, "git for-each-ref"),
    }


def make_project(root: Path, git: bool) -> None:
    root.mkdir()
    (root.parent / "home").mkdir(exist_ok=True)
    (root / "src/pkg").mkdir(parents=True)
    (root / "src/pkg/mod.py").write_text("def f():\n    return 1\n")
    (root / "src/pkg/util.py").write_text("X = 1\nY = 2\n")
    (root / "README.md").write_text("hello\nworld\n")
    (root / "doomed.txt").write_text("delete me\n")
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "run.sh").chmod(0o755)
    (root / "data.bin").write_bytes(bytes(range(256)) * 4)
    (root / "win.txt").write_bytes(b"a\r\nb\r\n")
    (root / ".gitattributes").write_text("* text=auto eol=lf\n")
    (root / ".gitignore").write_text("build/\n*.log\n")
    (root / "build").mkdir()
    (root / "build/out.o").write_bytes(b"\0obj")
    (root / "app.log").write_text("log\n")
    (root / "link").symlink_to("src/pkg/mod.py")
    if git:
        sh(root, "git init -q -b main && git add -A && git commit -qm init && git branch feature "
                 "&& echo stashed >> README.md && git stash -q && echo staged > staged.txt && git add staged.txt "
                 "&& echo unstaged >> src/pkg/util.py")


def store_for(tmp_path: Path, root: Path, **kw) -> SnapshotStore:
    return SnapshotStore(root, snapshot_dir(tmp_path / "data", root), **kw)


TURN_PATCH = """*** Begin Patch
*** Update File: src/pkg/mod.py
@@ def f():
-    return 1
+    return 2
*** Add File: src/pkg/new.py
+NEW = True
*** Delete File: doomed.txt
*** Update File: win.txt
*** Move to: docs/win.txt
@@
 a
-b
+B
*** End Patch
"""


def turn(root: Path, git_mv: bool) -> None:
    """A turn that changes the tree through apply_patch and through shell commands."""
    handle = RootHandle(root)
    try:
        apply_patch(handle, TURN_PATCH)
    finally:
        handle.close()
    sh(root, "sed -i 's/world/WORLD/' README.md && rm run.sh && chmod +x src/pkg/util.py "
             "&& mv src/pkg/util.py src/pkg/helpers.py && printf '\\x00\\x01changed' > data.bin "
             "&& mkdir -p gen/a/b gen/c && for i in $(seq 1 300); do echo $i > gen/a/b/f$i.txt; done "
             "&& echo c > gen/c/x && ln -sf README.md link && echo more > build/extra.o")
    if git_mv:
        sh(root, "git mv .gitignore .gitignore2 && git mv .gitignore2 .gitignore && git mv README.md README.rst")


@pytest.mark.parametrize("git, git_mv", [(True, False), (True, True), (False, False)],
                         ids=["git-repo", "git-repo-git-mv", "plain-dir"])
def test_undo_restores_exact_tree_and_leaves_git_alone(tmp_path: Path, git: bool, git_mv: bool) -> None:
    root = tmp_path / "proj"
    make_project(root, git)
    store = store_for(tmp_path, root)
    before_tree = tree(root)
    git_before_turn = git_state(root) if git else {}
    before = asyncio.run(store.snapshot("turn start"))
    turn(root, git_mv)
    after = asyncio.run(store.snapshot("turn end"))
    after_tree = tree(root)
    assert after_tree != before_tree
    git_before_undo = git_state(root) if git else {}

    result = asyncio.run(undo(store, before, after))
    expected = dict(before_tree)
    expected["build/extra.o"] = after_tree["build/extra.o"]  # ignored: never snapshotted, never touched
    assert tree(root) == expected
    assert "gen" in result.removed_dirs and "docs" in result.removed_dirs
    if git:
        now = git_state(root)
        # `git mv` in the turn changed the user's index; undo restores files, never the index
        assert now == (git_before_undo | {"status": now["status"]} if git_mv else git_before_turn)

    asyncio.run(restore(store, result.redo, expected=before))  # redo
    assert tree(root) == after_tree
    if git:
        assert git_state(root) == git_before_undo


def test_user_repository_untouched_by_snapshots(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    make_project(root, git=True)
    state = git_state(root)
    store = store_for(tmp_path, root)
    first = asyncio.run(store.snapshot())
    (root / "src/pkg/mod.py").write_text("changed\n")
    second = asyncio.run(store.snapshot())
    asyncio.run(restore(store, first))
    assert git_state(root) == state
    assert {first.commit, second.commit} <= set(asyncio.run(store.list()))  # kept by refs
    assert not (root / ".git/auger-index").exists() and store.snapdir not in root.parents


def test_sessions_opened_together_take_one_first_snapshot(tmp_path: Path) -> None:
    """Several sessions of one project warming up at once (each with its own store): the first takes the
    first snapshot, the others find it taken once they hold the repository, and take none."""
    root = tmp_path / "proj"
    make_project(root, git=False)
    stores = [store_for(tmp_path, root) for _ in range(4)]

    async def warm_all() -> None:
        await asyncio.gather(*(s.first_snapshot(f"session {i}: session start") for i, s in enumerate(stores)))

    asyncio.run(warm_all())
    assert len(asyncio.run(stores[0].list())) == 1 and stores[0].indexed


def test_conflicting_edit_after_turn_refuses_and_changes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    make_project(root, git=False)
    store = store_for(tmp_path, root)
    before_tree = tree(root)
    before = asyncio.run(store.snapshot())
    turn(root, git_mv=False)
    after = asyncio.run(store.snapshot())
    (root / "src/pkg/mod.py").write_text("the user's own edit\n")
    (root / "user-new.txt").write_text("mine\n")
    (root / "docs/win.txt").chmod(0o600)  # a bare chmod is a change too
    edited = tree(root)
    with pytest.raises(UndoRefused) as info:
        asyncio.run(undo(store, before, after))
    assert info.value.conflicts == ["docs/win.txt", "src/pkg/mod.py", "user-new.txt"]
    assert "src/pkg/mod.py" in str(info.value) and "nothing was changed" in str(info.value)
    assert tree(root) == edited
    asyncio.run(undo(store, before, after, force=True))
    expected = dict(before_tree)
    expected["build/extra.o"] = edited["build/extra.o"]
    assert tree(root) == expected


def test_diff_reports_renames_modes_binary(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    make_project(root, git=False)
    store = store_for(tmp_path, root)
    before = asyncio.run(store.snapshot())
    sh(root, "mv src/pkg/mod.py src/pkg/moved.py && chmod +x README.md && printf 'x\\0y' > data.bin "
             "&& echo added > new.txt && rm doomed.txt")
    after = asyncio.run(store.snapshot())
    found = {c.path: c for c in asyncio.run(changes(store, before, after))}
    assert found["src/pkg/moved.py"].kind == "renamed" and found["src/pkg/moved.py"].old_path == "src/pkg/mod.py"
    assert found["README.md"].kind == "mode changed"
    assert (found["README.md"].old_mode, found["README.md"].new_mode) == ("100644", "100755")
    assert found["data.bin"].binary and found["data.bin"].added_lines is None
    assert found["new.txt"].kind == "added" and found["new.txt"].added_lines == 1
    assert found["doomed.txt"].kind == "deleted"
    text = asyncio.run(unified_diff(store, before, after))
    assert "rename from src/pkg/mod.py" in text and "old mode 100644" in text
    assert "Binary files a/data.bin and b/data.bin differ" in text and "+added" in text
    assert "\x1b[" not in text and "\x1b[" in asyncio.run(unified_diff(store, before, after, color=True))
    assert "R src/pkg/mod.py -> src/pkg/moved.py" in summary(list(found.values()))


def test_snapshot_contents_and_limits(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    make_project(root, git=True)
    (root / ".git/info/exclude").write_text("secret.txt\n")
    (root / "secret.txt").write_text("s\n")
    (root / "huge.bin").write_bytes(b"x" * 3000)
    (root / "many").mkdir()
    for i in range(30):
        (root / f"many/{i}.txt").write_text(str(i))
    store = store_for(tmp_path, root, max_file_bytes=2000, max_dir_files=20)
    snap = asyncio.run(store.snapshot())
    paths = set(asyncio.run(store.entries(snap)))
    assert "src/pkg/mod.py" in paths and "staged.txt" in paths and "link" in paths
    assert {"app.log", "secret.txt"} <= paths  # ignored files git lists one by one: recorded
    assert not {"build/out.o", "huge.bin"} & paths  # an ignored directory never is
    assert asyncio.run(store.unrecorded(snap)) == {"build/": ["dir"]}
    assert not any(p.startswith((".git/", "many/")) for p in paths)
    assert any("huge.bin" in w and "limit" in w for w in snap.warnings)
    assert any("30 new files in many/" in w for w in snap.warnings)
    entries = asyncio.run(store.entries(snap))
    assert entries["run.sh"].mode == "100755" and entries["link"].mode == "120000"
    blob = asyncio.run(store.blobs([entries["win.txt"].oid]))[entries["win.txt"].oid]
    assert blob == b"a\r\nb\r\n"  # stored as on disk despite the project's eol attribute


def test_user_config_and_environment_are_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "proj"
    make_project(root, git=True)
    home = tmp_path / "evilhome"
    home.mkdir()
    marker = tmp_path / "pwned"
    (home / "ignore").write_text("*.md\n")
    (home / ".gitconfig").write_text(f"[core]\n\tfsmonitor = touch {marker}\n\thooksPath = {home}\n"
                                     f"\texcludesFile = {home}/ignore\n[user]\n\tname = evil\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_DIR", str(root / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(root / ".git/index"))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.fsmonitor'='touch {marker}' 'status.showUntrackedFiles'='no'")
    (root / ".git/hooks/post-commit").write_text(f"#!/bin/sh\ntouch {marker}\n")
    (root / ".git/hooks/post-commit").chmod(0o755)
    index = (root / ".git/index").read_bytes()
    store = store_for(tmp_path, root)
    snap = asyncio.run(store.snapshot())
    assert "README.md" in asyncio.run(store.entries(snap))  # the user's excludesFile was not read
    (root / "README.md").write_text("edit\n")
    asyncio.run(restore(store, snap))
    assert not marker.exists()
    assert (root / ".git/index").read_bytes() == index
    assert (root / "README.md").read_text() == "hello\nworld\n"


def test_directory_replaced_by_symlink_and_back(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    make_project(root, git=False)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere/mod.py").write_text("outside\n")
    store = store_for(tmp_path, root)
    before_tree = tree(root)
    before = asyncio.run(store.snapshot())
    sh(root, f"rm -r src/pkg && ln -s {tmp_path}/elsewhere src/pkg")
    after = asyncio.run(store.snapshot())
    assert set(asyncio.run(store.entries(after))) >= {"src/pkg"}
    assert not any(p.startswith("src/pkg/") for p in asyncio.run(store.entries(after)))
    asyncio.run(undo(store, before, after))
    assert tree(root) == before_tree
    assert (tmp_path / "elsewhere/mod.py").read_text() == "outside\n"


def test_path_that_cannot_be_restored_is_reported_and_the_rest_restored(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    make_project(root, git=False)
    store = store_for(tmp_path, root)
    before = asyncio.run(store.snapshot())
    sh(root, "rm doomed.txt && mkdir doomed.txt && echo x > doomed.txt/kept.log && echo y >> README.md")
    result = asyncio.run(restore(store, before))
    assert [f.split(":")[0] for f in result.failed] == ["doomed.txt"]
    assert (root / "README.md").read_text() == "hello\nworld\n" and (root / "doomed.txt/kept.log").exists()


def test_snapshot_repository_inside_the_project_is_not_snapshotted(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    make_project(root, git=False)
    store = SnapshotStore(root, root / ".auger/snapshots")
    asyncio.run(store.snapshot())
    snap = asyncio.run(store.snapshot())
    assert not any(p.startswith(".auger/") for p in asyncio.run(store.entries(snap)))


def test_stale_index_lock_of_a_killed_snapshot_and_concurrent_snapshots(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    make_project(root, git=False)
    store = store_for(tmp_path, root)
    first = asyncio.run(store.snapshot())
    (store.snapdir / "auger-index.lock").write_bytes(b"")  # as left by a git killed mid-write
    (root / "README.md").write_text("changed\n")
    second = asyncio.run(store.snapshot())
    assert second.tree != first.tree
    other = store_for(tmp_path, root)  # another process's store on the same repository

    async def both():
        return await asyncio.gather(*(s.snapshot() for s in (store, other, store, other)))

    (root / "README.md").write_text("again\n")
    trees = {s.tree for s in asyncio.run(both())}
    assert len(trees) == 1 and trees != {second.tree}
    asyncio.run(store.compact())
    assert asyncio.run(store.entries(second))["README.md"].oid


def test_a_snapshot_finding_nothing_changed_is_the_last_one(tmp_path: Path) -> None:
    """No new commit while nothing changed (contents, permission bits, the index another store shares);
    any change makes one."""
    root = tmp_path / "proj"
    make_project(root, git=False)
    store = store_for(tmp_path, root)
    first = asyncio.run(store.snapshot("first"))
    again = asyncio.run(store.snapshot("again"))
    assert again.commit == first.commit and asyncio.run(store.list()) == [first.commit]
    (root / "README.md").chmod(0o600)  # bits alone
    private = asyncio.run(store.snapshot())
    assert private.commit != first.commit and private.tree == first.tree
    other = store_for(tmp_path, root)  # another process's store on the same repository moves the index on
    (root / "README.md").write_text("changed by the other\n")
    theirs = asyncio.run(other.snapshot())
    assert asyncio.run(store.snapshot()).tree == theirs.tree != private.tree
    assert asyncio.run(store.modes(private))[1] == {"README.md": 0o600}


# --------------------------------------------------------------------------- property: undo is exact

_names = st.sampled_from(["a", "b", "c.txt", "d d", "\u00fc", ".hidden", "x-1"])
_paths = st.lists(_names, min_size=1, max_size=3).map("/".join)
_ops = st.lists(st.tuples(st.sampled_from(["write", "delete", "chmod", "rename", "rmtree", "symlink", "perm"]),
                          _paths, _paths, st.binary(max_size=64)), min_size=1, max_size=12)


def _mutate(root: Path, ops) -> None:
    """Apply random file operations; one that does not fit the tree as it is is skipped."""
    for op, path, other, data in ops:
        p, q = root / path, root / other
        try:
            if op == "write":
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_bytes(data)
            elif op == "delete" and p.is_file():
                p.unlink()
            elif op == "chmod" and p.is_file() and not p.is_symlink():
                p.chmod(p.stat().st_mode ^ 0o111)
            elif op == "perm" and p.is_file() and not p.is_symlink():
                p.chmod([0o600, 0o640, 0o700, 0o444, 0o644, 0o755, 0o4755][len(data) % 7])
            elif op == "rename" and p.is_file() and not q.exists():
                q.parent.mkdir(parents=True, exist_ok=True)
                p.rename(q)
            elif op == "rmtree" and p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            elif op == "symlink" and not p.exists() and not p.is_symlink():
                p.parent.mkdir(parents=True, exist_ok=True)
                p.symlink_to(other)
        except OSError:  # a loop of links, a file where a directory is wanted, ...
            pass


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(start=_ops, turn_ops=_ops)
def test_undo_restores_any_random_turn_exactly(start, turn_ops) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        root = base / "proj"
        root.mkdir()
        _mutate(root, start)
        store = SnapshotStore(root, base / "snap")
        before_tree = tree(root)
        before = asyncio.run(store.snapshot())
        _mutate(root, turn_ops)
        after_tree = tree(root)
        after = asyncio.run(store.snapshot())
        result = asyncio.run(undo(store, before, after))
        assert not result.failed
        # directories the turn created empty are not files; snapshots do not see them
        assert {k: v for k, v in tree(root).items() if v[0] != "dir"} == \
            {k: v for k, v in before_tree.items() if v[0] != "dir"}
        asyncio.run(restore(store, result.redo, expected=before))
        assert {k: v for k, v in tree(root).items() if v[0] != "dir"} == \
            {k: v for k, v in after_tree.items() if v[0] != "dir"}


def test_diff_since_a_snapshot_against_the_current_tree(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    make_project(root, git=False)
    store = store_for(tmp_path, root)
    start = asyncio.run(store.snapshot())
    assert asyncio.run(diff_since(store, start)).changes == []
    (root / "README.md").write_text("hello\nthere\n")
    got = asyncio.run(diff_since(store, start))
    assert [c.path for c in got.changes] == ["README.md"] and "-world\n+there\n" in got.text
    assert got.now.tree != start.tree


def test_permission_bits_are_restored_exactly(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    make_project(root, git=False)
    (root / "secret.env").write_text("TOKEN=1\n")
    (root / "secret.env").chmod(0o600)
    (root / "readonly.txt").write_text("ro\n")
    (root / "readonly.txt").chmod(0o444)
    store = store_for(tmp_path, root)
    before_tree = tree(root)
    before = asyncio.run(store.snapshot())
    sh(root, "rm secret.env && chmod 644 readonly.txt && chmod 700 run.sh && echo x > new.sh && chmod 750 new.sh")
    after = asyncio.run(store.snapshot())
    result = asyncio.run(undo(store, before, after))
    assert tree(root) == before_tree and not result.failed
    asyncio.run(restore(store, result.redo))
    assert (root / "run.sh").stat().st_mode & 0o7777 == 0o700 and not (root / "secret.env").exists()
    assert (root / "new.sh").stat().st_mode & 0o7777 == 0o750


def test_usual_permission_bits_are_a_parameter(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    make_project(root, git=False)
    sh(root, "find . -type f -perm 644 -exec chmod 640 {} + && chmod 600 README.md")
    store = store_for(tmp_path, root, perms=(0o640, 0o750))
    snap = asyncio.run(store.snapshot())
    usual, files = asyncio.run(store.modes(snap))
    assert usual == (0o640, 0o750) and files == {"README.md": 0o600, "run.sh": 0o755}
    before_tree = tree(root)
    sh(root, "rm README.md src/pkg/mod.py")
    asyncio.run(restore(store, snap))
    assert tree(root) == before_tree
    other = store_for(tmp_path, root)  # other usual bits: every file is looked at again
    assert asyncio.run(store.modes(asyncio.run(other.snapshot())))[1]["README.md"] == 0o600


@pytest.mark.parametrize("bulk", [True, False], ids=["packed-first", "loose"])
def test_first_snapshot_of_many_files_packs_them(tmp_path: Path, bulk: bool) -> None:
    root = tmp_path / "proj"
    make_project(root, git=False)
    sh(root, "mkdir -p many && for i in $(seq 1 150); do echo $i > many/f$i; done && mkfifo pipe")
    store = store_for(tmp_path, root, max_dir_files=500)
    store.bulk_files = 10 if bulk else 10**9
    snap = asyncio.run(store.snapshot())
    entries = asyncio.run(store.entries(snap))
    assert "many/f7" in entries and "link" in entries and "pipe" not in entries
    objects = store.snapdir / "objects"
    loose = [p for p in objects.glob("??/*")]
    packs = list((objects / "pack").glob("*.pack"))
    assert (len(packs), len(loose) < 10) == ((1, True) if bulk else (0, False))
    blob = asyncio.run(store.blobs([entries["many/f7"].oid, entries["link"].oid]))
    assert blob[entries["many/f7"].oid] == b"7\n" and blob[entries["link"].oid] == b"src/pkg/mod.py"


# --------------------------------------------------------------------------- ignored files, auger's own files


def test_an_ignored_file_a_turn_deletes_comes_back_and_what_cannot_is_named(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    make_project(root, git=True)
    (root / ".gitignore").write_text("build/\n*.log\nlocal.cfg\nnode_modules/\nbig.dat\n")
    (root / "local.cfg").write_text("TOKEN=secret\n")
    (root / "local.cfg").chmod(0o600)
    (root / "big.dat").write_bytes(b"x" * 5000)
    sh(root, "mkdir -p node_modules/a && echo 1 > node_modules/a/i.js")
    store = store_for(tmp_path, root, ignored_max_file_bytes=4096)
    before_tree = tree(root)
    before = asyncio.run(store.snapshot())
    assert "local.cfg" in asyncio.run(store.entries(before))
    sh(root, "rm -f local.cfg big.dat && rm -rf node_modules build && echo more >> app.log")
    after = asyncio.run(store.snapshot())
    found = {c.path: c.kind for c in asyncio.run(changes(store, before, after))}
    assert found == {"local.cfg": "deleted", "app.log": "modified"}
    lost = asyncio.run(unrecorded_changes(store, before, after))
    assert [line.split(":")[0] for line in lost] == ["big.dat", "build/", "node_modules/"]
    assert "over the 4 KB limit for ignored files" in lost[0] and "removed" in lost[2]
    result = asyncio.run(undo(store, before, after))
    assert not result.failed
    restored = tree(root)
    assert restored["local.cfg"] == before_tree["local.cfg"] and restored["app.log"] == before_tree["app.log"]
    assert not (root / "big.dat").exists() and not (root / "node_modules").exists()


def test_an_ignored_file_changed_after_the_turn_does_not_stop_undo(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    make_project(root, git=False)
    store = store_for(tmp_path, root)
    before = asyncio.run(store.snapshot())
    sh(root, "echo turn >> app.log && echo turn >> README.md")
    after = asyncio.run(store.snapshot())
    sh(root, "echo 'a later test run' >> app.log")
    result = asyncio.run(undo(store, before, after))
    assert (root / "README.md").read_text() == "hello\nworld\n"
    assert (root / "app.log").read_text() == "log\nturn\na later test run\n"  # left as it is, and said so
    assert result.failed == ["app.log: an ignored file changed after the turn; left as it is"]
    sh(root, "echo mine >> README.md")
    with pytest.raises(UndoRefused):  # a file that is not ignored still stops it
        asyncio.run(undo(store, before, after))


def test_ignored_files_new_per_snapshot_are_bounded(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    make_project(root, git=False)
    for i in range(5):
        (root / f"f{i}.log").write_text("x" * 100)
    store = store_for(tmp_path, root, ignored_max_files=3)
    snap = asyncio.run(store.snapshot())
    logs = sorted(p for p in asyncio.run(store.entries(snap)) if p.endswith(".log"))
    assert logs == ["app.log", "f0.log", "f1.log"]
    left = asyncio.run(store.unrecorded(snap))
    assert sorted(left) == ["build/", "f2.log", "f3.log", "f4.log"] and left["f2.log"][0] == "budget"
    assert "f2.log" in asyncio.run(store.entries(asyncio.run(store.snapshot())))  # the next one takes more


def test_auger_own_files_inside_the_project_are_never_recorded_restored_or_diffed(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    make_project(root, git=False)
    db = root / "sessions.db"
    own = [db, *(db.with_name(db.name + s) for s in ("-wal", "-shm", "-journal")), root / ".auger-home"]
    db.write_bytes(b"v1")
    (root / ".auger-home/data").mkdir(parents=True)
    (root / ".auger-home/data/x").write_text("1")
    unaware = store_for(tmp_path, root)  # as the repository was before it was told
    early = asyncio.run(unaware.snapshot())
    assert {"sessions.db", ".auger-home/data/x"} <= set(asyncio.run(unaware.entries(early)))
    store = store_for(tmp_path, root, own=own)
    before = asyncio.run(store.snapshot())
    assert not {"sessions.db", ".auger-home/data/x"} & set(asyncio.run(store.entries(before)))
    db.write_bytes(b"v2")
    (root / "sessions.db-wal").write_bytes(b"wal")
    (root / ".auger-home/data/x").write_text("2")
    (root / "README.md").write_text("edited\n")
    after = asyncio.run(store.snapshot())
    assert [c.path for c in asyncio.run(changes(store, before, after))] == ["README.md"]
    assert [c.path for c in asyncio.run(changes(store, early, after))] == ["README.md"]
    assert "sessions.db" not in asyncio.run(unified_diff(store, early, after))
    assert not asyncio.run(unrecorded_changes(store, before, after))
    asyncio.run(undo(store, before, after))
    asyncio.run(restore(store, early))  # a snapshot that holds them never puts them back
    assert (root / "README.md").read_text() == "hello\nworld\n"
    assert db.read_bytes() == b"v2" and (root / "sessions.db-wal").read_bytes() == b"wal"
    assert (root / ".auger-home/data/x").read_text() == "2"
    later = store_for(tmp_path, root)  # another user of the repository, not told: it remembers
    assert not any(p.startswith(("sessions.db", ".auger-home")) for p in asyncio.run(later.entries(
        asyncio.run(later.snapshot()))))
