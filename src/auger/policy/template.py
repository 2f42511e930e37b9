"""auger's side of the supervisor template: the one process that forks every sandbox's supervisor.

See `auger.policy.supervisor` for what runs there and why forking beats starting an interpreter per
sandbox (memory above all). One template per auger process, started with the first sandbox and ended
when the last sandbox stops, so a process whose sessions are all idle holds no helper process at all.
Requests are one-way (SOCK_SEQPACKET, marshal plus descriptors): what a supervisor has to say, it says on
its own socket to the session it serves, and a template that died is simply started again.

The template ends when its socket closes: when `release` lets the last sandbox go, and when auger
dies (the kernel closes the socket then), so it never outlives auger.
"""

from __future__ import annotations

import marshal
import socket
import subprocess
import threading
from pathlib import Path

STOP_TIMEOUT = 1.0


class Template:
    """The template process, started on first use; thread-safe (sessions may live on several loops)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._landlock = False  # the Landlock helper's text was sent to this template
        self._users = 0  # sandboxes started and not yet stopped

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start_supervisor(self, request: dict, sock: int, log: int, landlock_source: str | None = None) -> None:
        """Fork a supervisor for one sandbox: `sock` is its end of the session's socket, `log` its stderr.
        `landlock_source`: the Landlock helper's text, sent once per template before the first request
        that needs it. Raises OSError when the template cannot be started."""
        with self._lock:
            for attempt in (1, 2):  # a template that died since the last request is started again once
                if self._sock is None:
                    self._spawn()
                assert self._sock is not None
                try:
                    if landlock_source is not None and not self._landlock:
                        self._sock.send(marshal.dumps({"op": "load", "landlock": landlock_source}))
                        self._landlock = True
                    socket.send_fds(self._sock, [marshal.dumps(request)], [sock, log])
                except OSError:
                    self._stop()
                    if attempt == 2:
                        raise
                    continue
                self._users += 1
                return

    def release(self) -> None:
        """One sandbox stopped; with the last one, the template ends."""
        with self._lock:
            self._users = max(0, self._users - 1)
            if self._users == 0:
                self._stop()

    def _spawn(self) -> None:
        from auger.policy.sandbox import _python, _source

        source = _source(Path(__file__).with_name("supervisor.py"))
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._proc = subprocess.Popen(
                [_python(), "-S", "-I", "-c", source, "--template", "--fd", str(child.fileno())],
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=(child.fileno(),),
                start_new_session=True, cwd="/")
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()
        self._sock = parent
        self._landlock = False

    def _stop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            try:
                self._proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None


TEMPLATE = Template()
