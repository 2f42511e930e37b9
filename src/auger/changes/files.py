"""Writing and removing project files for a patch or an undo: beneath the root handle, atomically.

One helper for both, so a patch and an undo create files the same way: parents are made without
following links, the content replaces the old entry by rename (never writing through a symlink
planted there), and a new file gets the mode `open()` would have given it under the umask.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

from auger.policy.fs import RootHandle, replace_file


def write_beneath(root: RootHandle, rel: str, data: bytes, mode: int | None) -> None:
    """Put `data` at the root-relative `rel` atomically, with permission bits `mode` (None: a new
    file's default under the umask, or the existing file's bits)."""
    where = root.resolve(rel, follow=False, links=False, make_parents=True)
    created = False
    try:
        if mode is None:
            mode, created = _default_mode(where.parent_fd, where.name)
        replace_file(where.parent_fd, where.name, data, mode)
    except BaseException:
        if created:  # the empty file made to learn the mode must not stay behind
            with contextlib.suppress(OSError):
                os.unlink(where.name, dir_fd=where.parent_fd)
        raise
    finally:
        os.close(where.parent_fd)


def symlink_beneath(root: RootHandle, rel: str, target: str) -> None:
    """Make `rel` a symlink to `target` (replacing what is there); the link itself is not followed."""
    where = root.resolve(rel, follow=False, links=False, make_parents=True)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(where.name, dir_fd=where.parent_fd)
        os.symlink(target, where.name, dir_fd=where.parent_fd)
    finally:
        os.close(where.parent_fd)


def remove_beneath(root: RootHandle, rel: str) -> None:
    """Remove the file or symlink `rel` (never what a link points to); absent is fine."""
    try:
        where = root.resolve(rel, follow=False, links=False)
    except FileNotFoundError:
        return
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(where.name, dir_fd=where.parent_fd)
    finally:
        os.close(where.parent_fd)


def chmod_beneath(root: RootHandle, rel: str, mode: int) -> None:
    """Set the permission bits of the regular file `rel`, never following a link (the file is
    opened O_PATH|O_NOFOLLOW and changed through its /proc descriptor, which needs no read access)."""
    where = root.resolve(rel, follow=False, links=False)
    try:
        fd = os.open(where.name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=where.parent_fd)
    finally:
        os.close(where.parent_fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", rel)
        os.chmod(f"/proc/self/fd/{fd}", mode)
    finally:
        os.close(fd)


def _default_mode(parent_fd: int, name: str) -> tuple[int, bool]:
    """The existing regular file's bits, else those the kernel gives a fresh file under the umask
    (learnt by creating it empty: reading the umask is racy with threads); and whether `name`
    was created for that."""
    try:
        st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
        if stat.S_ISREG(st.st_mode):
            return stat.S_IMODE(st.st_mode), False
        probe = f".{name[:100]}.{os.urandom(6).hex()}.mode"
    except FileNotFoundError:
        probe = name
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=parent_fd)
    mode = stat.S_IMODE(os.fstat(fd).st_mode)
    os.close(fd)
    if probe != name:
        os.unlink(probe, dir_fd=parent_fd)
    return mode, probe == name
