"""The session's sandbox supervisor: one confined process that starts every command of a session.

Runs INSIDE the sandbox, once per session (`python -S -I -c SOURCE --fd N`; the
source is read by auger when the session starts, never from a path a command can
write). It talks to auger over an inherited Unix socketpair (SOCK_SEQPACKET, one
JSON message per packet):

    auger -> {"op": "run", "id": N, "argv": [...], "cwd": "/abs", "env": {...},
              "readonly": bool, "writable": ["/abs", ...], "tty": bool}  + stdin, stdout, stderr fds
    auger -> {"op": "kill", "id": N, "sig": 15}
    sup   -> {"id": N, "pid": P}            the command started (P: this namespace's pid)
    sup   -> {"id": N, "error": "..."}      it could not start
    sup   -> {"id": N, "status": S}         it ended (a wait status)

Why one process per session instead of one sandbox per command: every command
shares its namespaces, so a server started in the background by one command is
reachable on 127.0.0.1 and killable by pid from the next, and bwrap and the
network bridge start once per session instead of once per command.

Each command is forked, put in its own session (setsid) — with "tty", its stdin (a
pseudo-terminal auger opened) becomes that session's controlling terminal, so Ctrl-C
typed into it interrupts the foreground job —, optionally made
read-only (a private mount namespace whose every mount is read-only except the
`writable` dirs, under bubblewrap; under Landlock auger wraps the argv in a
nested read-only ruleset instead), stripped of every capability, and exec'd.
The supervisor is a child subreaper, so daemons that double-fork are reparented
to it; when auger closes the socket, or dies (the kernel closes it then), it kills
every process it can find below it and exits. (No PR_SET_PDEATHSIG: dying at once
would orphan those processes instead.) Under bubblewrap it lives in the PID
namespace bwrap made, so its exit takes the whole namespace with it anyway.

It also installs, on itself and so on every command, a seccomp filter that
refuses the kernel keyring (add_key, request_key, keyctl: the keyring is not
namespaced), creating Unix-domain sockets, and io_uring (which could create and
connect sockets without the socket() call the filter sees).

Why no Unix-domain sockets at all: connect() to a socket by path needs no write
access to the mount (a read-only bind does not stop it) and no network (a new
network namespace only separates abstract sockets), so any socket whose path a
command can reach — docker's, a desktop's, an agent's, anywhere on the machine —
would be reachable. Neither a mount layout (sockets appear anywhere, at any time)
nor seccomp (it cannot read the address connect() is given) can tell those apart
from a socket the session made itself. So commands get none: socketpair() still
works (pipes between a command's own processes), socket(AF_UNIX) fails with EPERM.
Only the network bridge, which runs in front of the supervisor, uses Unix
sockets (to reach the egress proxy).

Stdlib only; imports are kept few because a session waits for it to start.
"""

import ctypes
import errno
import json
import os
import select
import signal
import socket
import struct
import sys

PR_CAPBSET_DROP = 24
PR_SET_SECCOMP = 22
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECCOMP_MODE_FILTER = 2
CLONE_NEWNS = 0x00020000
AT_FDCWD = -100
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1
MS_PRIVATE = 1 << 18
SYS_MOUNT_SETATTR = 442  # the same in every syscall table that has it
LINUX_CAPABILITY_VERSION_3 = 0x20080522

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


def seccomp_program(machine: str = "") -> bytes:
    """The filter as packed `struct sock_filter` entries (8 bytes each).

    Refuses the keyring, io_uring and socket(AF_UNIX, ...) with EPERM; any
    other architecture's syscall ABI (i386 compat, x32) is refused with ENOSYS
    as a whole, so numbers cannot be smuggled through a second table.
    """
    arch = MACHINE_ARCH.get(machine or os.uname().machine)
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
    return b"".join(struct.pack("=HBBI", *ins) for ins in prog)


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


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
        raise OSError(err, what + ": " + os.strerror(err))
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
        _check(libc.syscall(ctypes.c_long(SYS_MOUNT_SETATTR), ctypes.c_int(AT_FDCWD), os.fsencode(path),
                            ctypes.c_uint(0), ctypes.byref(clear), ctypes.c_size_t(ctypes.sizeof(clear))),
               "mount_setattr(" + path + ", writable)")


def _drop_capabilities():
    """Empty every capability set (bounding, ambient, permitted, effective, inheritable)."""
    libc = _c()
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        _prctl(PR_CAPBSET_DROP, cap)
    header = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(libc.capset(header, data), "capset")


def _take_terminal():
    """Make stdin (a pseudo-terminal's slave) the controlling terminal of the new session: the terminal
    then sends SIGINT for Ctrl-C (and SIGWINCH, SIGHUP) to the command's foreground job."""
    import fcntl
    import termios

    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _child(request, fds):
    """In the forked child: never returns."""
    try:
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        if request.get("tty"):
            _take_terminal()
        if request.get("readonly"):
            _make_read_only(request.get("writable", []))
        _drop_capabilities()
        os.chdir(request["cwd"])
        for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        argv = request["argv"]
        os.execve(argv[0], argv, request["env"])
    except BaseException as exc:  # noqa: BLE001 - report anything, then die
        try:
            os.write(2, ("auger sandbox: cannot run the command: %s\n" % (exc,)).encode("utf-8", "replace"))
        except OSError:
            pass
    os._exit(126)


# --- the server loop -------------------------------------------------------------------------

class Supervisor:
    def __init__(self, sock):
        self.sock = sock
        self.ids = {}  # pid -> request id, while the command's first process runs
        self.groups = {}  # request id -> process group: its members may outlive the first process

    def send(self, message):
        try:
            self.sock.send(json.dumps(message).encode())
        except OSError:
            pass

    def handle(self, data, fds):
        try:
            request = json.loads(data)
        except ValueError:
            request = {}
        op = request.get("op")
        for fd in fds:  # only the child's 0, 1 and 2 may reach the command
            os.set_inheritable(fd, False)
        if op == "run" and len(fds) == 3:
            try:
                pid = os.fork()
            except OSError as exc:
                self.send({"id": request.get("id"), "error": "fork failed: %s" % exc.strerror})
            else:
                if pid == 0:
                    self.sock.close()
                    _child(request, fds)
                self.ids[pid] = request.get("id")
                self.groups[request.get("id")] = pid
                self.send({"id": request.get("id"), "pid": pid})
        elif op == "kill":
            pid = self.groups.get(request.get("id"))
            if pid is not None:
                for target in (-pid, pid):  # the group; the leader too, if it left the group
                    try:
                        os.kill(target, int(request.get("sig", signal.SIGKILL)))
                    except (OSError, ValueError):
                        pass
        for fd in fds:
            os.close(fd)

    def reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            request_id = self.ids.pop(pid, None)
            if request_id is not None:
                self.send({"id": request_id, "status": status})

    def serve(self):
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        os.set_blocking(wake_r, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, lambda *_: None)  # the end comes as EOF on the socket
        # poll, not select: the socket keeps the descriptor number it had in auger, which is over
        # select's limit of 1023 once auger runs a few hundred sessions
        poller = select.poll()
        poller.register(self.sock, select.POLLIN)
        poller.register(wake_r, select.POLLIN)
        while True:
            try:
                ready = {fd for fd, _ in poller.poll()}
            except InterruptedError:
                continue
            if wake_r in ready:
                try:
                    os.read(wake_r, 4096)
                except BlockingIOError:
                    pass
                self.reap()
            if self.sock.fileno() in ready:
                try:
                    data, fds, _, _ = socket.recv_fds(self.sock, 1 << 20, 3)
                except OSError:
                    data, fds = b"", []
                if not data:
                    return
                self.handle(data, fds)

    def kill_everything(self):
        """Kill every process below this one, including reparented daemons, until none is left."""
        for pid in list(self.groups.values()):
            try:
                os.kill(-pid, signal.SIGKILL)
            except OSError:
                pass
        me = str(os.getpid())
        for _ in range(200):
            children = _children(me)
            for pid in children:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            while True:
                try:
                    pid, _ = os.waitpid(-1, os.WNOHANG if children else 0)
                except ChildProcessError:
                    return
                if pid == 0:
                    break
            select.select([], [], [], 0.005)


def _children(parent):
    found = []
    for name in os.listdir("/proc"):
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


def main(argv):
    fd = None
    i = 0
    while i < len(argv):
        if argv[i] == "--fd" and i + 1 < len(argv):
            fd = int(argv[i + 1])
            i += 2
        else:
            sys.stderr.write("auger sandbox supervisor: unexpected argument %r\n" % argv[i])
            os._exit(2)
    if fd is None:
        sys.stderr.write("auger sandbox supervisor: --fd is required\n")
        os._exit(2)
    sock = socket.socket(fileno=fd)
    os.set_inheritable(fd, False)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    try:
        install_seccomp()
    except OSError as exc:
        sys.stderr.write("auger sandbox supervisor: %s; refusing to run commands\n" % exc)
        os._exit(126)
    supervisor = Supervisor(sock)
    sock.send(b'{"ready": true}')
    try:
        supervisor.serve()
    finally:
        supervisor.kill_everything()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
