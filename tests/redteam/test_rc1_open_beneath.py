"""Root cause 1, the primitive: opening beneath a root handle, with openat2 and with the forced
component walk. Each refusal is checked against a control showing the OS would have followed."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from auger.policy import fs
from auger.policy.fs import RootHandle, open_beneath, read_beneath
from auger.policy.paths import PathEscape
from tests.support.redteam import fs_mode  # noqa: F401 - fixture

SECRET = "RC1-BENEATH-SECRET"


@pytest.fixture
def tree(tmp_path: Path) -> tuple[RootHandle, Path, Path]:
    root = tmp_path / "proj"
    (root / "sub" / "deep").mkdir(parents=True)
    (root / "sub" / "deep" / "f.txt").write_text("inside\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    (root / "out-file").symlink_to(outside / "secret.txt")
    (root / "out-dir").symlink_to(outside, target_is_directory=True)
    (root / "out-abs-via-root").symlink_to(root / ".." / "outside" / "secret.txt")
    (root / "in-rel").symlink_to("sub/deep/f.txt")
    (root / "in-abs").symlink_to(root / "sub" / "deep" / "f.txt")
    (root / "in-dir").symlink_to("sub", target_is_directory=True)
    (root / "sub" / "up").symlink_to("..", target_is_directory=True)
    (root / "loop").symlink_to("loop")
    return RootHandle(root), root, outside


def read(handle: RootHandle, rel: str, **kw) -> str:
    fd = open_beneath(handle, rel, os.O_RDONLY, **kw)
    try:
        return fs.read_fd(fd).decode()
    finally:
        os.close(fd)


@pytest.mark.parametrize("rel", ["../outside/secret.txt", "sub/../../outside/secret.txt", "out-file",
                                 "out-dir/secret.txt", "out-abs-via-root", "in-dir/up/out-dir/secret.txt"])
def test_links_and_dotdot_out_are_refused(fs_mode, tree, rel: str) -> None:
    handle, root, _ = tree
    assert SECRET in (root / rel).read_text()  # control: the OS follows the path out
    with pytest.raises((PathEscape, OSError)) as info:
        read(handle, rel)
    assert isinstance(info.value, PathEscape) or info.value.errno == errno.ELOOP


def test_absolute_paths(fs_mode, tree) -> None:
    handle, root, outside = tree
    assert read(handle, str(root / "sub/deep/f.txt")) == "inside\n"
    with pytest.raises(PathEscape, match="outside the project root"):
        read(handle, str(outside / "secret.txt"))


@pytest.mark.parametrize("rel", ["in-rel", "in-abs", "in-dir/deep/f.txt", "sub/up/sub/deep/f.txt",
                                 "sub/deep/../deep/f.txt"])
def test_links_that_stay_inside_are_followed(fs_mode, tree, rel: str) -> None:
    handle, _, _ = tree
    assert read(handle, rel) == "inside\n"
    where = handle.resolve(rel)
    os.close(where.parent_fd)
    assert where.rel == "sub/deep/f.txt"


def test_no_follow_refuses_every_link(fs_mode, tree) -> None:
    handle, _, _ = tree
    for rel in ("in-rel", "in-dir/deep/f.txt"):
        with pytest.raises(OSError) as info:
            read(handle, rel, follow=False)
        assert info.value.errno == errno.ELOOP
    assert read(handle, "sub/deep/f.txt", follow=False) == "inside\n"


def test_loops_and_special_files(fs_mode, tree) -> None:
    handle, root, _ = tree
    with pytest.raises(OSError) as info:
        read(handle, "loop")
    assert info.value.errno == errno.ELOOP
    os.mkfifo(root / "fifo")
    with pytest.raises(OSError, match="not a regular file"):
        read_beneath(handle, "fifo")  # returns at once: a FIFO is never read


def test_make_parents_creates_inside_only(fs_mode, tree) -> None:
    handle, root, outside = tree
    where = handle.resolve("in-dir/new/a/b.txt", make_parents=True)
    os.close(where.parent_fd)
    assert where.rel == "sub/new/a/b.txt" and (root / "sub" / "new" / "a").is_dir()
    with pytest.raises(PathEscape):
        handle.resolve("out-dir/made/x.txt", make_parents=True)
    assert not (outside / "made").exists()


def test_nul_and_surrogates_are_clear_errors(tree) -> None:
    handle, _, _ = tree
    with pytest.raises(PathEscape, match="NUL byte"):
        handle.resolve("a\x00b")
    with pytest.raises(PathEscape, match="not valid UTF-8"):
        handle.resolve("a\udcffb")


def test_the_fallback_is_really_used_when_forced(tree) -> None:
    handle, _, _ = tree
    fs.set_openat2(False)
    try:
        assert read(handle, "sub/deep/f.txt") == "inside\n"
        assert fs._openat2_works is False
    finally:
        fs.set_openat2(None)
    if not fs.openat2_available():
        print("this kernel has no openat2; only the component walk was exercised")
        return
    assert read(handle, "sub/deep/f.txt") == "inside\n" and fs._openat2_works is True
