"""No Unix socket of the host is reachable, wherever it lives: a read-only mount does not stop
connect(), and sockets live in home directories too (Docker Desktop, colima, lima, editors), not only
in /tmp and /run (see test_rc7). Commands cannot create Unix-domain sockets at all, nor reach for
them through io_uring; a socketpair between a command's own processes still works. Judged by effect,
each with a control."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import pytest

from auger.policy.supervisor import ARCHES, MACHINE_ARCH
from tests.support.redteam_sandbox import KINDS, shell
from tests.support.sockets import answering_unix_socket

SECRET = "rc22-socket-secret"


@pytest.fixture
def home_socket(tmp_path: Path, monkeypatch):
    """A listening socket in the user's home (bwrap shows the home, even one under the temp dir)."""
    home = tmp_path / "home"
    path = home / ".colima" / "default" / "docker.sock"
    path.parent.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    listener = answering_unix_socket(path, SECRET.encode())
    yield path
    listener.close()


def _connect(path: Path) -> str:
    return ("python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('%s'); "
            "print(s.recv(100).decode())\"" % path)


@pytest.mark.parametrize("kind", [*KINDS, "off"])
def test_a_socket_in_the_home_directory_is_unreachable(project, server, home_socket, kind):
    outs = shell(project, server, kind, _connect(home_socket))
    if kind == "off":  # control: the payload does reach it
        assert SECRET in outs[0], outs[0]
    else:
        assert SECRET not in outs[0] and "Operation not permitted" in outs[0], outs[0]


@pytest.mark.parametrize("kind", KINDS)
def test_a_socketpair_between_a_commands_own_processes_works(project, server, kind):
    outs = shell(project, server, kind, "python3 -c \"import socket; a, b = socket.socketpair(); a.sendall(b'pong'); "
                 "print(b.recv(4).decode())\"")
    assert outs[0].startswith("Exit code: 0") and "pong" in outs[0], outs[0]


IO_URING = ("python3 -c \"import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
            "params = ctypes.create_string_buffer(120); r = libc.syscall({nr}, 4, params); "
            "print('io_uring', r, os.strerror(ctypes.get_errno()) if r < 0 else 'ok')\"")


def _io_uring_works_here() -> str | None:
    """Why io_uring is unavailable on this host (then the control cannot show it working), or None."""
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)
    fd = libc.syscall(ARCHES[MACHINE_ARCH[os.uname().machine]]["io_uring_setup"], 4, params)
    if fd < 0:
        return os.strerror(ctypes.get_errno())
    os.close(fd)
    return None


@pytest.mark.parametrize("kind", [*KINDS, "off"])
def test_io_uring_is_refused(project, server, kind):
    """io_uring could create and connect a Unix socket without the socket() call seccomp sees."""
    if kind == "off":
        why = _io_uring_works_here()
        if why is not None:
            pytest.skip(f"io_uring is unavailable on this host ({why}), so the control cannot run")
    nr = ARCHES[MACHINE_ARCH[os.uname().machine]]["io_uring_setup"]
    outs = shell(project, server, kind, IO_URING.format(nr=nr))
    line = next(ln for ln in outs[0].splitlines() if ln.startswith("io_uring"))
    if kind == "off":
        assert line.endswith("ok"), line
    else:
        assert line.startswith("io_uring -1") and "Operation not permitted" in line, line
