"""Landlock: confine this process's filesystem access, then exec a command.

Usage::

    python -m auger.policy.landlock --rw DIR ... --ro-all --ro PATH ... --deny-read PATH ... -- CMD ARGS...

(`sandbox.LandlockSandbox.wrap` runs this same file's text with `python -S -I -c`,
see there why; a session's supervisor calls `confine_self` with the same options, its text
loaded into auger.policy.supervisor's template.) This module must stay self-contained:
standard library only.

Landlock (Linux >= 5.13) lets an unprivileged process restrict itself and every
process it later starts; the restriction survives `execve` and cannot be lifted.
It is the fallback for machines without a working bubblewrap: it needs no
namespaces, no setuid helper and no mount rights, only the three syscalls used
here (through ctypes, so no extension module is required).

What it can and cannot express, and therefore what this mode guarantees:

- Landlock only *allows*: a rule grants rights on a file or a whole directory
  hierarchy, and everything not granted is denied. "Read everywhere except
  ~/.ssh" is therefore spelled as read rules on every top-level directory of
  `/`, except that a directory containing a denied path is not granted as a
  whole: its entries are granted one by one, skipping the denied ones
  (recursively, down to the denied path). The directories on that path keep
  READ_DIR only (a writable one: every right but reading and executing files), and
  READ_DIR is inherited by everything beneath, so *names* inside a denied
  directory stay listable; the contents do not. Entries created inside such a
  split directory while the ruleset holds are not readable under it (a command's
  own ruleset is built as it starts: auger.policy.sandbox `secrets_layer`). Rules
  hold inodes, not names: a denied file renamed or hard-linked within its
  directory stays unreadable under the ruleset; moving a file out of a split
  writable directory into a subdirectory with rename(2) fails with EXDEV (the
  destination would grant more than the source; `mv` copies instead).
- A grant cannot be taken back lower in the tree: a read-only path inside a
  writable directory (`.git/hooks` in the project) is NOT enforced. Callers must
  not present this mode as protecting it.
- The network: from ABI 4, `--restrict-net` with `--connect PORT`/`--bind PORT`
  limits TCP to those ports (on any host: port rules cannot tell the host's
  loopback from the internet); UDP is not mediated. From ABI 6, `--scope` blocks
  signals to, and abstract Unix sockets of, processes outside the sandbox.
  Connecting to Unix sockets by path is not mediated (the session supervisor
  refuses Unix socket creation with seccomp instead).
- Capabilities: when started with any (typically as root), the bounding and
  ambient sets are cleared before the exec, so the command runs without them —
  otherwise root could load a kernel module or reconfigure the system around
  the ruleset.

If Landlock is unavailable when this runs, it refuses to run the command (exit
126) rather than running it unconfined.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import sys

# Stdlib only, and nothing slow to import: this runs before every confined command
# (`platform`, `typing` and `argparse` would add ~10 ms).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence
    from typing import NoReturn

# Syscall numbers. Landlock arrived after the syscall tables were unified, so it
# has the same numbers in the generic table (aarch64, riscv, ...) and on x86_64
# and i386; only alpha is offset by 110.
_SYSCALLS = {"alpha": (554, 555, 556)}
_DEFAULT_SYSCALLS = (444, 445, 446)
SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = _SYSCALLS.get(os.uname().machine, _DEFAULT_SYSCALLS)

CREATE_RULESET_VERSION = 1 << 0
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4

# Filesystem access rights (include/uapi/linux/landlock.h).
EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13       # ABI 2: link/rename across directories
TRUNCATE = 1 << 14    # ABI 3
IOCTL_DEV = 1 << 15   # ABI 5

# Rights a rule on a non-directory may carry (the kernel rejects the others with EINVAL).
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV


def handled_rights(abi: int) -> int:
    """Every filesystem right the running ABI knows: all of them are restricted, so that
    nothing is allowed by omission; rights newer than the kernel must be left out or
    `landlock_create_ruleset` fails with EINVAL."""
    if abi >= 5:
        return (IOCTL_DEV << 1) - 1
    if abi >= 3:
        return (TRUNCATE << 1) - 1
    if abi >= 2:
        return (REFER << 1) - 1
    return (MAKE_SYM << 1) - 1


def read_rights(abi: int) -> int:
    """What "readable" means: read files, list directories, execute programs (and use
    device ioctls on what can be opened, so terminals keep working)."""
    return (EXECUTE | READ_FILE | READ_DIR | IOCTL_DEV) & handled_rights(abi)


class LandlockUnavailable(OSError):
    """The kernel (or a seccomp filter around us) does not provide Landlock."""


class _RulesetAttr(ctypes.Structure):
    # Passing a smaller size is the documented way to leave network rights (ABI 4) and
    # scopes (ABI 6) unrestricted on kernels that do not know them.
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _NetPortAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


RULE_NET_PORT = 2
NET_BIND_TCP = 1 << 0
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1                # ABI 6


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc: ctypes.CDLL | None = None


def _c() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
        _libc.prctl.restype = ctypes.c_int
    return _libc


def _syscall(number: int, *args: object) -> int:
    result = _c().syscall(ctypes.c_long(number), *args)
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def abi_version() -> int:
    """The kernel's Landlock ABI version (>= 1); raises LandlockUnavailable saying why not."""
    if not sys.platform.startswith("linux"):
        raise LandlockUnavailable(errno.ENOSYS, "Landlock is Linux-only")
    try:
        return _syscall(SYS_CREATE_RULESET, ctypes.c_void_p(None), ctypes.c_size_t(0),
                        ctypes.c_uint32(CREATE_RULESET_VERSION))
    except OSError as exc:
        reason = {
            errno.ENOSYS: "kernel without Landlock (needs Linux >= 5.13), or blocked by seccomp",
            errno.EOPNOTSUPP: "Landlock built in but not enabled (add it to the lsm= boot parameter)",
        }.get(exc.errno or 0, os.strerror(exc.errno or 0))
        raise LandlockUnavailable(exc.errno, reason) from None


# --- planning (pure: which rights on which paths) -------------------------------------------

def _real(path: str) -> str:
    return os.path.realpath(path)


def plan(rw: Sequence[str], deny_read: Sequence[str], ro_all: bool, ro: Sequence[str] = ()) -> list[tuple[str, str]]:
    """The rules to add, as (path, grant) with grant "rw" (everything), "r" (read_rights),
    "ls" (READ_DIR only: the directories on the way to a denied path) or "w" (everything but
    reading and executing files: the writable directories on the way to a denied path).

    Paths are resolved first: Landlock attaches rules to the inodes the paths reach,
    so a symlink grants (or fails to deny) whatever it points at. A denied path inside
    a writable dir splits that grant the same way (the dirs on the way to it stay
    writable: new entries made there are unreadable under this ruleset). A path named with `--rw` or `--ro` *inside* a
    denied one is granted all the same (rules add up, and nothing above it grants
    anything): the deepest path decides, as it does under bubblewrap.
    """
    denied = _Denied(_real(p) for p in deny_read)
    rules: list[tuple[str, str]] = []
    for p in rw:
        rules.extend(_split_rules(_real(p), denied, "rw"))
    if ro_all:
        rules.extend(_split_rules("/", denied, "r"))
    for p in ro:
        rules.extend(_split_rules(_real(p), denied, "r"))
    return rules


class _Denied:
    """The denied paths, and every directory above one: what splitting asks of each entry, at once (a
    project may hold thousands of protected files)."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.paths = set(paths)
        self.above: set[str] = set()
        for path in self.paths:
            parent = os.path.dirname(path)
            while parent not in self.above:
                self.above.add(parent)
                if parent == os.path.dirname(parent):
                    break
                parent = os.path.dirname(parent)


def _split_rules(directory: str, denied: _Denied, grant: str) -> Iterator[tuple[str, str]]:
    """`grant` on `directory`, but for the denied paths beneath it (one above it, or `directory` itself named
    as a grant, does not cover the grant: the deepest path decides)."""
    if directory not in denied.above:
        yield directory, grant
        return
    # A denied path lies below: grant this level entry by entry.
    yield directory, "w" if grant == "rw" else "ls"
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_symlink() or entry.path in denied.paths:
                # Access through a link is checked where it lands, which has its own rule
                # (or none, when it lands in a denied path): nothing to grant here.
                continue
            if entry.is_dir(follow_symlinks=False):
                yield from _split_rules(entry.path, denied, grant)
            else:
                yield entry.path, grant
        except OSError:
            continue


# --- applying ---------------------------------------------------------------------------------

def apply(rules: Sequence[tuple[str, str]], abi: int, net: dict[int, int] | None = None, scope: bool = False) -> None:
    """Build the ruleset, drop capabilities, and restrict this process (and future children).

    `net` (ABI 4+): restrict TCP to the listed ports (connect, bind); `scope` (ABI 6+):
    no signals to, and no abstract Unix sockets of, processes outside the sandbox.
    """
    handled = handled_rights(abi)
    grants = {"rw": handled, "r": read_rights(abi), "ls": READ_DIR, "w": handled & ~(READ_FILE | EXECUTE)}
    attr = _RulesetAttr(handled_access_fs=handled)
    size = 8
    if net is not None and abi >= 4:
        attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP
        size = 16
    if scope and abi >= 6:
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
        size = 24
    ruleset = _syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    try:
        for path, grant in rules:
            _add_rule(ruleset, path, grants[grant])
        if size >= 16 and net is not None:
            for port, access in net.items():
                port_attr = _NetPortAttr(allowed_access=access, port=port)
                _syscall(SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_NET_PORT), ctypes.byref(port_attr),
                         ctypes.c_uint32(0))
        if _c().prctl(PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0),
                      ctypes.c_ulong(0)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(err)}")
        _drop_capabilities()
        _syscall(SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)


def _add_rule(ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # vanished or unreachable: nothing to grant
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= FILE_RIGHTS
        if not access:
            return
        attr = _PathBeneathAttr(allowed_access=access, parent_fd=fd)
        try:
            _syscall(SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH), ctypes.byref(attr),
                     ctypes.c_uint32(0))
        except OSError as exc:
            # Some pseudo-filesystems (nsfs, pipefs) take no rules; skipping them only denies more.
            if exc.errno != errno.EBADFD:
                raise OSError(exc.errno, f"landlock_add_rule({path!r}): {exc.strerror}") from None
    finally:
        os.close(fd)


def _drop_capabilities() -> None:
    """Make sure the exec'd command starts without capabilities.

    Landlock confines paths, not privileges: root with CAP_SYS_MODULE or CAP_SYS_ADMIN
    could step around it. With the bounding and ambient sets empty (and no inheritable
    capabilities), execve gives even uid 0 an empty permitted set.
    """
    status = _capability_status()
    if not any(status.get(k, 0) for k in ("CapEff", "CapPrm", "CapAmb")):
        return
    libc = _c()
    libc.prctl(PR_CAP_AMBIENT, ctypes.c_ulong(PR_CAP_AMBIENT_CLEAR_ALL), ctypes.c_ulong(0), ctypes.c_ulong(0),
               ctypes.c_ulong(0))
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        libc.prctl(PR_CAPBSET_DROP, ctypes.c_ulong(cap), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
    if status.get("CapInh", 0):
        raise OSError(errno.EPERM, "process has inheritable capabilities; refusing to run the command with them")
    if _capability_status().get("CapBnd", 0):
        raise OSError(errno.EPERM, "could not drop the capability bounding set")


def _capability_status() -> dict[str, int]:
    caps: dict[str, int] = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Cap"):
                    key, _, value = line.partition(":")
                    caps[key] = int(value.strip(), 16)
    except (OSError, ValueError):
        pass
    return caps


# --- command line ------------------------------------------------------------------------------

USAGE = ("usage: python -m auger.policy.landlock [--rw PATH]... [--ro-all] [--ro PATH]... [--deny-read PATH]... "
         "[--restrict-net [--connect PORT]... [--bind PORT]...] [--scope] -- CMD [ARGS...]")



class _Options:
    def __init__(self) -> None:
        self.rw: list[str] = []
        self.ro: list[str] = []
        self.deny: list[str] = []
        self.ro_all = False
        self.net: dict[int, int] | None = None
        self.scope = False
        self.command: list[str] = []


def _parse(argv: Sequence[str], command: bool = True) -> _Options:
    """Hand-rolled (argparse costs import time on every command). `command`: a command must follow `--`."""
    opts = _Options()
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--" and command:
            opts.command = list(argv[i + 1:])
            if not opts.command:
                raise ValueError("no command after --")
            return opts
        if arg in ("--ro-all", "--restrict-net", "--scope"):
            if arg == "--ro-all":
                opts.ro_all = True
            elif arg == "--scope":
                opts.scope = True
            elif opts.net is None:
                opts.net = {}
            i += 1
        elif arg in ("--connect", "--bind"):
            if i + 1 >= len(argv) or not argv[i + 1].isdigit() or not 0 < int(argv[i + 1]) < 65536:
                raise ValueError(f"{arg} needs a port number")
            if opts.net is None:
                opts.net = {}
            port = int(argv[i + 1])
            opts.net[port] = opts.net.get(port, 0) | (NET_CONNECT_TCP if arg == "--connect" else NET_BIND_TCP)
            i += 2
        elif arg in ("--rw", "--ro", "--deny-read"):
            if i + 1 >= len(argv):
                raise ValueError(f"{arg} needs a path")
            {"--rw": opts.rw, "--ro": opts.ro, "--deny-read": opts.deny}[arg].append(argv[i + 1])
            i += 2
        else:
            raise ValueError(f"unknown option {arg!r}")
    if not command:
        return opts
    raise ValueError("missing -- before the command")


def _fail(code: int, message: str) -> NoReturn:
    sys.stderr.write(f"auger-landlock: {message}\n")
    sys.stderr.flush()
    os._exit(code)


def confine_self(argv: Sequence[str]) -> None:
    """Restrict this process (and what it starts) by the options `main` takes, without a command: how
    the session's supervisor, forked from auger.policy.supervisor's template, confines itself. Raises
    ValueError (bad options) or OSError (LandlockUnavailable among them) instead of running unconfined."""
    opts = _parse(argv, command=False)
    apply(plan(opts.rw, opts.deny, opts.ro_all, opts.ro), abi_version(), opts.net, opts.scope)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    try:
        opts = _parse(sys.argv[1:] if argv is None else argv)
    except ValueError as exc:
        _fail(2, f"{exc}\n{USAGE}")
    try:
        abi = abi_version()
    except LandlockUnavailable as exc:
        _fail(126, f"Landlock unavailable ({exc.strerror}); refusing to run the command unconfined")
    try:
        apply(plan(opts.rw, opts.deny, opts.ro_all, opts.ro), abi, opts.net, opts.scope)
    except OSError as exc:
        _fail(126, f"could not apply the sandbox: {exc.strerror or exc}; refusing to run the command")
    sys.stdout.flush()
    try:
        os.execvp(opts.command[0], opts.command)
    except OSError as exc:
        _fail(127 if exc.errno == errno.ENOENT else 126, f"{opts.command[0]}: {exc.strerror}")


if __name__ == "__main__":
    main()
