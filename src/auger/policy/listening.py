"""auger's own listening ports (`auger serve`, `auger mcp-server --http`): no session's sandbox may reach them.

A command that reached one could hand auger a task of its own — a session rooted anywhere, in a
wider mode than its own — so two rules keep them apart:

- An auger server never listens on a dev port (`refuse_dev_port`): Landlock lets
  sandboxed commands connect to those on any host (`DEV_PORTS`). Under bubblewrap
  a command has a loopback of its own and reaches the host only through the egress proxy.
- The egress proxy never connects a command to a port one of auger's servers listens on, on this
  machine (`own_ports`, read by policy/egress.py), whatever name or address the command asked for.

A server announces its port for as long as it listens (`announced`): a directory
`auger-listen-<pid>-XXXX` in the temp dir holding an empty file named by the port, so every auger
process of the machine sees it, and those of dead processes are swept (process.owned_temp_dir). A
sandboxed command cannot remove one: the host's temp dir is not writable in a sandbox.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from typing import Iterator

from auger.lazy_regex import lazy_compile
from auger.process import owned_temp_dir, process_alive

_ANNOUNCEMENT = lazy_compile(r"auger-listen-(\d+)-.+")

# Local TCP ports a dev server in the session may use under Landlock ABI 4+ (bwrap's network
# namespace needs no list: everything on its loopback is the session's own).
DEV_PORTS: tuple[int, ...] = (3000, 3001, 4000, 4200, 5000, 5173, 8000, 8080, 8888)


class DevPort(ValueError):
    """An auger server was asked to listen on a port sandboxed commands may connect to."""


def refuse_dev_port(port: int) -> None:
    """auger never listens on a dev port: a Landlock sandbox lets every command connect to those."""
    if port in DEV_PORTS:
        raise DevPort(f"port {port} is a dev port, which commands in a Landlock sandbox may connect to; "
                      f"choose another than {', '.join(map(str, DEV_PORTS))}")


@contextmanager
def announced(port: int) -> Iterator[None]:
    """While the block runs, `port` is one of auger's own: no egress proxy connects a command to it."""
    directory = owned_temp_dir("listen")
    try:
        (directory / str(port)).touch()
        yield
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def own_ports() -> frozenset[int]:
    """The ports auger's servers on this machine listen on now (those of running processes)."""
    ports: set[int] = set()
    try:
        entries = list(os.scandir(tempfile.gettempdir()))
    except OSError:
        return frozenset()
    for entry in entries:
        match = _ANNOUNCEMENT.fullmatch(entry.name)
        if match is None or not process_alive(int(match.group(1))):
            continue
        try:
            ports.update(int(name) for name in os.listdir(entry.path) if name.isdigit())
        except OSError:
            continue
    return frozenset(ports)
