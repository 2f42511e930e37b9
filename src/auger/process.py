"""Whether a process still runs: the test that lets one auger process take over what a dead one left
(a session's lease, an egress socket directory)."""

from __future__ import annotations

import os


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
