"""Snapshots taken from what the last one saw (changes/tree_manifest.py): on real trees and real git, each must be
the snapshot git would have taken — the same tree, the same permission bits and left-out paths, the same
warnings — and it must take no git process when every name in the tree is one the last snapshot saw."""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auger.changes import tree_manifest
from auger.changes.snapshots import SnapshotStore

NAMES = ["a.txt", "b.py", "d/c.txt", "d/e/f.txt", "node_modules/m.js", "x.log", "logs/y.log", ".env", "big.bin",
         "link", "d/link2", ".gitignore", "d/e/.gitignore", "run.sh"]
IGNORES = ["*.log", "node_modules/", "d/e/", "logs/", "!x.log"]
MAX_FILE = 256  # a file over this is left out with a warning


def stores(tmp: Path) -> tuple[Path, SnapshotStore, SnapshotStore]:
    """A project, a store that describes the tree, and one that always asks git (the reference)."""
    root = tmp / "project"
    root.mkdir()
    known = SnapshotStore(root, tmp / "snap-known", max_file_bytes=MAX_FILE)
    by_git = SnapshotStore(root, tmp / "snap-git", max_file_bytes=MAX_FILE)
    by_git.describes = False
    return root, known, by_git


def counting(store: SnapshotStore) -> list[str]:
    """The git commands `store` runs from now on."""
    ran: list[str] = []
    run = store.git

    async def git(*args, **kwargs):
        ran.append(args[0])
        return await run(*args, **kwargs)

    store.git = git  # type: ignore[method-assign]
    return ran


async def same(known: SnapshotStore, by_git: SnapshotStore) -> None:
    mine, theirs = await known.snapshot(), await by_git.snapshot()
    assert mine.tree == theirs.tree
    assert mine.warnings == theirs.warnings
    assert await known.modes(mine) == await by_git.modes(theirs)
    assert await known.unrecorded(mine) == await by_git.unrecorded(theirs)


def clear(path: Path) -> None:
    """Nothing at `path` any more, whatever was there."""
    try:
        is_dir = stat.S_ISDIR(os.lstat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return
    shutil.rmtree(path) if is_dir else path.unlink()


def place(root: Path, rel: str) -> Path:
    """`rel`'s path, with its parents made directories (whatever stood in their way removed)."""
    path = root / rel
    parent = root
    for part in Path(rel).parts[:-1]:
        parent = parent / part
        if not (parent.is_dir() and not parent.is_symlink()):
            clear(parent)
            parent.mkdir()
    return path


def apply(root: Path, op: tuple) -> None:
    kind, rel, arg = op
    path = place(root, rel)
    if kind == "write":
        if path.is_symlink() or not (path.is_file() or not os.path.lexists(path)):
            clear(path)
        path.write_bytes(b"x" * (MAX_FILE + 10) if arg == 3 else f"{rel} {arg}\n".encode())
    elif kind == "remove":
        clear(path)
    elif kind == "chmod" and path.is_file() and not path.is_symlink():
        path.chmod(arg)
    elif kind == "link":
        clear(path)
        path.symlink_to(arg)
    elif kind == "dir":
        clear(path)
        path.mkdir()
        (path / "inner.txt").write_text("inner\n")
    elif kind == "touch" and path.exists() and not path.is_symlink():
        os.utime(path)
    elif kind == "ignore":
        clear(path) if path.is_dir() else None
        (root / ".gitignore").write_text("\n".join(arg) + "\n")
    elif kind == "hardlink" and (root / ".env").is_file():
        clear(path)
        os.link(root / ".env", path)
    elif kind == "rename" and rel != arg and (root / arg).is_file() and not (root / arg).is_symlink():
        clear(path)
        os.replace(root / arg, path)
    elif kind == "fifo":
        clear(path)
        os.mkfifo(path)
    elif kind == "repo":  # a repository nested in the project
        clear(path)
        (path / ".git").mkdir(parents=True)
        (path / "inside.txt").write_text("nested\n")
    elif kind == "protect":
        (root / ".augerignore").write_text(f"{arg}\n")


OPS = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(NAMES), st.integers(0, 3)),
    st.tuples(st.just("remove"), st.sampled_from(NAMES + ["d", "d/e", "node_modules", "logs"]), st.none()),
    st.tuples(st.just("chmod"), st.sampled_from(NAMES), st.sampled_from([0o600, 0o644, 0o755, 0o444])),
    st.tuples(st.just("link"), st.sampled_from(["link", "d/link2", "a.txt"]), st.sampled_from(["a.txt", "d", "nowhere"])),
    st.tuples(st.just("dir"), st.sampled_from(["a.txt", "d/c.txt", "newdir", "link"]), st.none()),
    st.tuples(st.just("touch"), st.sampled_from(NAMES), st.none()),
    st.tuples(st.just("ignore"), st.just(".gitignore"), st.lists(st.sampled_from(IGNORES), unique=True)),
    st.tuples(st.just("hardlink"), st.sampled_from(["a.txt", "b.py"]), st.none()),
    st.tuples(st.just("rename"), st.sampled_from(NAMES), st.sampled_from(["a.txt", "d/c.txt", "x.log"])),
    st.tuples(st.just("fifo"), st.sampled_from(["a.txt", "pipe"]), st.none()),
    st.tuples(st.just("repo"), st.sampled_from(["nested", "d/e"]), st.none()),
    st.tuples(st.just("protect"), st.just(".augerignore"), st.sampled_from(["b.py", "d/", "*.txt"])),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(start=st.lists(OPS, max_size=6), steps=st.lists(OPS, min_size=1, max_size=8))
def test_each_snapshot_is_the_one_git_would_take(start, steps):
    with tempfile_dir() as tmp:
        root, known, by_git = stores(tmp)
        (root / ".env").write_text("SECRET=1\n")
        for op in start:
            apply(root, op)

        async def run():
            await same(known, by_git)
            for op in steps:
                apply(root, op)
                await same(known, by_git)

        asyncio.run(run())


def tempfile_dir():
    import tempfile

    class Dir:
        def __enter__(self) -> Path:
            self.name = tempfile.mkdtemp()
            return Path(self.name)

        def __exit__(self, *exc) -> None:
            shutil.rmtree(self.name, ignore_errors=True)

    return Dir()


def test_changes_to_known_names_take_no_git_process(tmp_path):
    root, known, by_git = stores(tmp_path)
    for rel in ("a.txt", "b.py", "d/c.txt", "d/e/f.txt", "node_modules/m.js", "x.log"):
        place(root, rel).write_text(f"{rel}\n")
    (root / ".gitignore").write_text("node_modules/\n*.log\n")

    async def run():
        await same(known, by_git)
        assert (known.snapdir / tree_manifest.MANIFEST).exists()
        ran = counting(known)
        (root / "a.txt").write_text("changed\n")
        (root / "b.py").unlink()
        shutil.rmtree(root / "d" / "e")
        (root / "d" / "c.txt").chmod(0o600)
        (root / "node_modules" / "m.js").write_text("ignored, never entered\n")
        await same(known, by_git)
        assert ran == [], ran  # (modes and unrecorded are read from the commits this store made)
        (root / "new.txt").write_text("a name never seen\n")
        await same(known, by_git)
        assert "ls-files" in ran  # git's ignore rules decide what a new name is

    asyncio.run(run())


def test_a_change_that_keeps_size_and_mtime_is_seen_by_its_ctime(tmp_path, monkeypatch):
    monkeypatch.setattr(tree_manifest, "RACY_NS", 0)  # trust stat data at once: only ctime tells the change
    root, known, by_git = stores(tmp_path)
    (root / "a.txt").write_text("one\n")
    time.sleep(0.02)

    async def run():
        await same(known, by_git)
        time.sleep(0.02)
        before = os.stat(root / "a.txt")
        (root / "a.txt").write_text("two\n")
        os.utime(root / "a.txt", ns=(before.st_atime_ns, before.st_mtime_ns))
        ran = counting(known)
        await same(known, by_git)
        assert ran == []
        entries = await known.entries(await known.snapshot())
        assert await known.blobs([entries["a.txt"].oid]) == {entries["a.txt"].oid: b"two\n"}

    asyncio.run(run())


def test_a_protected_file_linked_over_a_known_name_never_reaches_the_store(tmp_path):
    root, known, by_git = stores(tmp_path)
    (root / "a.txt").write_text("plain\n")
    (root / ".env").write_text("TOKEN=hunter2-secret\n")

    async def run():
        await same(known, by_git)
        (root / "a.txt").unlink()
        os.link(root / ".env", root / "a.txt")  # the same inode: the project's scan protects it
        await same(known, by_git)
        snap = await known.snapshot()
        assert "a.txt" not in await known.entries(snap)

    asyncio.run(run())
    secret = subprocess.run(["git", "hash-object", "--stdin"], input=b"TOKEN=hunter2-secret\n", capture_output=True,
                            check=True).stdout.decode().strip()
    found = subprocess.run(["git", "--git-dir", str(known.snapdir), "cat-file", "-e", secret])
    assert found.returncode != 0


def test_a_gitignore_change_is_gits_to_judge(tmp_path):
    root, known, by_git = stores(tmp_path)
    (root / ".gitignore").write_text("*.log\n")
    (root / "x.log").write_text("log\n")
    (root / "a.txt").write_text("a\n")

    async def run():
        await same(known, by_git)
        ran = counting(known)
        (root / ".gitignore").write_text("# nothing ignored now\n")
        await same(known, by_git)
        assert "ls-files" in ran

    asyncio.run(run())


def test_a_tree_too_large_to_walk_is_not_described(tmp_path, monkeypatch):
    monkeypatch.setattr(tree_manifest, "MAX_NAMES", 5)
    root, known, by_git = stores(tmp_path)
    for n in range(8):
        (root / f"f{n}.txt").write_text(f"{n}\n")

    async def run():
        await same(known, by_git)
        assert not (known.snapdir / tree_manifest.MANIFEST).exists()
        (root / "f1.txt").write_text("changed\n")
        await same(known, by_git)

    asyncio.run(run())


@pytest.mark.parametrize("corrupt", ["garbage", "other-key", "missing-tree", "wrong-types"])
def test_a_broken_or_foreign_manifest_falls_back_to_git(tmp_path, corrupt):
    root, known, by_git = stores(tmp_path)
    (root / "a.txt").write_text("a\n")

    async def run():
        await same(known, by_git)
        path = known.snapdir / tree_manifest.MANIFEST
        data = path.read_text()
        if corrupt == "garbage":
            path.write_text("{not json")
        elif corrupt == "other-key":
            path.write_text(data.replace('"key":"[1,', '"key":"[0,'))
        elif corrupt == "missing-tree":  # the manifest names trees gc has pruned
            path.write_text(data.replace('"trees":{', '"trees":{"gone/dir":"' + "0" * 40 + '",', 1))
        else:  # well-formed JSON, fields of the wrong types
            import json

            damaged = json.loads(data)
            damaged.update(files={"a.txt": 7}, dirs={"": 5})
            path.write_text(json.dumps(damaged))
        (root / "a.txt").write_text("changed\n")
        await same(known, by_git)

    asyncio.run(run())


def test_a_file_git_skips_keeps_what_the_last_snapshot_held_though_git_did_not_take_it(tmp_path):
    root, known, by_git = stores(tmp_path)

    async def run():
        await same(known, by_git)
        (root / "link").symlink_to("a.txt")
        await same(known, by_git)
        (root / "link").unlink()
        (root / "link").symlink_to("d")
        ran = counting(known)
        await same(known, by_git)  # taken from the manifest: the snapshot index still holds link -> a.txt
        assert "write-tree" not in ran
        (root / "link").unlink()
        (root / "link").write_bytes(b"x" * (MAX_FILE + 1))  # over the limit: skipped, so kept as it was
        await same(known, by_git)
        entries = await known.entries(await known.snapshot())
        assert await known.blobs([entries["link"].oid]) == {entries["link"].oid: b"d"}

    asyncio.run(run())


def test_augers_own_files_may_come_and_go(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    db = root / "sessions.db"
    own = (db, db.with_name("sessions.db-wal"))
    known = SnapshotStore(root, tmp_path / "snap-known", own=own)
    by_git = SnapshotStore(root, tmp_path / "snap-git", own=own)
    by_git.describes = False
    db.write_text("db\n")
    (root / "a.txt").write_text("a\n")

    async def run():
        await same(known, by_git)
        ran = counting(known)
        own[1].write_text("journal\n")
        (root / "a.txt").write_text("changed\n")
        await same(known, by_git)
        own[1].unlink()
        db.write_text("db changed\n")
        await same(known, by_git)
        assert ran == []

    asyncio.run(run())


def test_names_that_are_not_utf8_or_hold_newlines(tmp_path):
    root, known, by_git = stores(tmp_path)
    odd = [os.fsdecode(b"caf\xe9.txt"), "two\nlines.txt", "sp ace/\u00e9t\u00e9.md"]
    for rel in odd:
        place(root, rel).write_text(f"{rel!r}\n")

    async def run():
        await same(known, by_git)
        ran = counting(known)
        for rel in odd:
            (root / rel).write_text("changed\n")
        await same(known, by_git)
        (root / odd[0]).unlink()
        await same(known, by_git)
        assert ran == []

    asyncio.run(run())


def test_a_directory_swapped_for_a_link_to_elsewhere_is_never_read_through(tmp_path):
    root, known, by_git = stores(tmp_path)
    place(root, "d/notes.txt").write_text("mine\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.txt").write_text("NOT THE PROJECT'S\n")

    async def run():
        await same(known, by_git)
        shutil.rmtree(root / "d")
        (root / "d").symlink_to(outside)
        await same(known, by_git)
        entries = await known.entries(await known.snapshot())
        assert set(entries) == {"d"} and entries["d"].mode == "120000"

    asyncio.run(run())
    leaked = subprocess.run(["git", "hash-object", "--stdin"], input=b"NOT THE PROJECT'S\n", capture_output=True,
                            check=True).stdout.decode().strip()
    assert subprocess.run(["git", "--git-dir", str(known.snapdir), "cat-file", "-e", leaked]).returncode != 0
