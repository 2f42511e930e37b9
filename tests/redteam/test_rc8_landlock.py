"""What the sandbox adds beyond files: TCP only to the proxy and dev ports (Landlock ABI 4+,
bwrap's own network namespace), no signals to and no abstract sockets of host processes
(Landlock ABI 6, bwrap's PID and network namespaces). Judged by effect, each with a control."""

from __future__ import annotations

import socket
import subprocess
import threading
import uuid

import pytest

from tests.support.redteam_sandbox import KINDS, require, shell


@pytest.mark.parametrize("kind", [*KINDS, "off"])
def test_tcp_around_the_proxy_is_refused(project, server, upstream, kind):
    outs = shell(project, server, kind, f"curl -sS --max-time 3 --noproxy '*' http://127.0.0.1:{upstream}/")
    assert ("hello from upstream" in outs[0]) == (kind == "off"), outs[0]


@pytest.mark.parametrize("kind", [*KINDS, "off"])
def test_host_processes_cannot_be_signalled(project, server, kind):
    if kind == "landlock" and require("landlock").abi < 6:
        pytest.fail("Landlock ABI < 6: signal scoping is unavailable; auto mode asks instead (see docs/safety.md)")
    victim = subprocess.Popen(["sleep", "300"])
    try:
        outs = shell(project, server, kind, f"kill -TERM {victim.pid}; echo kill=$?")
        try:
            victim.wait(timeout=1)
        except subprocess.TimeoutExpired:
            pass
        assert (victim.returncode is not None) == (kind == "off"), outs[0]
    finally:
        victim.kill()
        victim.wait()


@pytest.mark.parametrize("kind", [*KINDS, "off"])
def test_host_abstract_sockets_are_unreachable(project, server, kind):
    name = f"auger-rc8-{uuid.uuid4().hex[:8]}"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind("\0" + name)
    listener.listen(4)

    def serve():
        try:
            conn, _ = listener.accept()
            conn.sendall(b"abstract-secret")
            conn.close()
        except OSError:
            pass

    threading.Thread(target=serve, daemon=True).start()
    try:
        outs = shell(project, server, kind,
                     "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('\\0%s'); "
                     "print(s.recv(100).decode())\"" % name)
        assert ("abstract-secret" in outs[0]) == (kind == "off"), outs[0]
    finally:
        listener.close()
