"""Small socket helpers the tests share: a Unix socket that answers every connection with fixed bytes,
waiting until a freshly started server accepts TCP connections, and a dev port nothing listens on."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path


def answering_unix_socket(path: Path, reply: bytes) -> socket.socket:
    """A listening Unix socket at `path` that sends `reply` to each client, then hangs up; served by a
    daemon thread until the returned socket is closed."""
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # closed: the test is over
                return
            conn.sendall(reply)
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return listener


def wait_for_port(port: int, timeout: float) -> bool:
    """Whether something accepts connections on 127.0.0.1:`port` within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


def free_dev_port() -> int | None:
    """The first of the dev ports (a Landlock sandbox may listen on and reach those) that nothing listens
    on now, or None. Tried with SO_REUSEADDR, as servers bind (Python's http.server, uvicorn): the
    connections a server of an earlier test closed wait out TIME_WAIT on its port for a minute, and a plain
    bind would take them for a server still there."""
    from auger.policy.listening import DEV_PORTS

    for port in DEV_PORTS:
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    return None
