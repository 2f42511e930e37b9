"""netbridge: give a network-isolated sandbox its way to the egress proxy.

Runs INSIDE the sandbox, in front of the command:

    python3 -S -I netbridge.py --listen 3128=/sock/dir/http.sock --listen 1080=/sock/dir/socks.sock -- CMD [ARGS...]

A sandbox made with `bwrap --unshare-net` has its own loopback and no route out,
so proxy variables cannot point at the host's proxy ports. The host's proxy also
listens on Unix sockets, which are bind-mounted into the sandbox; this script
listens on the sandbox's 127.0.0.1 (and ::1 when there is one) at each PORT and
relays every connection to the matching socket. It then runs CMD and exits with
CMD's status, so callers can treat "bridge + CMD" as CMD.

It is its own script, not part of the `auger` package: it runs under `-S -I`
(no site, no user paths, no PYTHON* variables) with whatever Python the sandbox
has, and it starts on every sandboxed command, so it imports only built-in C
modules (`_socket`, `_thread`, `_signal`: `socket`, `threading` and `signal` cost
enum, selectors and collections, several milliseconds) and starts CMD as soon as
its listeners are bound. Listening first means a connection CMD makes at once
waits in the backlog instead of being refused.

Behaviour worth knowing:
- CMD stays in the bridge's process group (no setsid), so whoever kills the
  group kills both. SIGTERM, SIGINT and SIGHUP sent to the bridge alone are
  forwarded to CMD; a signal sent to the whole group therefore reaches CMD twice.
- A listener that cannot be bound is reported in one line on stderr and CMD runs
  anyway: without the bridge the sandbox simply has no network.
- The bridge lives as long as CMD: background processes CMD leaves behind lose
  the proxy when it exits.
- Exit status: CMD's, or 128+N if a signal N killed it; 127/126 if CMD cannot be
  run; 2 for a usage error.
"""

import os
import sys

import _signal  # type: ignore[import-not-found]  # typeshed has no stub for the C module
import _socket
import _thread

USAGE = "usage: netbridge.py --listen PORT=UNIX_SOCKET [--listen ...] -- CMD [ARGS...]"
CHUNK = 64 * 1024
THREAD_STACK = 256 * 1024  # relay threads need little stack; keeps many connections cheap

_child = 0  # CMD's pid once started
_pending: list[int] = []  # signals that arrived before CMD started
_warned: set[str] = set()  # socket paths already reported as unreachable


def _say(message):
    """One line on stderr, which CMD shares: say little, and only when something is wrong."""
    try:
        os.write(2, ("netbridge: " + message + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


def _parse(argv):
    """([(port, socket path)], cmd) from the command line; exits with 2 on a usage error."""
    listens, i = [], 0
    while i < len(argv) and argv[i] != "--":
        arg = argv[i]
        if arg == "--listen" and i + 1 < len(argv):
            value, i = argv[i + 1], i + 2
        elif arg.startswith("--listen="):
            value, i = arg[len("--listen="):], i + 1
        else:
            _say("unexpected argument " + repr(arg) + "; " + USAGE)
            os._exit(2)
        port, sep, path = value.partition("=")
        if not sep or not path or not port.isdigit() or not 0 < int(port) < 65536:
            _say("bad --listen value " + repr(value) + "; " + USAGE)
            os._exit(2)
        listens.append((int(port), path))
    cmd = argv[i + 1:]
    if not cmd:
        _say("no command given; " + USAGE)
        os._exit(2)
    return listens, cmd


def _listen(port):
    """Loopback listeners for `port`: 127.0.0.1 (reported if it fails) and ::1 (best effort)."""
    made = []
    for family, host in ((_socket.AF_INET, "127.0.0.1"), (_socket.AF_INET6, "::1")):
        sock = None
        try:
            sock = _socket.socket(family, _socket.SOCK_STREAM)
            sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
            if family == _socket.AF_INET6:
                sock.setsockopt(_socket.IPPROTO_IPV6, _socket.IPV6_V6ONLY, 1)
            sock.bind((host, port))
            sock.listen(128)
            made.append(sock)
        except OSError as exc:
            if sock is not None:
                sock.close()
            if family == _socket.AF_INET:
                _say("cannot listen on 127.0.0.1:%d (%s); the proxy is not reachable there"
                     % (port, exc.strerror or exc))
    return made


def _sleep(seconds):
    """time.sleep without importing time."""
    lock = _thread.allocate_lock()
    lock.acquire()
    lock.acquire(timeout=seconds)


def _accept_loop(listener, path):
    while True:
        try:
            fd, _ = listener._accept()
        except OSError:  # out of descriptors or memory: wait a little rather than spin
            _sleep(0.05)
            continue
        conn = None
        try:
            conn = _socket.socket(fileno=fd)
            _thread.start_new_thread(_relay, (conn, path))
        except (OSError, RuntimeError):  # cannot start a thread: refuse this connection
            if conn is None:
                os.close(fd)
            else:
                conn.close()


def _relay(conn, path):
    """Carry one connection to the proxy's Unix socket and back, one thread per direction."""
    upstream = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError as exc:
        if path not in _warned:
            _warned.add(path)
            _say("cannot reach the egress proxy at %s (%s)" % (path, exc.strerror or exc))
        upstream.close()
        conn.close()
        return
    lock, remaining = _thread.allocate_lock(), [2]

    def finished():
        with lock:
            remaining[0] -= 1
            last = remaining[0] == 0
        if last:
            conn.close()
            upstream.close()

    try:
        _thread.start_new_thread(_pump, (conn, upstream, finished))
    except RuntimeError:
        conn.close()
        upstream.close()
        return
    _pump(upstream, conn, finished)


def _pump(src, dst, finished):
    """Copy src to dst; pass on end of input as a half-close; on any error end both directions."""
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    try:
        while True:
            n = src.recv_into(buf)
            if not n:
                break
            dst.sendall(view[:n])
        dst.shutdown(_socket.SHUT_WR)
    except OSError:
        for sock in (src, dst):  # wakes the other direction's recv, so the pair ends together
            try:
                sock.shutdown(_socket.SHUT_RDWR)
            except OSError:
                pass
    finally:
        finished()


def _forward(signum, frame):
    if _child:
        try:
            os.kill(_child, signum)
        except OSError:
            pass
    else:
        _pending.append(signum)


def main(argv):
    global _child
    listens, cmd = _parse(argv)
    for signum in (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP):
        if _signal.getsignal(signum) != _signal.SIG_IGN:  # an ignored signal stays ignored, for CMD too
            _signal.signal(signum, _forward)
    listeners = [(sock, path) for port, path in listens for sock in _listen(port)]

    try:
        # Python ignores SIGPIPE and SIGXFSZ; CMD must get the default actions, as from a shell.
        pid = os.posix_spawnp(cmd[0], cmd, os.environ, setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ))
    except OSError as exc:
        _say("cannot run %r: %s" % (cmd[0], exc.strerror or exc))
        os._exit(127 if isinstance(exc, FileNotFoundError) else 126)
    _child = pid
    while _pending:
        _forward(_pending.pop(0), None)

    _thread.stack_size(THREAD_STACK)
    for sock, path in listeners:
        _thread.start_new_thread(_accept_loop, (sock, path))

    _, status = os.waitpid(pid, 0)  # retried after each forwarded signal (PEP 475)
    code = os.waitstatus_to_exitcode(status)
    os._exit(128 - code if code < 0 else code)  # os._exit: relay threads must not delay the exit


if __name__ == "__main__":
    main(sys.argv[1:])
