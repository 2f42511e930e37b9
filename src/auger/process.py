"""Whether a process still runs: the test that lets one auger process take over what a dead one left
(a session's lease, its temporary directories)."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Callable


def process_alive(pid: int) -> bool:
    """True while `pid` runs on this machine; a zombie (dead, not yet reaped) counts as dead."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except (FileNotFoundError, IndexError):  # gone since the signal, or no procfs (not Linux)
        return not os.path.exists("/proc/self/stat")
    except OSError:
        return True


_SWEPT: set[tuple[str, Path]] = set()  # (kind, parent) swept by this process


def owned_temp_dir(kind: str, parent: Path | None = None, *, remove: Callable[[str], None] | None = None) -> Path:
    """A new private directory `auger-<kind>-<pid>-XXXX` in the temp dir. A process killed before it
    could remove its own directories leaves them behind, so those of dead processes (of this user and
    this kind) are removed first — by `remove` when more than the directory must go. The first call
    per kind and parent sweeps; later ones (a process running many sessions) do not read the whole
    temp dir again: what dies meanwhile is swept by the next process."""
    parent = Path(parent or tempfile.gettempdir())
    if (kind, parent) not in _SWEPT:  # once per process: each sweep reads the whole (shared) temp dir
        _SWEPT.add((kind, parent))
        _sweep(kind, parent, remove)
    return Path(tempfile.mkdtemp(prefix=f"auger-{kind}-{os.getpid()}-", dir=parent))


def _sweep(kind: str, parent: Path, remove: Callable[[str], None] | None) -> None:
    """Remove the directories of `kind` in `parent` that belong to dead processes of this user."""
    pattern = re.compile(rf"auger-{re.escape(kind)}-(\d+)-.+")
    try:
        entries = list(os.scandir(parent))
    except OSError:
        entries = []
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match is None:
            continue
        try:
            mine = entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_uid == os.getuid()
        except OSError:
            continue
        if mine and not process_alive(int(match.group(1))):
            if remove is not None:
                remove(entry.path)
            else:
                shutil.rmtree(entry.path, ignore_errors=True)
