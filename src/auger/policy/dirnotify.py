"""Which directories of a tree had entries added, moved or removed since the last look (Linux inotify).

A watch per directory, added before the directory is read (so nothing made meanwhile is missed);
`drain()` then costs one non-blocking read when nothing changed, instead of a `stat` per directory.
The kernel watches inodes, so changes a sandboxed command makes through its own mounts of the same
files are seen too. When the answer cannot be trusted — the event queue overflowed, a watched
directory was moved (its path is no longer the one remembered), or the watch limit was reached —
`drain()` says so and the caller looks at everything again.

One inotify instance serves every watcher of the process: instances are few per user
(fs.inotify.max_user_instances, often 128, shared with the user's editors and file managers), while a
process may run a thousand sessions; and sessions of one project watch the same directories, which
one instance watches once. Each `DirNotify` is one caller's view of it: its own keys and its own
changes, kept until it drains them.

Stdlib and ctypes only; `DirNotify.open()` returns None where inotify is unavailable.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import threading

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


class _Instance:
    """The process's inotify instance, and which watcher named each watch how."""

    def __init__(self, fd: int, libc: ctypes.CDLL) -> None:
        self.fd = fd
        self.libc = libc
        self.watchers: dict[int, dict[DirNotify, str]] = {}  # watch descriptor -> watcher -> its key
        self.users: set[DirNotify] = set()

    def read(self) -> None:
        """Hand every event queued so far to the watchers it concerns."""
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return
            offset = 0
            while offset + _EVENT.size <= len(data):
                wd, mask, _, length = _EVENT.unpack_from(data, offset)
                offset += _EVENT.size + length
                if mask & IN_Q_OVERFLOW:
                    for user in self.users:
                        user.lost = True
                    continue
                named = self.watchers.get(wd, {})
                for user, key in named.items():
                    if mask & IN_MOVE_SELF or (mask & IN_MOVED_FROM and mask & IN_ISDIR):
                        user.lost = True  # the watches below it now name old paths
                    elif not mask & IN_IGNORED:
                        user.changed.add(key)
                if mask & IN_IGNORED:
                    for user in named:
                        user.wds.discard(wd)
                    self.watchers.pop(wd, None)

    def forget(self, user: DirNotify) -> None:
        """Drop a watcher's watches (those nobody else has go from the kernel too)."""
        for wd in user.wds:
            named = self.watchers.get(wd)
            if named is None:
                continue
            named.pop(user, None)
            if not named:
                del self.watchers[wd]
                self.libc.inotify_rm_watch(self.fd, wd)
        user.wds.clear()


_lock = threading.Lock()  # guards the instance, and every watcher's state it writes
_instance: _Instance | None = None


class DirNotify:
    """One caller's inotify watches on directories, each named by the caller's key (a root-relative path)."""

    def __init__(self) -> None:
        self.wds: set[int] = set()
        self.changed: set[str] = set()  # keys of directories changed since the last drain
        self.lost = False  # a change may have gone unseen (the caller must look at everything)

    @classmethod
    def open(cls) -> DirNotify | None:
        """A watcher on the process's instance (opened now if it is the first); None without inotify."""
        global _instance
        with _lock:
            if _instance is None:
                try:
                    libc = ctypes.CDLL(None, use_errno=True)
                    fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
                except (OSError, AttributeError):
                    return None
                if fd < 0:
                    return None
                _instance = _Instance(fd, libc)
            watcher = cls()
            _instance.users.add(watcher)
            return watcher

    def watch(self, path: str, key: str) -> None:
        """Watch the directory at `path` (re-watching one already watched renames its key)."""
        with _lock:
            if _instance is None:
                return
            wd = _instance.libc.inotify_add_watch(_instance.fd, os.fsencode(path), _WATCHED)
            if wd >= 0:
                _instance.watchers.setdefault(wd, {})[self] = key
                self.wds.add(wd)
            elif ctypes.get_errno() in (errno.ENOSPC, errno.ENOMEM):  # out of watches: cannot keep up
                self.lost = True

    def drain(self) -> set[str] | None:
        """Keys of directories whose entries changed since the last call; None when that cannot be
        known (see the module docstring), after which watching goes on from a clean slate."""
        with _lock:
            if _instance is not None:
                _instance.read()
                if self.lost:
                    _instance.forget(self)  # re-watching gives the directories their keys again
            changed, self.changed = self.changed, set()
            if self.lost:
                self.lost = False
                return None
            return changed

    def close(self) -> None:
        global _instance
        with _lock:
            if _instance is None or self not in _instance.users:
                return
            _instance.forget(self)
            _instance.users.discard(self)
            if not _instance.users:
                os.close(_instance.fd)
                _instance = None
