"""The session's sandbox supervisor: one confined process that starts every command of a session.

It runs as code auger compiled and sends (never loaded from a path a command can write) under
`python -S -I` (auger.policy.template; `Sandbox.wrap` passes its text with `-c`), in one of three roles:

* **The template** (`--template --fd N`): one process per auger process, on the host, outside any
  sandbox, started with the first sandbox and ended when no sandbox is left. It has imported what a
  supervisor needs; for each sandbox auger asks for, it starts bwrap (as auger planned it) and forks
  the supervisor. Why forked and not a new
  interpreter: a fresh `python -S -I` holds 2.5 MB of its own memory before it imports anything, a fork
  of the template ~0.6 MB (its pages stay shared with the template until written), so a sandbox costs
  a fraction of the memory, and starts without an interpreter's start-up and imports.
* **A supervisor**, inside one session's sandbox. Under bubblewrap, the sandbox holds a holder (`sh`,
  pid 1 of the sandbox's PID namespace, reading its stdin until auger closes it); once the holder says
  it runs (every mount is made then), the forked child joins the holder's namespaces (user first,
  then the rest, the mount namespace last with its root), forks inside the PID namespace, and that
  child forks the supervisor and exits, so the supervisor is the holder's child. Under
  Landlock the forked child restricts itself with the session's ruleset (auger.policy.landlock, its
  text sent to the template once). The supervisor serves one session over an inherited Unix socketpair
  (SOCK_SEQPACKET, one message per packet: auger's are `marshal`led dicts, which only auger writes;
  the supervisor's are JSON, which is all auger reads from it):

      auger -> {"op": "run", "id": N, "argv": [...], "cwd": "/abs", "env": {...},
                "readonly": bool, "writable": ["/abs", ...], "tty": bool, "offline": bool,
                "landlock": [options]}  + stdin, stdout, stderr fds   (landlock, offline: optional, see below)
      auger -> {"op": "kill", "id": N, "sig": 15}
    auger -> {"op": "left", "id": N}       how many processes run below the supervisor
      sup   -> {"ready": true}                  serving
      sup   -> {"id": N, "pid": P}              the command started (P: the sandbox's pid)
      sup   -> {"id": N, "error": "..."}        it could not start
      sup   -> {"id": N, "status": S}           it ended (a wait status)
    sup   -> {"id": N, "left": K}             K processes run below it (commands, and what they left)

  Under bubblewrap it is also the network bridge: it listens on the sandbox's own loopback (its network
  namespace has no route out) at the proxy ports and carries each connection to the egress proxy's
  Unix socket, bind-mounted into the sandbox.
* **The bridge alone** (`--listen PORT=SOCKET ... -- CMD`): the same bridge in front of one command
  (`Sandbox.wrap`), which it runs and whose exit status it exits with.

Why one supervisor per session instead of one sandbox per command: every command shares its
namespaces, so a server started in the background by one command is reachable on 127.0.0.1 and
killable by pid from the next, and the sandbox starts once per session (and again after it stopped
idle: auger.policy.confinement).

Each command is forked, put in its own session (setsid) — with "tty", its stdin (a pseudo-terminal
auger opened) becomes that session's controlling terminal, so Ctrl-C typed into it interrupts the
foreground job —, with "offline" given a network namespace of its own (no route anywhere, not even the
sandbox's loopback and its bridge: a language server needs no network), optionally made read-only (a
private mount namespace whose every mount is read-only except the `writable` dirs, under bubblewrap;
under Landlock auger wraps the argv in a nested read-only ruleset instead, which also takes TCP away for
"offline"), under Landlock given a ruleset of its own without the project's protected files (`landlock`:
auger.policy.landlock's options; under bubblewrap the supervisor covered them with mounts as it started,
`cover` in the start request), stripped of every capability, put under the seccomp filter, and exec'd.
The supervisor is a child subreaper, so daemons that double-fork are reparented to it; when auger closes
the socket, or dies (the kernel closes it then), it kills every
process it can find below it and exits. (No PR_SET_PDEATHSIG: dying at once would orphan those
processes instead.) Under bubblewrap the holder is pid 1: when auger closes its stdin, or dies (the
kernel closes it then), the holder ends and the kernel kills everything in the namespace. Nothing may
end bwrap halfway through its start (between making the namespaces and letting its child run, which
would then wait for it forever): it runs without --die-with-parent, and keeps a reader of its info
pipe of its own; when auger dies, the template kills bwrap and its child together, as one process group,
if the holder does not run yet (see _Starting). The supervisor is a child of the holder (forked twice
inside the PID namespace), so the namespace ends without waiting for anything outside it to reap a
process of its own.

The seccomp filter refuses the kernel keyring (add_key, request_key, keyctl: the keyring is not
namespaced), creating Unix-domain sockets, and io_uring (which could create and connect sockets
without the socket() call the filter sees). Every command gets it; so does the supervisor itself,
unless it bridges (the bridge connects to the proxy's Unix sockets) — then it stays out of the
commands' reach another way: it is not dumpable and keeps capabilities they lack, so they can neither
trace it nor read its memory. The holder gets it from bubblewrap (`--seccomp`).

Why no Unix-domain sockets at all: connect() to a socket by path needs no write access to the mount (a
read-only bind does not stop it) and no network (a new network namespace only separates abstract
sockets), so any socket whose path a command can reach — docker's, a desktop's, an agent's, anywhere
on the machine — would be reachable. Neither a mount layout (sockets appear anywhere, at any time)
nor seccomp (it cannot read the address connect() is given) can tell those apart from a socket the
session made itself. So commands get none: socketpair() still works (pipes between a command's own
processes), socket(AF_UNIX) fails with EPERM.

Stdlib only, and of it only what is built into the interpreter (posix, _socket, _signal, marshal …)
besides ctypes: `os`, `socket`, `signal` and `json` would double the template's start-up time and add
a third to its memory, which every supervisor shares.
"""

import ctypes
import errno
import gc
import marshal
import posix
import select
import sys

import _signal  # type: ignore[import-not-found]  # typeshed has no stub for the C module
import _socket

PR_CAPBSET_DROP = 24
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECCOMP_MODE_FILTER = 2
CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
AT_FDCWD = -100
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV, MOUNT_ATTR_NOEXEC = 0x2, 0x4, 0x8
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND = 0x2, 0x4, 0x8, 0x1000
MS_PRIVATE = 1 << 18
SYS_MOUNT_SETATTR = 442  # the same in every syscall table that has it
TIOCSCTTY = 0x540E  # the same on every architecture in ARCHES
LINUX_CAPABILITY_VERSION_3 = 0x20080522
CAP_SETPCAP = 8
CAP_SYS_ADMIN = 21
SUPERVISOR_CAPS = (CAP_SETPCAP, CAP_SYS_ADMIN)  # to drop capabilities per command, to remount read-only
# The namespaces a bubblewrap sandbox has of its own: the user namespace first (it owns the others: joining
# it gives the rights to join them), the mount namespace last (then the root is the sandbox's).
NAMESPACES = (("user", 0x10000000), ("ipc", 0x08000000), ("uts", 0x04000000), ("cgroup", 0x02000000),
              ("net", CLONE_NEWNET), ("pid", 0x20000000), ("mnt", CLONE_NEWNS))
CHUNK = 64 * 1024
MESSAGE_MAX = 1 << 20
TERMINATING = (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP)

# --- seccomp: a classic-BPF program built by hand ------------------------------------------------

# audit arch -> syscall numbers the filter refuses (io_uring's come from the table all three share)
_GENERIC = {"add_key": 217, "request_key": 218, "keyctl": 219, "socket": 198,
            "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427}
ARCHES = {
    0xC000003E: {"add_key": 248, "request_key": 249, "keyctl": 250, "socket": 41,   # x86_64
                 "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427},
    0xC00000B7: _GENERIC,   # aarch64
    0xC00000F3: _GENERIC,   # riscv64
}
REFUSED = ("add_key", "request_key", "keyctl", "io_uring_setup", "io_uring_enter", "io_uring_register")
MACHINE_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7, "riscv64": 0xC00000F3}
X32_BIT = 0x40000000
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
LD_W_ABS, JEQ_K, JGE_K, RET_K = 0x20, 0x15, 0x35, 0x06
AF_UNIX = 1


def seccomp_program(machine=""):
    """The filter as `struct sock_filter` entries (8 bytes each, native byte order).

    Refuses the keyring, io_uring and socket(AF_UNIX, ...) with EPERM; any
    other architecture's syscall ABI (i386 compat, x32) is refused with ENOSYS
    as a whole, so numbers cannot be smuggled through a second table.
    """
    arch = MACHINE_ARCH.get(machine or posix.uname().machine)
    if arch is None:
        raise OSError(errno.ENOSYS, "no seccomp syscall table for this architecture")
    numbers = ARCHES[arch]
    deny = RET_ERRNO | errno.EPERM
    prog = [
        (LD_W_ABS, 0, 0, 4),                          # A = arch
        (JEQ_K, 1, 0, arch),
        (RET_K, 0, 0, RET_ERRNO | errno.ENOSYS),      # foreign ABI
        (LD_W_ABS, 0, 0, 0),                          # A = nr
        (JGE_K, 0, 1, X32_BIT),
        (RET_K, 0, 0, RET_ERRNO | errno.ENOSYS),      # x32 numbers
    ]
    for name in REFUSED:
        prog += [(JEQ_K, 0, 1, numbers[name]), (RET_K, 0, 0, deny)]
    prog += [(JEQ_K, 0, 3, numbers["socket"]),
             (LD_W_ABS, 0, 0, 16),                    # A = low half of args[0] (the family)
             (JEQ_K, 0, 1, AF_UNIX),
             (RET_K, 0, 0, deny)]
    prog.append((RET_K, 0, 0, RET_ALLOW))
    return b"".join(bytes(_SockFilter(*ins)) for ins in prog)


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


_CapHeader = ctypes.c_uint32 * 2
_CapData = ctypes.c_uint32 * 6  # (effective, permitted, inheritable) for capabilities 0-31, then 32-63
_libc = None


def _c():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    return _libc


def _check(result, what):
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, what + ": " + posix.strerror(err))
    return result


def _prctl(option, arg2=0, arg3=0):
    return _c().prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_ulong(arg3), ctypes.c_ulong(0),
                      ctypes.c_ulong(0))


def install_seccomp():
    program = seccomp_program()
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = _Fprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    _check(_prctl(PR_SET_NO_NEW_PRIVS, 1), "prctl(NO_NEW_PRIVS)")
    _check(_c().prctl(ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(fprog),
                      ctypes.c_ulong(0), ctypes.c_ulong(0)), "prctl(SET_SECCOMP)")


# --- capabilities ----------------------------------------------------------------------------

def _limit_capabilities(keep=()):
    """Keep only the capabilities in `keep` (none by default) in every set: bounding, ambient, permitted,
    effective, inheritable."""
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        if cap not in keep:
            _prctl(PR_CAPBSET_DROP, cap)
    data = _CapData()
    for cap in keep:
        word = 3 * (cap // 32)
        data[word] |= 1 << (cap % 32)
        data[word + 1] |= 1 << (cap % 32)
    _check(_c().capset(_CapHeader(LINUX_CAPABILITY_VERSION_3, 0), data), "capset")


# --- the protected files (once, as a bwrap sandbox's supervisor starts) ----------------------------

def _cover(cover):
    """Cover each of the project's protected files (auger.secrets.protected) with `file` (empty, mode 000) and
    each protected directory with an empty tmpfs of mode 000, read-only: in the sandbox's mount namespace,
    before the first command, so every command finds them there. bwrap could make these mounts, but it reads
    the whole mount table for each one it makes, which takes seconds for a thousand. A cover that cannot be
    made stops the start: commands must not run where they would read the file (one the sandbox does not
    show at all needs none)."""
    if not cover:
        return
    file, paths = cover
    libc = _c()
    locked = _MountAttr(attr_set=MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)
    for path, is_dir in paths:
        target = _bytes(path)
        try:
            posix.lstat(target)
        except (FileNotFoundError, NotADirectoryError):  # not in the sandbox (under the host's /tmp): nothing to cover
            continue
        if is_dir:
            _check(libc.mount(b"tmpfs", target, b"tmpfs", ctypes.c_ulong(MS_NOSUID | MS_NODEV | MS_NOEXEC),
                              b"mode=000,size=4k,nr_inodes=1"), "mount(tmpfs, " + path + ")")
        else:
            _check(libc.mount(_bytes(file), target, None, ctypes.c_ulong(MS_BIND), None), "mount(" + path + ")")
        _check(libc.syscall(ctypes.c_long(SYS_MOUNT_SETATTR), ctypes.c_int(AT_FDCWD), target, ctypes.c_uint(0),
                            ctypes.byref(locked), ctypes.c_size_t(ctypes.sizeof(locked))),
               "mount_setattr(" + path + ", read-only)")


# --- per command (in the forked child) -------------------------------------------------------

def _make_read_only(writable):
    """A private copy of the mount table, every mount read-only except `writable`."""
    libc = _c()
    _check(libc.unshare(ctypes.c_int(CLONE_NEWNS)), "unshare(CLONE_NEWNS)")
    attr = _MountAttr(attr_set=MOUNT_ATTR_RDONLY, propagation=MS_PRIVATE)
    _check(libc.syscall(ctypes.c_long(SYS_MOUNT_SETATTR), ctypes.c_int(AT_FDCWD), b"/", ctypes.c_uint(AT_RECURSIVE),
                        ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr))), "mount_setattr(/, read-only)")
    for path in writable:  # that mount alone: the project may well be mounted below /tmp
        clear = _MountAttr(attr_clr=MOUNT_ATTR_RDONLY)
        _check(libc.syscall(ctypes.c_long(SYS_MOUNT_SETATTR), ctypes.c_int(AT_FDCWD), _bytes(path),
                            ctypes.c_uint(0), ctypes.byref(clear), ctypes.c_size_t(ctypes.sizeof(clear))),
               "mount_setattr(" + path + ", writable)")


def _take_terminal():
    """Make stdin (a pseudo-terminal's slave) the controlling terminal of the new session: the terminal
    then sends SIGINT for Ctrl-C (and SIGWINCH, SIGHUP) to the command's foreground job."""
    _check(_c().ioctl(ctypes.c_int(0), ctypes.c_ulong(TIOCSCTTY), ctypes.c_int(0)), "ioctl(TIOCSCTTY)")


def _child(request, fds, filtered):
    """In the forked child: never returns. `filtered`: the supervisor is under the seccomp filter already."""
    try:
        posix.setsid()
        for target, fd in enumerate(fds):
            posix.dup2(fd, target)
        if request.get("tty"):
            _take_terminal()
        if request.get("offline"):  # a network namespace of its own: no route anywhere, not even the bridge
            _check(_c().unshare(ctypes.c_int(CLONE_NEWNET)), "unshare(CLONE_NEWNET)")
        if request.get("readonly"):
            _make_read_only(request.get("writable", []))
        if request.get("landlock"):  # Landlock: the command's own ruleset, without the protected files
            _landlock["confine_self"](request["landlock"])
        _limit_capabilities()
        if not filtered:
            install_seccomp()
        posix.chdir(request["cwd"])
        _default_signals()
        argv = request["argv"]
        posix.execve(argv[0], argv, request["env"])
    except BaseException as exc:  # noqa: BLE001 - report anything, then die
        _say("cannot run the command: %s" % (exc,))
    posix._exit(126)


def _default_signals():
    """Python ignores SIGPIPE and SIGXFSZ; a command gets every default action, as from a shell."""
    for sig in (_signal.SIGPIPE, _signal.SIGXFSZ, _signal.SIGCHLD, *TERMINATING):
        _signal.signal(sig, _signal.SIG_DFL)
    _signal.pthread_sigmask(_signal.SIG_SETMASK, [])
    _signal.set_wakeup_fd(-1)


# --- small pieces ------------------------------------------------------------------------------

def _say(message):
    """One line on stderr: say little, and only when something is wrong."""
    try:
        posix.write(2, ("auger sandbox: " + message + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


def _bytes(path):
    return path.encode("utf-8", "surrogateescape")


def _json(fields):
    """A JSON object of ints, booleans and strings: what auger reads from a supervisor."""
    items = []
    for key, value in fields.items():
        if value is True or value is False:
            text = "true" if value else "false"
        elif isinstance(value, int):
            text = str(value)
        else:
            text = '"' + "".join(c if c.isprintable() and c not in '"\\' else "\\u%04x" % ord(c) if ord(c) < 0x10000
                                 else "?" for c in str(value)) + '"'
        items.append('"%s": %s' % (key, text))
    return ("{" + ", ".join(items) + "}").encode("utf-8")


def _receive(sock, max_fds):
    """One message and the descriptors sent with it; (b"", []) at the end of input."""
    try:
        data, ancillary, _, _ = sock.recvmsg(MESSAGE_MAX, _socket.CMSG_SPACE(max_fds * 4))
    except OSError:
        return b"", []
    fds = []
    for level, kind, payload in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds += memoryview(payload)[:len(payload) - len(payload) % 4].cast("i").tolist()
    for fd in fds:  # received inheritable: nothing exec'd from here may get one unless it is handed over
        posix.set_inheritable(fd, False)
    return data, fds


def _request(data):
    """A dict sent by auger (marshal: auger is the only writer), or {}."""
    try:
        request = marshal.loads(data)
    except (EOFError, ValueError, TypeError):
        return {}
    return request if isinstance(request, dict) else {}


def _wake_on_signals():
    """A pipe that becomes readable when a signal arrives (SIGCHLD above all); SIGTERM, SIGINT and
    SIGHUP change nothing: the end comes as the end of input on the socket."""
    wake_r, wake_w = posix.pipe()
    posix.set_blocking(wake_w, False)
    posix.set_blocking(wake_r, False)
    _signal.set_wakeup_fd(wake_w)
    _signal.signal(_signal.SIGCHLD, _ignore)
    for sig in TERMINATING:
        _signal.signal(sig, _ignore)
    return wake_r


def _ignore(*_):
    pass


def _drain(fd):
    try:
        while posix.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def _children(parent):
    found = []
    for name in posix.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/" + name + "/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1 and fields[1].decode() == parent:
            found.append(int(name))
    return found


# --- the network bridge ------------------------------------------------------------------------

def _listen(port):
    """Loopback listeners for `port`: 127.0.0.1 (reported if it fails) and ::1 (best effort). Listening
    before the first command starts means a connection it makes at once waits in the backlog."""
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
            sock.setblocking(False)
            made.append(sock)
        except OSError as exc:
            if sock is not None:
                sock.close()
            if family == _socket.AF_INET:
                _say("cannot listen on 127.0.0.1:%d (%s); the proxy is not reachable there"
                     % (port, exc.strerror or exc))
    return made


class _End:
    """One socket of a relayed connection. `out`: what was read from the peer and waits to be written here."""

    __slots__ = ("sock", "peer", "out", "eof")

    def __init__(self, sock):
        self.sock = sock
        self.peer = None
        self.out = b""
        self.eof = False  # nothing more will be read from this socket


class Bridge:
    """Carries every connection to a loopback port to the egress proxy's Unix socket behind it, in the
    caller's poll loop (one thread, no buffer beyond one chunk per direction: a side whose peer has not
    taken the last chunk is not read). End of input is passed on as a half-close; an error ends both."""

    def __init__(self, poller, listens):
        self.poller = poller
        self.listeners = {}  # fd -> (listening socket, proxy socket path)
        self.ends = {}  # fd -> _End
        self.warned = set()  # proxy socket paths already reported as unreachable
        for port, path in listens:
            for sock in _listen(port):
                self.listeners[sock.fileno()] = (sock, path)
                poller.register(sock.fileno(), select.POLLIN)

    def handle(self, fd, events):
        """Act on a poll event; False when `fd` is not the bridge's."""
        if fd in self.listeners:
            self._accept(*self.listeners[fd])
        elif fd in self.ends:
            self._serve(self.ends[fd], events)
        else:
            return False
        return True

    def _accept(self, listener, path):
        try:
            fd, _ = listener._accept()
        except OSError:  # gone from the backlog, or out of descriptors: the next event tries again
            return
        conn = _socket.socket(fileno=fd)
        upstream = None
        try:
            conn.setblocking(False)
            upstream = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
            upstream.setblocking(False)
            upstream.connect(path)  # at once, or EAGAIN: the proxy's backlog is full (the client may retry)
        except OSError as exc:
            if path not in self.warned:
                self.warned.add(path)
                _say("cannot reach the egress proxy at %s (%s)" % (path, exc.strerror or exc))
            conn.close()
            if upstream is not None:
                upstream.close()
            return
        client, proxy = _End(conn), _End(upstream)
        client.peer, proxy.peer = proxy, client
        for end in (client, proxy):
            self.ends[end.sock.fileno()] = end
            self.poller.register(end.sock.fileno(), select.POLLIN)

    def _serve(self, end, events):
        peer = end.peer
        try:
            if end.out and events & (select.POLLOUT | select.POLLERR | select.POLLHUP):
                end.out = end.out[end.sock.send(end.out):]
                if not end.out and peer.eof:
                    end.sock.shutdown(_socket.SHUT_WR)
            if events & (select.POLLIN | select.POLLHUP | select.POLLERR) and not end.eof and not peer.out:
                data = end.sock.recv(CHUNK)
                if data:
                    try:
                        sent = peer.sock.send(data)
                    except (BlockingIOError, InterruptedError):
                        sent = 0
                    peer.out = data[sent:]
                else:
                    end.eof = True
                    if not peer.out:
                        peer.sock.shutdown(_socket.SHUT_WR)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            self._close(end)
            return
        # Both directions over, or this socket can take nothing more (reset, or shut both ways).
        if (end.eof and peer.eof and not end.out and not peer.out) or (
                end.eof and events & (select.POLLERR | select.POLLHUP)):
            self._close(end)
            return
        for one in (end, peer):
            mask = (0 if one.eof or one.peer.out else select.POLLIN) | (select.POLLOUT if one.out else 0)
            self.poller.modify(one.sock.fileno(), mask)

    def _close(self, end):
        for one in (end, end.peer):
            fd = one.sock.fileno()
            if self.ends.pop(fd, None) is not None:
                try:
                    self.poller.unregister(fd)
                except (KeyError, ValueError):
                    pass
                one.sock.close()


# --- the session's supervisor ------------------------------------------------------------------

class Supervisor:
    def __init__(self, sock, bridge=(), filtered=True):
        self.sock = sock
        self.filtered = filtered
        self.ids = {}  # pid -> request id, while the command's first process runs
        self.groups = {}  # request id -> process group: its members may outlive the first process
        self.poller = select.poll()
        self.bridge = Bridge(self.poller, bridge)

    def send(self, **message):
        try:
            self.sock.send(_json(message))
        except OSError:
            pass

    def handle(self, data, fds):
        request = _request(data)
        op = request.get("op")
        if op == "run" and len(fds) == 3:
            try:
                pid = posix.fork()
            except OSError as exc:
                self.send(id=request.get("id"), error="fork failed: %s" % exc.strerror)
            else:
                if pid == 0:
                    self.sock.close()
                    _child(request, fds, self.filtered)
                self.ids[pid] = request.get("id")
                self.groups[request.get("id")] = pid
                self.send(id=request.get("id"), pid=pid)
        elif op == "left":  # is anything still running here (a daemon a command left behind)?
            self.send(id=request.get("id"), left=len(_children(str(posix.getpid()))))
        elif op == "kill":
            pid = self.groups.get(request.get("id"))
            if pid is not None:
                for target in (-pid, pid):  # the group; the leader too, if it left the group
                    try:
                        posix.kill(target, int(request.get("sig", _signal.SIGKILL)))
                    except (OSError, ValueError):
                        pass
        for fd in fds:
            posix.close(fd)

    def reap(self):
        while True:
            try:
                pid, status = posix.waitpid(-1, posix.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            request_id = self.ids.pop(pid, None)
            if request_id is not None:
                self.send(id=request_id, status=status)

    def serve(self):
        wake_r = _wake_on_signals()
        sock_fd = self.sock.fileno()
        # poll, not select: the socket's descriptor may be over select's limit of 1023
        self.poller.register(sock_fd, select.POLLIN)
        self.poller.register(wake_r, select.POLLIN)
        self.send(ready=True, pid=posix.getpid())
        while True:
            try:
                ready = self.poller.poll()
            except InterruptedError:
                continue
            for fd, events in ready:
                if fd == wake_r:
                    _drain(wake_r)
                    self.reap()
                elif fd == sock_fd:
                    data, fds = _receive(self.sock, 3)
                    if not data:
                        return
                    self.handle(data, fds)
                else:
                    self.bridge.handle(fd, events)

    def kill_everything(self):
        """Kill every process below this one, including reparented daemons, until none is left."""
        for pid in list(self.groups.values()):
            try:
                posix.kill(-pid, _signal.SIGKILL)
            except OSError:
                pass
        me = str(posix.getpid())
        for _ in range(200):
            children = _children(me)
            for pid in children:
                try:
                    posix.kill(pid, _signal.SIGKILL)
                except OSError:
                    pass
            while True:
                try:
                    pid, _ = posix.waitpid(-1, posix.WNOHANG if children else 0)
                except ChildProcessError:
                    return
                if pid == 0:
                    break
            select.select([], [], [], 0.005)


def _supervise(sock, bridge, filtered):
    """Serve the session until auger closes the socket, then end everything started. Never returns."""
    supervisor = Supervisor(sock, bridge, filtered)
    try:
        supervisor.serve()
    finally:
        supervisor.kill_everything()
        posix._exit(0)


# --- the template ------------------------------------------------------------------------------

# auger.policy.landlock's namespace, once auger sent its text (for sandboxes under Landlock)
_landlock = {"__name__": "auger_landlock"}


def template(fd):
    """Start each sandbox auger asks for and fork its supervisor, until auger closes the socket (or dies)."""
    control = _socket.socket(fileno=fd)
    posix.set_inheritable(fd, False)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)  # supervisors whose starter exited are reaped here
    wake_r = _wake_on_signals()
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    libc = _c()  # made here, once, with what a supervisor calls: shared with every supervisor
    for name in ("setns", "prctl", "capset", "unshare", "syscall"):
        getattr(libc, name)
    gc.freeze()  # what is imported now stays shared with every supervisor: no collection writes to it
    starting = {}  # fd of a starting bwrap's pipe -> its _Starting
    while True:
        try:
            ready = poller.poll()
        except InterruptedError:
            continue
        for ready_fd, _ in ready:
            if ready_fd == wake_r:
                _drain(wake_r)
                _reap_all(starting)
            elif ready_fd == fd:
                data, fds = _receive(control, 4)
                if not data:
                    for sandbox in set(starting.values()):
                        sandbox.kill()
                    posix._exit(0)
                _template_request(_request(data), fds, poller, starting, control, wake_r)
            elif ready_fd in starting:
                sandbox = starting[ready_fd]
                sandbox.read(ready_fd)
                for one in (sandbox.ready, sandbox.info):
                    if one in starting and (sandbox.settled or one not in sandbox.reading):
                        poller.unregister(one)
                        del starting[one]
                if sandbox.settled:
                    sandbox.done(control, wake_r)


def _template_request(request, fds, poller, starting, control, wake_r):
    if request.get("op") == "load" and "landlock" in request:
        exec(marshal.loads(request["landlock"]), _landlock)  # noqa: S102 - auger's own code, compiled by auger
        gc.freeze()
    elif request.get("op") == "start" and request.get("kind") == "bwrap" and len(fds) == 4:
        sandbox = _Starting(request, fds)
        fds = fds[2:]  # the holder's stdin, the filter: bwrap has its own copies now
        for one in (sandbox.ready, sandbox.info):
            starting[one] = sandbox
            poller.register(one, select.POLLIN)
    elif request.get("op") == "start" and len(fds) == 2:
        _fork_supervisor(request, fds[0], fds[1], control, wake_r)
        return
    for fd in fds:
        posix.close(fd)


class _Starting:
    """A bubblewrap sandbox on its way up: bwrap runs, the holder has not said it runs yet.

    bwrap is started here (a small process forks and execs far faster than auger, and auger's event
    loop does not wait), with the holder's stdin on 0, the pipe the holder says it runs on on 1, the
    log on 2, the pipe bwrap writes the holder's pid and namespaces to on 3 (`--info-fd 3`), the
    seccomp filter on 4 (`--seccomp 4`) and that pipe's other end on 5: bwrap writes there before it
    lets its child run, and a write to a pipe nobody reads (the template gone) would end bwrap then and
    leave the child waiting for it forever. The holder closes 3 to 5 at once. When the template's socket
    ends (auger is gone, or let its last sandbox go), whatever is still starting is killed (`kill`):
    a start can take seconds on a loaded machine, and it may never end at all."""

    __slots__ = ("request", "sock", "log", "ready", "info", "reading", "up", "facts", "pid")

    def __init__(self, request, fds):
        self.request = request
        self.sock, self.log, keep, seccomp = fds
        self.up = False  # the holder said it runs
        self.facts = b""  # what bwrap wrote to its info pipe
        self.ready, ready_w = posix.pipe()
        self.info, info_w = posix.pipe()
        self.reading = {self.ready, self.info}  # the pipes not at their end
        actions = [(posix.POSIX_SPAWN_DUP2, keep, 0), (posix.POSIX_SPAWN_DUP2, ready_w, 1),
                   (posix.POSIX_SPAWN_DUP2, self.log, 2), (posix.POSIX_SPAWN_DUP2, info_w, 3),
                   (posix.POSIX_SPAWN_DUP2, seccomp, 4), (posix.POSIX_SPAWN_DUP2, self.info, 5)]
        argv = request["argv"]
        self.pid = None  # bwrap's, while it may still have to be killed (`kill`)
        try:
            self.pid = posix.posix_spawn(argv[0], argv, {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                                         file_actions=actions, setsid=True)
        except OSError as exc:
            posix.write(self.log, ("auger sandbox: cannot run bwrap: %s\n" % (exc.strerror or exc)).encode())
        finally:  # without a writer left (bwrap failed to run), both pipes are at their end
            posix.close(ready_w)
            posix.close(info_w)

    def kill(self):
        """End bwrap and its child, wherever they are in the sandbox's start: they are one process group
        until the child has been let run (bwrap's --new-session comes after that), and SIGKILL to the group
        reaches both at once, so neither is left waiting for the other. A child already let run is out of
        the group; it runs the holder, which ends at the end of its input as always. Only while bwrap is
        not reaped (see `_reap_all`): its pid cannot be another process group's then."""
        if self.pid is not None:
            try:
                posix.killpg(self.pid, _signal.SIGKILL)
            except OSError:
                pass
            self.pid = None

    def read(self, fd):
        """Take what arrived on one of the pipes (one at its end is read no more)."""
        try:
            chunk = posix.read(fd, 4096)
        except OSError:
            chunk = b""
        if not chunk:
            self.reading.discard(fd)
        elif fd == self.ready:
            self.up = self.up or b"\n" in chunk
        else:
            self.facts += chunk

    @property
    def settled(self):
        """The holder runs and bwrap said where, or that will not be: the holder's pipe ended before it
        ran, or bwrap's ended before it said."""
        known = self._fact("child-pid") is not None and self._fact("mnt-namespace") is not None
        return (self.up and known) or self.ready not in self.reading or (self.info not in self.reading and not known)

    def _fact(self, name):
        """An integer bwrap reported (its --info-fd JSON), or None."""
        key = ('"%s":' % name).encode()
        at = self.facts.find(key)
        if at < 0:
            return None
        digits = self.facts[at + len(key):].lstrip()
        end = 0
        while end < len(digits) and digits[end:end + 1].isdigit():
            end += 1
        return int(digits[:end]) if 0 < end < len(digits) else None

    def done(self, control, wake_r):
        """The sandbox is up: fork its supervisor (or say why there is none, and let auger know by closing
        its socket)."""
        pid, mnt = self._fact("child-pid"), self._fact("mnt-namespace")
        for fd in (self.ready, self.info):
            posix.close(fd)
        if not self.up or pid is None or mnt is None:
            self.kill()  # whatever is left of it: a child bwrap never let run would wait forever
            posix.write(self.log, b"auger sandbox: bwrap did not start the sandbox\n")
            posix.close(self.sock)
            posix.close(self.log)
            return
        self.request["pid"], self.request["mnt"] = pid, mnt
        _fork_supervisor(self.request, self.sock, self.log, control, wake_r)


def _fork_supervisor(request, sock, log, control, wake_r):
    """Fork the supervisor of one sandbox (it owns `sock` and `log` from now on)."""
    try:
        pid = posix.fork()
    except OSError as exc:
        posix.write(log, ("auger sandbox: fork failed: %s\n" % exc.strerror).encode())
        pid = -1
    if pid == 0:
        try:
            control.close()
            posix.close(wake_r)
            _start(request, sock, log)
        except BaseException as exc:  # noqa: BLE001 - report anything, then die
            _say("the session sandbox could not start: %s" % (exc,))
        posix._exit(126)
    posix.close(sock)
    posix.close(log)


def _reap_all(starting):
    """Reap every child that ended. A bwrap that ended before its sandbox came up (killed, or it failed)
    may leave its child waiting for it forever: the child is killed first, while bwrap's pid, and so its
    process group's, cannot be another's yet (it is reaped only after)."""
    bwraps = {sandbox.pid: sandbox for sandbox in starting.values()}
    while True:
        try:
            ended = posix.waitid(posix.P_ALL, 0, posix.WEXITED | posix.WNOHANG | posix.WNOWAIT)
        except ChildProcessError:
            return
        if ended is None:
            return
        if ended.si_pid in bwraps:
            bwraps[ended.si_pid].kill()
        posix.waitpid(ended.si_pid, 0)


def _start(request, sock_fd, log_fd):
    """In a child of the template: become the supervisor of one sandbox. Never returns."""
    posix.dup2(log_fd, 2)
    posix.close(log_fd)
    posix.close(_signal.set_wakeup_fd(-1))  # the template's
    sock = _socket.socket(fileno=sock_fd)
    if request.get("kind") == "bwrap":
        _enter(int(request["pid"]), int(request["mnt"]))
        _become_child_of_holder()
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        _limit_capabilities(SUPERVISOR_CAPS)
        _cover(request.get("cover"))
        _check(_prctl(PR_SET_NO_NEW_PRIVS, 1), "prctl(NO_NEW_PRIVS)")
        _check(_prctl(PR_SET_DUMPABLE, 0), "prctl(SET_DUMPABLE)")
        bridge = [(int(port), path) for port, path in request.get("bridge", [])]
        _supervise(sock, bridge, filtered=False)
    if "confine_self" not in _landlock:
        raise OSError(errno.EINVAL, "no Landlock helper was loaded")
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _landlock["confine_self"](request["landlock"])
    _check(_prctl(PR_SET_DUMPABLE, 0), "prctl(SET_DUMPABLE)")
    install_seccomp()
    _supervise(sock, (), filtered=True)


def _become_child_of_holder():
    """Go on as a child of the sandbox's pid 1 (the holder), in its PID namespace (which `_enter` joined).

    A process forked from outside into a PID namespace keeps its parent outside, and the kernel ends a
    namespace only once each of its processes is reaped: its pid 1 waits in exit, and bwrap for pid 1,
    for as long as nobody reaps such a process. Its parent outside is the template, gone with auger, then
    whatever the host's init is, which reaps late (seconds) or never (a container's pid 1 that does not
    wait for orphans). So the first child, inside, forks the supervisor and exits: an orphan inside the
    namespace goes to its pid 1, which reaps it as the namespace ends; the first child is reaped here,
    at once, before this process exits. Returns in the supervisor only."""
    first = posix.fork()
    if first != 0:
        posix.waitpid(first, 0)
        posix._exit(0)
    if posix.fork() != 0:
        posix._exit(0)


def _enter(pid, mnt):
    """Join the namespaces of the sandbox whose holder is `pid` (the host's pid), and its root. `mnt`: the
    inode of the sandbox's mount namespace, as bubblewrap reported it: a pid reused by another process
    is refused."""
    base = "/proc/%d/" % pid
    root = posix.open(base + "root", posix.O_RDONLY | posix.O_DIRECTORY | posix.O_CLOEXEC)
    joins = []
    for name, flag in NAMESPACES:
        fd = posix.open(base + "ns/" + name, posix.O_RDONLY | posix.O_CLOEXEC)
        if name == "mnt" and posix.fstat(fd).st_ino != mnt:
            raise OSError(errno.ESRCH, "the sandbox's holder is gone (pid %d is another process)" % pid)
        if posix.fstat(fd).st_ino != posix.stat("/proc/self/ns/" + name).st_ino:  # joining one's own user ns fails
            joins.append((fd, flag, name))
        else:
            posix.close(fd)
    libc = _c()
    for fd, flag, name in joins:
        _check(libc.setns(ctypes.c_int(fd), ctypes.c_int(flag)), "setns(" + name + ")")
        posix.close(fd)
    posix.fchdir(root)
    posix.chroot(".")
    posix.chdir("/")
    posix.close(root)


# --- the bridge alone, in front of one command -------------------------------------------------

USAGE = "usage: supervisor.py --listen PORT=UNIX_SOCKET [--listen ...] -- CMD [ARGS...]"


def _parse_bridge(argv):
    """([(port, socket path)], cmd) from the command line; exits with 2 on a usage error."""
    listens, i = [], 0
    while i < len(argv) and argv[i] != "--":
        arg = argv[i]
        if arg == "--listen" and i + 1 < len(argv):
            value, i = argv[i + 1], i + 2
        else:
            _say("unexpected argument " + repr(arg) + "; " + USAGE)
            posix._exit(2)
        port, sep, path = value.partition("=")
        if not sep or not path or not port.isdigit() or not 0 < int(port) < 65536:
            _say("bad --listen value " + repr(value) + "; " + USAGE)
            posix._exit(2)
        listens.append((int(port), path))
    cmd = argv[i + 1:]
    if not cmd:
        _say("no command given; " + USAGE)
        posix._exit(2)
    return listens, cmd


def bridge_command(argv):
    """Listen, run CMD, relay until it exits, and exit with its status (128+N for a signal N; 127/126 when
    it cannot run). SIGTERM, SIGINT and SIGHUP sent to the bridge are passed on to CMD (those that came
    before it started, once it has)."""
    listens, cmd = _parse_bridge(argv)
    wake_r = _wake_on_signals()
    child, pending = [0], []

    def pass_on(signum, _frame):
        if child[0]:
            try:
                posix.kill(child[0], signum)
            except OSError:
                pass
        else:
            pending.append(signum)

    for sig in TERMINATING:
        _signal.signal(sig, pass_on)
    poller = select.poll()
    bridge = Bridge(poller, listens)
    try:
        child[0] = posix.posix_spawnp(cmd[0], cmd, posix.environ, setsigdef=(
            _signal.SIGPIPE, _signal.SIGXFSZ, _signal.SIGCHLD, *TERMINATING))
    except OSError as exc:
        _say("cannot run %r: %s" % (cmd[0], exc.strerror or exc))
        posix._exit(127 if isinstance(exc, FileNotFoundError) else 126)
    while pending:
        pass_on(pending.pop(0), None)
    poller.register(wake_r, select.POLLIN)
    while True:
        try:
            ready = poller.poll()
        except InterruptedError:
            continue
        for fd, events in ready:
            if fd == wake_r:
                _drain(wake_r)
                done, status = posix.waitpid(child[0], posix.WNOHANG)
                if done:
                    code = posix.waitstatus_to_exitcode(status)
                    posix._exit(128 - code if code < 0 else code)
            else:
                bridge.handle(fd, events)


def main(argv):
    if argv[:1] == ["--template"] and len(argv) == 3 and argv[1] == "--fd" and argv[2].isdigit():
        template(int(argv[2]))
    bridge_command(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
