"""Which directories of a tree had entries added, moved or removed since the last look (Linux inotify).

A watch per directory, added before the directory is read (so nothing made meanwhile is missed);
`drain()` then costs one non-blocking read when nothing changed, instead of a `stat` per directory.
The kernel watches inodes, so changes a sandboxed command makes through its own mounts of the same
files are seen too. When the answer cannot be trusted — the event queue overflowed, a watched
directory was moved (its path is no longer the one remembered), or the watch limit was reached —
`drain()` says so and the caller looks at everything again.

Stdlib and ctypes only; `DirNotify.open()` returns None where inotify is unavailable.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct

IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000
_WATCHED = (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF
            | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of name)


class DirNotify:
    """inotify watches on directories, each named by the caller's key (a root-relative path)."""

    def __init__(self, fd: int, libc: ctypes.CDLL) -> None:
        self._fd = fd
        self._libc = libc
        self._keys: dict[int, str] = {}  # watch descriptor -> key
        self.lost = False  # a change may have gone unseen (the caller must look at everything)

    @classmethod
    def open(cls) -> DirNotify | None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        except (OSError, AttributeError):
            return None
        return cls(fd, libc) if fd >= 0 else None

    def watch(self, path: str, key: str) -> None:
        """Watch the directory at `path` (re-watching one already watched renames its key)."""
        wd = self._libc.inotify_add_watch(self._fd, os.fsencode(path), _WATCHED)
        if wd >= 0:
            self._keys[wd] = key
        elif ctypes.get_errno() in (errno.ENOSPC, errno.ENOMEM):  # out of watches: cannot keep up
            self.lost = True

    def drain(self) -> set[str] | None:
        """Keys of directories whose entries changed since the last call; None when that cannot be
        known (see the module docstring), after which watching goes on from a clean slate."""
        changed: set[str] = set()
        while True:
            try:
                data = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                break
            offset = 0
            while offset + _EVENT.size <= len(data):
                wd, mask, _, length = _EVENT.unpack_from(data, offset)
                offset += _EVENT.size + length
                if mask & IN_Q_OVERFLOW or (mask & IN_MOVE_SELF and wd in self._keys):
                    self.lost = True
                elif mask & IN_MOVED_FROM and mask & IN_ISDIR:
                    self.lost = True  # the watches below it now name old paths
                if mask & IN_IGNORED:
                    self._keys.pop(wd, None)
                elif wd in self._keys:
                    changed.add(self._keys[wd])
        if self.lost:
            self.lost = False
            self._keys.clear()  # re-watching gives the same descriptors their new keys
            return None
        return changed

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
