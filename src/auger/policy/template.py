"""auger's side of the supervisor template: the one process that starts each sandbox and forks its supervisor.

See `auger.policy.supervisor` for what runs there and why forking beats starting an interpreter per
sandbox (memory above all). It also starts bwrap: a small process forks and execs in a fraction of
the time auger (large, many threads) takes, and auger's event loop does not wait for it. One template
per auger process, started with the first sandbox and ended when the last sandbox stops, so a process
whose sessions are all idle holds no helper process at all. Requests are one-way (SOCK_SEQPACKET,
marshal plus descriptors): what a supervisor has to say, it says on its own socket to the session it
serves, and a template that died is simply started again.

The template ends when its socket closes: when `release` lets the last sandbox go, and when auger
dies (the kernel closes the socket then), so it never outlives auger.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import marshal
import socket
import subprocess
import threading

STOP_TIMEOUT = 1.0
# The template's first words: run the code that comes as the first message on its socket (its argv[3]).
BOOTSTRAP = "import marshal,posix,sys;exec(marshal.loads(posix.read(int(sys.argv[3]),1<<20)))"


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

    def start_supervisor(self, request: dict, fds: list[int], landlock: str | None = None) -> None:
        """Start one sandbox: `fds` are the supervisor's end of the session's socket, its stderr and (under
        bubblewrap) the holder's stdin and the seccomp filter for bwrap. `landlock`: the module whose code
        the supervisor confines itself with (auger.policy.landlock), sent once per template before the
        first request that needs it. Raises OSError when the template cannot be started."""
        with self._lock:
            for attempt in (1, 2):  # a template that died since the last request is started again once
                if self._sock is None:
                    self._spawn()
                assert self._sock is not None
                try:
                    if landlock is not None and not self._landlock:
                        self._sock.send(marshal.dumps({"op": "load", "landlock": compiled(landlock)}))
                        self._landlock = True
                    socket.send_fds(self._sock, [marshal.dumps(request)], fds)
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
        from auger.policy.sandbox import _python

        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            parent.send(compiled("auger.policy.supervisor"))  # queued: the template reads it as it starts
            self._proc = subprocess.Popen(
                [_python(), "-S", "-I", "-c", BOOTSTRAP, "--template", "--fd", str(child.fileno())],
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


def compiled(module: str) -> bytes:
    """A module of auger's, compiled (from its bytecode cache, as `import` would: a compile costs ~10 ms
    per template start) and marshalled, to run where it cannot be imported: `python -S -I` outside any
    virtualenv, which loads nothing from a path a command could have changed."""
    if module not in _compiled:
        spec = importlib.util.find_spec(module)
        assert spec is not None and isinstance(spec.loader, importlib.machinery.SourceFileLoader)
        _compiled[module] = marshal.dumps(spec.loader.get_code(module))
    return _compiled[module]


_compiled: dict[str, bytes] = {}
TEMPLATE = Template()
