"""No host Unix socket is reachable from a command (docker.sock, ssh-agent, X11 live in /tmp and
/run), and the kernel keyring, which no namespace separates, is refused."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from auger.policy.supervisor import ARCHES, MACHINE_ARCH
from tests.support.redteam_sandbox import KINDS, shell
from tests.support.sockets import answering_unix_socket

SECRET = "rc7-socket-secret"


@pytest.fixture
def host_sockets(tmp_path):
    """Listening Unix sockets on the host, in /tmp and /run, each answering with SECRET."""
    run_dir = Path("/run") / f"auger-rc7-{uuid.uuid4().hex[:8]}"
    run_dir.mkdir()
    paths = [tmp_path / "agent.sock", run_dir / "docker.sock"]
    listeners = [answering_unix_socket(path, SECRET.encode()) for path in paths]
    yield paths
    for listener in listeners:
        listener.close()
    for path in paths:
        path.unlink(missing_ok=True)
    run_dir.rmdir()


def _connect(path: Path) -> str:
    return ("python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('%s'); "
            "print(s.recv(100).decode())\"" % path)


@pytest.mark.parametrize("kind", [*KINDS, "off"])
def test_host_unix_sockets_are_unreachable(project, server, host_sockets, kind):
    outs = shell(project, server, kind, *(_connect(p) for p in host_sockets))
    for out in outs:
        if kind == "off":  # control: the payload does reach the socket
            assert SECRET in out, out
        else:
            assert SECRET not in out, out


KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING = 0, -3
KEYRING = ("python3 -c \"import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
           "r = libc.syscall({nr}, {op}, {spec}, 1); print('keyctl', r, os.strerror(ctypes.get_errno()))\"")


@pytest.mark.parametrize("kind", [*KINDS, "off"])
def test_keyring_syscalls_are_refused(project, server, kind):
    keyctl = ARCHES[MACHINE_ARCH[os.uname().machine]]["keyctl"]
    outs = shell(project, server, kind, KEYRING.format(nr=keyctl, op=KEYCTL_GET_KEYRING_ID,
                                                      spec=KEY_SPEC_SESSION_KEYRING))
    line = next(ln for ln in outs[0].splitlines() if ln.startswith("keyctl"))
    if kind == "off":  # control: the host gives out its session keyring
        assert not line.startswith("keyctl -1"), line
    else:
        assert line.startswith("keyctl -1") and "Operation not permitted" in line, line


@pytest.mark.parametrize("kind", [*KINDS, "off"])
def test_dev_shm_is_not_the_hosts(project, server, kind):
    marker = Path("/dev/shm") / f"auger-rc7-{uuid.uuid4().hex[:8]}"
    try:
        outs = shell(project, server, kind, f"echo x > {marker}; ls /dev/shm")
        assert marker.exists() == (kind == "off"), outs[0]  # (unconfined: the control writes it)
    finally:
        marker.unlink(missing_ok=True)
