"""Which files were opened, by this process or any other (Linux inotify `IN_OPEN`): how a test sees that a
tool read a file at a given moment without asking the engine."""

from __future__ import annotations

import ctypes
import os
import select
import struct
import time
from pathlib import Path

IN_OPEN = 0x00000020
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of name)


class FileOpens:
    """`with FileOpens(a, b) as opens:` — `opens.count(a)`, `opens.wait(a, timeout)`. Watches start at
    construction: opens before it are not counted."""

    def __init__(self, *paths: Path) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self._fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self._paths: dict[int, Path] = {}
        self._counts: dict[Path, int] = {}
        for path in paths:
            wd = self._libc.inotify_add_watch(self._fd, os.fsencode(path), IN_OPEN)
            if wd < 0:
                raise OSError(ctypes.get_errno(), f"cannot watch {path}")
            self._paths[wd] = Path(path)
            self._counts[Path(path)] = 0

    def count(self, path: Path) -> int:
        """How often `path` was opened since the watch began."""
        self._drain()
        return self._counts[Path(path)]

    def wait(self, path: Path, timeout: float) -> bool:
        """True once `path` was opened; False if it was not within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while self.count(path) == 0:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            select.select([self._fd], [], [], left)
        return True

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                return
            offset = 0
            while offset < len(data):
                wd, mask, _, length = _EVENT.unpack_from(data, offset)
                offset += _EVENT.size + length
                if mask & IN_OPEN and wd in self._paths:
                    self._counts[self._paths[wd]] += 1

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> FileOpens:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
