"""The OS sandbox for shell commands (Linux): what a command may write, read and reach.

`policy.paths` keeps the *file tools* inside the project, but a shell command is
arbitrary code: only the kernel can hold it to the same rules. `detect()` picks
the strongest mechanism that works on this machine, and its `wrap()` turns a
command line into one that runs confined:

- **bubblewrap** (preferred): a new mount namespace where `/` is bound read-only,
  the project root, the session's writable dirs and the writable roots the user
  granted it (`SandboxPolicy.granted`) are bound read-write, `/tmp`,
  `/run` and `/dev` are fresh, `.git` is bound over itself and its config, hooks,
  pack files and friends (and auger's installation) are bound read-only on top,
  and credential paths and auger's own files are covered (an empty tmpfs over
  directories, `/dev/null` over files), with what the session needs inside them
  bound again on top. The project's protected files (`SandboxPolicy.secrets`,
  secrets/protected.py) are covered the same way, files by an empty file nobody may
  read (`cover`), so reading one fails with "Permission denied" instead of looking
  empty; a mount point cannot be renamed, removed, linked or replaced either.
  New user (as root), PID, IPC, UTS and cgroup namespaces; a
  new network namespace (loopback only) unless the network is "full".
- **Landlock** (fallback): see `auger.policy.landlock`. Allow-rules only, so
  read-only paths inside the writable project (`.git`) are *not* enforced; TCP is
  restricted by port from ABI 4, signals and abstract sockets scoped from ABI 6.
  The project's protected files are left out of a ruleset each command gets on top
  of the session's (`secrets_layer`): what exists when it starts is unreadable to it.

Sessions do not wrap each command: a session's sandbox (bwrap around a holder,
`holder_argv`, or the Landlock ruleset, `supervisor_options`) holds a supervisor
(`auger.policy.supervisor`), which confines each command it starts (read-only ones
through `readonly_argv`). `wrap()` confines a single command.

`blocked_by_sandbox()` reads a failed command's stderr and, when the sandbox is the
likely cause, tells the model so in one line, so it stops retrying variations of
a write it can never make.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterable, Mapping, Protocol, Sequence

from auger import json_cache
from auger.lazy_dataclass import Deferred, dataclass
from auger.lazy_regex import lazy_compile
from auger.policy.paths import is_inside
from auger.policy.types import PROTECTED_BLOCKED

NETWORK_MODES = ("none", "proxy", "full")
PREFERENCES = ("auto", "bwrap", "landlock", "off")
PROBE_TIMEOUT = 5.0
SYSTEM_BIN = "/usr/bin:/bin:/usr/local/bin:/usr/sbin:/sbin:/run/current-system/sw/bin"

# Credentials and secrets commonly kept in a home directory ("~" is the HOME of the
# command's environment, and the user's home from the password database too).
DEFAULT_HIDDEN: tuple[str, ...] = (
    "~/.ssh", "~/.aws", "~/.gnupg", "~/.config/gcloud", "~/.azure", "~/.kube",
    "~/.docker/config.json", "~/.netrc", "~/.git-credentials", "~/.config/git/credentials",
    "~/.pypirc", "~/.npmrc", "~/.yarnrc.yml", "~/.config/gh", "~/.config/hub", "~/.password-store",
    "~/.cargo/credentials", "~/.cargo/credentials.toml", "~/.gem/credentials",
    "~/.terraform.d/credentials.tfrc.json", "~/.vault-token", "~/.pgpass", "~/.my.cnf",
    "~/.config/op", "~/.oci", "~/.config/doctl", "~/.s3cfg", "~/.boto", "~/.config/rclone",
    "~/.local/share/keyrings", "~/.mozilla", "~/.config/google-chrome", "~/.config/chromium",
    "~/.bash_history", "~/.zsh_history", "~/.docker/run",
)

# Unix sockets that hand out control of the machine or the user's session (a read-only
# mount does not stop connect(), and --unshare-net only separates abstract sockets).
# Hidden under bubblewrap; Landlock cannot mediate connect(), see landlock.py.
SYSTEM_HIDDEN: tuple[str, ...] = (
    "/run/docker.sock", "/var/run/docker.sock", "/run/containerd", "/run/podman", "/run/dbus",
    "/run/systemd/private", "/run/user", "/run/screen", "/run/snapd.socket", "/run/libvirt", "/run/lxd",
)
# The same, for session sockets living in the (writable) temp dir: X11, tmux, ssh-agent.
TEMP_HIDDEN_GLOBS: tuple[str, ...] = (".X11-unix", ".ICE-unix", "tmux-*", "ssh-*", "screens")

# Device files a Landlock-confined command may write (bwrap builds its own /dev).
LANDLOCK_DEVICES: tuple[str, ...] = (
    "/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts",
)


def default_hidden(home: Path) -> tuple[Path, ...]:
    """DEFAULT_HIDDEN with "~" expanded to `home` (not resolved; absolute entries kept)."""
    return tuple(home / entry[2:] if entry.startswith("~/") else Path(entry) for entry in DEFAULT_HIDDEN)


@dataclass(frozen=True)
class SandboxPolicy(Deferred):
    """What a command may touch. Paths are taken as given and resolved by `wrap`."""

    root: Path                        # resolved project root: writable
    writable: tuple[Path, ...] = ()   # extra writable dirs (the session scratch dir); the temp dir always is
    # Dirs outside the project the user let commands write beneath (policy/writable_roots.py): writable like
    # the project, so for commands that may write only (a read-only command gets the scratch dirs alone).
    granted: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()  # read-only even inside writable dirs (root/.git/hooks always added)
    hidden: tuple[Path, ...] = ()     # not readable, on top of DEFAULT_HIDDEN (auger's own dirs, say)
    exposed: tuple[Path, ...] = ()    # readable although inside a hidden path (what the session's commands need)
    network: str = "none"             # "none" | "proxy" | "full"
    # (the port commands connect to, the Unix socket on the host a bwrap sandbox's bridge forwards it to; None
    # for a command on the host's own network, which reaches the proxy's port itself): HTTP, then SOCKS
    proxy_sockets: tuple[tuple[int, Path | None], ...] = ()
    tmp: Path | None = None           # the session's own temp dir (Landlock; bwrap gives /tmp a fresh tmpfs)
    dev_ports: tuple[int, ...] = ()   # Landlock ABI 4+: local TCP ports commands may bind and connect to
    # The project's protected files and directories (secrets/protected.py) found as the sandbox starts: bwrap
    # covers them (files with `cover`, an empty file nobody may read; /dev/null without one); Landlock leaves
    # them out of each command's own ruleset (`secrets_layer`) instead, found again for every command.
    secrets: tuple[Path, ...] = ()
    cover: Path | None = None

    def __post_init__(self) -> None:
        if self.network not in NETWORK_MODES:
            raise ValueError(f"network must be one of {NETWORK_MODES}, not {self.network!r}")

    def bridged(self) -> list[tuple[int, Path]]:
        """The (port inside, Unix socket on the host) pairs a bubblewrap sandbox's bridge forwards: none
        unless the network goes through the proxy. ValueError for a policy made for the host's network
        (its proxy listens on loopback ports only)."""
        if self.network != "proxy":
            return []
        pairs = []
        for port, sock in self.proxy_sockets:
            if sock is None:
                raise ValueError("the egress proxy has no Unix socket for a sandbox's bridge")
            pairs.append((port, sock))
        return pairs


@dataclass(frozen=True)
class Wrapped(Deferred):
    """A command ready to run confined.

    kind "bwrap": everything in SandboxPolicy is enforced.
    kind "landlock": writes are confined and hidden paths are unreadable, but read-only
    paths inside writable dirs (.git) are NOT protected, the network is only restricted
    by TCP port from ABI 4, and (without the session supervisor) Unix sockets stay
    reachable and processes the command forks into the background are not tied to it.
    """

    argv: list[str]          # what to exec instead of the original argv
    env: dict[str, str]      # environment to use (adds proxy variables when network == "proxy")
    kind: str                # "bwrap" | "landlock"


class Sandbox(Protocol):
    kind: str

    def wrap(self, argv: list[str], cwd: Path, env: dict[str, str], policy: SandboxPolicy) -> Wrapped: ...

    def readonly_argv(self, argv: list[str], policy: SandboxPolicy, offline: bool = False) -> tuple[list[str], bool]:
        """(argv to run read-only, whether the supervisor must make the mounts read-only itself); `offline`:
        without network too, where this sandbox does that in the argv."""

    def secrets_layer(self, secrets: Sequence[Path]) -> list[str] | None: ...


# --- shared planning --------------------------------------------------------------------------

def _real(path: Path | str) -> Path:
    return Path(os.path.realpath(os.path.expanduser(os.fspath(path))))


def _existing_real(paths: Iterable[Path | str]) -> set[Path]:
    """The resolved forms of those of `paths` that exist. Whether a path exists is asked first, with one
    stat (which follows symlinks as resolving does): most credential paths a sandbox hides are absent, and
    resolving one walks each of its components."""
    return {r for r in (_real(p) for p in paths if os.path.exists(os.path.expanduser(os.fspath(p))))
            if os.path.exists(r)}


def user_homes(env: Mapping[str, str]) -> list[Path]:
    """The command's HOME and the user's real home: secrets are hidden in both."""
    homes = []
    if env.get("HOME"):
        homes.append(_real(env["HOME"]))
    try:
        homes.append(_real(pwd.getpwuid(os.getuid()).pw_dir))
    except KeyError:
        pass
    return list(dict.fromkeys(homes))


def temp_dir(env: dict[str, str]) -> Path:
    """The temp dir the command will use: its TMPDIR if that is a directory, else the system's.

    A TMPDIR of "/" or one containing a home directory would open far too much; those fall
    back to the system default.
    """
    candidate = env.get("TMPDIR", "")
    if candidate and os.path.isabs(candidate) and os.path.isdir(candidate):
        tmp = _real(candidate)
        if tmp != Path("/") and not any(is_inside(tmp, home) for home in user_homes(env)):
            return tmp
    return _real(tempfile.gettempdir())


def _essential_paths() -> list[Path]:
    """What the sandbox itself needs to read: the interpreter, its stdlib, and auger."""
    return [_real(sys.executable), _real(sys.prefix), _real(sys.base_prefix), Path(__file__).resolve().parents[1],
            _real(_stdlib_dir())]


def _stdlib_dir() -> str:
    """Where the standard library lives: `os`'s directory (sysconfig's "stdlib" path, without loading the
    build's configuration data that sysconfig reads first: 1–5 ms at a sandbox's first start)."""
    found = getattr(os, "__file__", None)
    if found:
        return os.path.dirname(found)
    import sysconfig

    return sysconfig.get_paths()["stdlib"]


@dataclass(frozen=True)
class _Plan(Deferred):
    """Resolved, de-duplicated paths for one command. Where they nest, the deeper one decides: a
    writable dir inside a hidden one is visible and writable, a read-only one inside a writable one
    is read-only, a hidden one inside either is hidden."""

    writable: list[Path]
    read_only: list[Path]
    hidden: list[Path]
    exposed: list[Path]  # read-only paths inside hidden ones that commands need (bwrap binds them, Landlock grants)
    secrets: list[Path]  # the protected files among `hidden` (resolved): bwrap covers them with `policy.cover`


# Pack files of the project's repository protected from deletion and rewriting (bwrap: each one a
# read-only mount point). Loose objects are not: a mount per file costs ~1 ms at start, and there
# may be thousands of them.
MAX_PROTECTED_PACK_FILES = 32
_PACK_SUFFIXES = (".pack", ".idx", ".rev", ".bitmap", ".mtimes", ".promisor", ".keep")


def _pack_files(git: Path) -> list[Path]:
    """The existing pack files of a repository (the oldest first: they hold most of the history)."""
    try:
        entries = [e for e in os.scandir(git / "objects" / "pack")
                   if e.name.endswith(_PACK_SUFFIXES) and e.is_file(follow_symlinks=False)]
    except OSError:
        return []
    entries.sort(key=lambda e: (e.stat(follow_symlinks=False).st_mtime_ns, e.name))
    return [Path(e.path) for e in entries[:MAX_PROTECTED_PACK_FILES]]


def _plan(env: dict[str, str], policy: SandboxPolicy, tmp: Path | None) -> _Plan:
    """Paths for a sandbox. `tmp` is a host temp dir to make writable (Landlock), or None
    when the sandbox gives commands a fresh /tmp of their own (bwrap). Nothing is created in the
    project: protecting a name that does not exist yet is left to `policy.gitsweep`."""
    from auger.policy.gitsweep import GIT_PROTECTED

    root = _real(policy.root)
    writable = [root] + ([tmp] if tmp is not None else [])
    for extra in policy.writable:
        # The scratch dir is created lazily by the shell tool: make it now, or it could
        # not be bound (bwrap) or granted (Landlock).
        Path(extra).mkdir(parents=True, exist_ok=True)
        writable.append(_real(extra))
    writable += [path for path in map(_real, policy.granted) if path.is_dir()]  # one removed since: not bound
    writable = sorted(set(writable), key=lambda p: len(p.parts))

    git = root / ".git"
    # auger's own installation too (a project's virtualenv may hold it): a command must not
    # change the code that confines the next session.
    installed = [Path(__file__).resolve().parents[1], _real(sys.prefix)]
    read_only = [*(git / name for name in GIT_PROTECTED), *installed, *policy.read_only]
    if git.is_file() or git.is_symlink():
        read_only.append(git)  # a worktree's or submodule's `gitdir:` pointer
    elif git.is_dir():
        read_only.extend(_pack_files(git))  # history: append-only where a mount can say so

    hidden: list[Path] = [*policy.hidden, *policy.secrets]
    for home in user_homes(env):
        hidden.extend(default_hidden(home))
    hidden.extend(Path(p) for p in SYSTEM_HIDDEN)
    if env.get("SSH_AUTH_SOCK"):
        hidden.append(Path(env["SSH_AUTH_SOCK"]))
    if tmp is not None:
        for pattern in TEMP_HIDDEN_GLOBS:
            hidden.extend(tmp.glob(pattern))

    # Resolve and keep what exists (a dangling symlink has nothing to hide, and covering its
    # missing target would make bwrap fail every command). A hidden path stays hidden even when
    # something commands need lies inside it (the session's worktree in auger's data dir, the
    # interpreter in a hidden home): that is shown again on top. Only a hidden path that *is* one
    # of those is dropped. A credential path inside the project stays hidden (a project that is
    # the home directory, or contains it), and the working directory plays no part: where a
    # command starts must not decide what it can read.
    # Containment is looked up by ancestors in a set: a project may hold thousands of protected files.
    needed = [*_essential_paths(), *(_real(p) for p in policy.exposed)]
    hidden_real = sorted(_existing_real(hidden), key=lambda p: len(p.parts))
    hidden_final: list[Path] = []
    kept: set[Path] = set()
    for h in hidden_real:
        if h in writable or h in needed or h in kept or any(parent in kept for parent in h.parents):
            continue
        hidden_final.append(h)
        kept.add(h)

    def shown(path: Path) -> bool:
        """Visible to commands: not hidden, or inside something shown again within the hidden path."""
        cover = next((h for h in (path, *path.parents) if h in kept), None)
        return cover is None or any(is_inside(cover, v) and is_inside(v, path) for v in [*writable, *needed])

    ro_final = sorted({_real(p) for p in read_only if os.path.lexists(p) and not os.path.islink(p)},
                      key=lambda p: len(p.parts))
    ro_final = [p for p in ro_final if shown(p)]
    exposed = sorted({v for v in needed if os.path.exists(v) and any(h in kept for h in v.parents)
                      and not any(is_inside(w, v) for w in writable)}, key=lambda p: len(p.parts))
    secrets = {r for r in map(_real, policy.secrets) if r in kept}
    return _Plan(writable=writable, read_only=ro_final, hidden=hidden_final, exposed=exposed,
                 secrets=sorted(secrets, key=lambda p: len(p.parts)))


def _proxy_env(env: dict[str, str], policy: SandboxPolicy) -> dict[str, str]:
    """Point HTTP(S) clients at the first bridged port and SOCKS clients at the second."""
    out = dict(env)
    if policy.network != "proxy" or not policy.proxy_sockets:
        return out
    http_port = policy.proxy_sockets[0][0]
    http = f"http://127.0.0.1:{http_port}"
    out.update({"HTTP_PROXY": http, "HTTPS_PROXY": http, "http_proxy": http, "https_proxy": http})
    if len(policy.proxy_sockets) > 1:
        socks = f"socks5h://127.0.0.1:{policy.proxy_sockets[1][0]}"
        out.update({"ALL_PROXY": socks, "all_proxy": socks})
    out.update({"NO_PROXY": "localhost,127.0.0.1,::1", "no_proxy": "localhost,127.0.0.1,::1"})
    return out


# --- bubblewrap -------------------------------------------------------------------------------

_FRESH = (("/", "tmp"), ("/", "run"))  # fresh tmpfs dirs in the bwrap sandbox


class BwrapSandbox:
    """Mount-namespace sandbox through the `bwrap` binary (see the module docstring)."""

    kind = "bwrap"

    def __init__(self, path: str, version: tuple[int, ...]):
        self.path = path
        self.version = version

    def _base(self, network: str, holder: bool = False) -> list[str]:
        # A session's sandbox ends when its holder's input does (auger closed it, or died), never with bwrap's
        # parent (the template): a bwrap killed between making its namespaces and letting its child run
        # would leave that child waiting for it forever. A single command's sandbox ends with its caller.
        args = [self.path, *(() if holder else ("--die-with-parent",)), "--new-session", "--unshare-pid",
                "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if network != "full":
            args.append("--unshare-net")
        if os.geteuid() == 0:
            # As root, a user namespace of its own keeps whatever capability the sandbox holds (the
            # supervisor's CAP_SYS_ADMIN, to make mounts read-only per command) scoped to the sandbox
            # instead of the host (and gives the supervisor a namespace to join: see supervisor.py).
            args += ["--unshare-user", "--uid", "0", "--gid", "0"]
        # Nothing bwrap starts keeps a capability: commands run without any, and the supervisor has its
        # own (CAP_SYS_ADMIN and CAP_SETPCAP) from joining the sandbox's user namespace.
        args += ["--cap-drop", "ALL"]
        if holder:
            # The holder is pid 1 (the supervisor reaps what commands leave behind: it is their subreaper).
            args.append("--as-pid-1")
        # /proc/sys stays writable for uid 0 (core_pattern is a host-root escape): cover it.
        args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys"]
        # Fresh /tmp, /run and /dev/shm (bwrap's /dev has its own): host Unix sockets
        # (docker, ssh-agent, dbus, X11, systemd) live there and connect() ignores read-only mounts.
        args += ["--tmpfs", "/tmp", "--tmpfs", "/run"]
        if os.path.isdir("/var/run") and not os.path.islink("/var/run"):
            args += ["--tmpfs", "/var/run"]
        return args

    def _mounts(self, env: dict[str, str], policy: SandboxPolicy, *, secrets: bool = True) -> list[str]:
        """The mounts over the read-only `/`. A later mount covers an earlier one, so they go shallowest
        first (at one path: writable, then read-only, then hidden) and the deepest path decides (see
        `_Plan`): the project writable, `.git` bound over itself, its config and hooks read-only, a
        credential file in it hidden, the session's worktree shown again inside auger's hidden data dir."""
        return self._planned_mounts(_plan(env, policy, tmp=None), env, policy, secrets=secrets)

    def _planned_mounts(self, plan: _Plan, env: dict[str, str], policy: SandboxPolicy, *, secrets: bool) -> list[str]:
        """`_mounts` of a plan; `secrets=False` leaves the protected files to the supervisor (`holder_argv`)."""
        mounts: list[tuple[Path, int, list[str]]] = []  # (path, order at that path, arguments)
        covered = set(plan.secrets)
        homes = user_homes(env)
        for home in homes:  # a home under /tmp or /run stays readable (its secrets hidden below)
            if home.parts[:2] in _FRESH and home.is_dir():
                mounts.append((home, 1, ["--ro-bind", str(home), str(home)]))
        for path in plan.writable:
            mounts.append((path, 0, ["--bind", str(path), str(path)]))
        git = _real(policy.root) / ".git"
        if git.is_dir() and not (policy.root / ".git").is_symlink():
            # A mount point cannot be renamed, removed or replaced (EBUSY).
            mounts.append((git, 0, ["--bind", str(git), str(git)]))
        for path in [*plan.read_only, *plan.exposed]:
            mounts.append((path, 1, ["--ro-bind", str(path), str(path)]))
        # The proxy's sockets read-only: reachable (connect() needs no write access) but not replaceable.
        for sock_dir in sorted({_real(sock).parent for _, sock in policy.bridged()}):
            mounts.append((sock_dir, 1, ["--ro-bind", str(sock_dir), str(sock_dir)]))
        shown = [*plan.writable, *plan.read_only, *plan.exposed]
        for path in plan.hidden:
            if path in covered and not secrets:
                continue
            if path.parts[:2] in _FRESH and not any(is_inside(w, path) for w in [*plan.writable, *homes]):
                continue  # already a fresh, empty tmpfs here
            if not path.is_dir():
                cover = policy.cover if policy.cover is not None and path in covered else "/dev/null"
                mounts.append((path, 2, ["--ro-bind", str(cover), str(path)]))
                continue
            perms: list[str] = []
            if self.version >= (0, 5):
                # "Permission denied", not a confusing empty dir; only passable (not listable) when
                # something inside is shown again.
                inner = any(is_inside(path, v) and v != path for v in shown)
                perms = ["--perms", "0111" if inner else "0000"]
            mounts.append((path, 2, [*perms, "--tmpfs", str(path)]))
        mounts.sort(key=lambda mount: (len(mount[0].parts), mount[1]))
        return [arg for _, _, args in mounts for arg in args]

    def _bridge(self, policy: SandboxPolicy) -> list[str]:
        """The network bridge in front of a single command, when the network goes through the proxy."""
        pairs = policy.bridged()
        if not pairs:
            return []
        bridge = [_python(), "-S", "-I", "-c", _source(SUPERVISOR_SCRIPT)]
        for port, sock in pairs:
            bridge += ["--listen", f"{port}={_real(sock)}"]
        return [*bridge, "--"]

    def wrap(self, argv: list[str], cwd: Path, env: dict[str, str], policy: SandboxPolicy) -> Wrapped:
        """One command in a sandbox of its own (sessions use `holder_argv` and a supervisor instead)."""
        args = [*self._base(policy.network), *self._mounts(env, policy)]
        args += ["--chdir", str(_real(cwd)), "--", *self._bridge(policy), *argv]
        return Wrapped(argv=args, env=_sandbox_env(env, policy, "/tmp"), kind=self.kind)

    def holder_argv(self, env: dict[str, str], policy: SandboxPolicy, holder: list[str], *, info_fd: int,
                    seccomp_fd: int) -> tuple[list[str], list[tuple[str, bool]]]:
        """The session's sandbox around `holder`, pid 1 of its PID namespace, under the seccomp filter
        read from `seccomp_fd`; bwrap writes the holder's pid and namespaces to `info_fd` (see supervised.py).
        With it, the protected files the supervisor covers as it starts ((path, is a directory)): bwrap reads
        the whole mount table for each mount it makes, so a thousand of them took it seconds, where the
        supervisor's own mount calls take milliseconds."""
        plan = _plan(env, policy, tmp=None)
        args = [*self._base(policy.network, holder=True), *self._planned_mounts(plan, env, policy, secrets=False)]
        argv = [*args, "--chdir", "/", "--info-fd", str(info_fd), "--seccomp", str(seccomp_fd), "--", *holder]
        return argv, [(str(path), path.is_dir()) for path in plan.secrets]

    def readonly_argv(self, argv: list[str], policy: SandboxPolicy, offline: bool = False) -> tuple[list[str], bool]:
        """(argv, whether the supervisor must make the mounts read-only itself); the supervisor also gives an
        offline command its own network namespace (SessionSandbox.run's `offline`)."""
        return argv, True

    def secrets_layer(self, secrets: Sequence[Path]) -> list[str] | None:
        """None: the supervisor covered the protected files as the sandbox started (`holder_argv`)."""
        return None

    def probe(self) -> str | None:
        """Run `true` with the namespace flags a session's sandbox uses; None if it works, else why not."""
        args = [*self._base("none", holder=True), "--", "true"]
        try:
            proc = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT)
        except subprocess.TimeoutExpired:
            return f"bwrap probe timed out after {PROBE_TIMEOUT:.0f}s"
        except OSError as exc:
            return f"bwrap could not start ({exc.strerror})"
        if proc.returncode != 0:
            detail = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            return f"bwrap probe failed ({detail[-1] if detail else f'exit {proc.returncode}'})"
        return None


SUPERVISOR_SCRIPT = Path(__file__).with_name("supervisor.py")
_sources: dict[str, str] = {}


def _source(path: Path | str) -> str:
    """A helper script's text, read once per process: what runs inside the sandbox is never
    loaded from a path that a command (in a project's own virtualenv, say) could have changed."""
    key = os.fspath(path)
    if key not in _sources:
        _sources[key] = Path(key).read_text(encoding="utf-8")
    return _sources[key]


def _python() -> str:
    """The base interpreter: a project's virtualenv `python` is a symlink a command can replace."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def _sandbox_env(env: dict[str, str], policy: SandboxPolicy, tmp: str | None) -> dict[str, str]:
    out = _proxy_env(env, policy)
    if tmp is not None:
        out.update({"TMPDIR": tmp, "TMP": tmp, "TEMP": tmp})
    return out


def _bwrap_version(path: str) -> tuple[int, ...]:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=PROBE_TIMEOUT).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ()
    match = re.search(r"(\d+(?:\.\d+)+)", out)
    return tuple(int(x) for x in match.group(1).split(".")) if match else ()


# --- Landlock ---------------------------------------------------------------------------------

class LandlockSandbox:
    """Filesystem-only confinement through the `auger.policy.landlock` helper (see that module).

    The helper runs *before* the ruleset exists, so nothing it loads may be writable by
    earlier commands. `python -m auger.policy.landlock` would not do: with auger
    installed in the project's own virtualenv (common), the model could edit
    `landlock.py`, drop a `.pth` file into site-packages, or plant an `auger/` package in
    the working directory, and the next command would start unconfined. So the helper's
    source is read once, when the sandbox is created, and passed with `-c` to the base
    interpreter (outside any venv) in isolated mode without site (`-S -I`): only the
    standard library is loaded from disk. It is also ~20 ms faster than `-m`.
    """

    kind = "landlock"

    def __init__(self, abi: int, helper_source: str | None = None):
        from auger.policy import landlock

        self.abi = abi
        self.helper_source = helper_source or Path(landlock.__file__).read_text(encoding="utf-8")
        self.python = _python()

    def _options(self, env: dict[str, str], policy: SandboxPolicy) -> tuple[list[str], Path]:
        """The helper's options for the session's ruleset, and the temp dir it makes writable."""
        tmp = _real(policy.tmp) if policy.tmp is not None else temp_dir(env)
        if policy.tmp is not None:
            Path(policy.tmp).mkdir(parents=True, exist_ok=True)
        plan = _plan(env, policy, tmp=tmp)
        args: list[str] = []
        for path in [*plan.writable, *(Path(d) for d in LANDLOCK_DEVICES)]:
            args += ["--rw", str(path)]
        args.append("--ro-all")
        for path in plan.exposed:
            args += ["--ro", str(path)]
        for path in plan.hidden:  # inside a writable dir too: the helper splits that grant around it
            if path not in plan.secrets:  # those are left out of each command's own ruleset (`secrets_layer`)
                args += ["--deny-read", str(path)]
        if self.abi >= 4 and policy.network != "full":
            args.append("--restrict-net")
            ports = [port for port, _ in policy.proxy_sockets] if policy.network == "proxy" else []
            for port in ports:
                args += ["--connect", str(port)]
            for port in policy.dev_ports:
                args += ["--connect", str(port), "--bind", str(port)]
        if self.abi >= 6:
            args.append("--scope")
        return args, tmp

    def wrap(self, argv: list[str], cwd: Path, env: dict[str, str], policy: SandboxPolicy) -> Wrapped:
        """One command under its own ruleset (sessions use `supervisor_options` and a supervisor instead).
        Read-only paths are not passed on: Landlock cannot take back a grant, so `.git`
        stays writable here (see `Wrapped`)."""
        options, tmp = self._options(env, policy)
        tmp_env = str(tmp) if policy.tmp is not None else None
        args = [self.python, "-S", "-I", "-c", self.helper_source, *options, "--", *argv]
        return Wrapped(argv=args, env=_sandbox_env(env, policy, tmp_env), kind=self.kind)

    def supervisor_options(self, env: dict[str, str], policy: SandboxPolicy) -> list[str]:
        """The session's ruleset, as the options the supervisor confines itself with (`landlock.confine_self`)."""
        return self._options(env, policy)[0]

    def readonly_argv(self, argv: list[str], policy: SandboxPolicy, offline: bool = False) -> tuple[list[str], bool]:
        """`argv` under a nested, stricter ruleset: nothing writable but the scratch dirs; `offline`: no TCP
        connection or listening port either (ABI 4+; below it Landlock cannot take the network away)."""
        args = [self.python, "-S", "-I", "-c", self.helper_source]
        scratch = [*policy.writable, *([policy.tmp] if policy.tmp is not None else [])]
        for path in [*scratch, *(Path(d) for d in LANDLOCK_DEVICES)]:
            args += ["--rw", str(path)]
        if offline and self.abi >= 4:
            args.append("--restrict-net")
        return [*args, "--ro-all", "--", *argv], False

    def secrets_layer(self, secrets: Sequence[Path]) -> list[str] | None:
        """The ruleset (`landlock.confine_self`'s options) a command gets on top of the session's, which the
        supervisor applies in the command's process before it runs: everything the session's allows but reading
        `secrets` (the protected files that exist as the command starts). The session's ruleset does not leave
        them out itself: Landlock leaves a file out only by granting its directory's other entries one by one,
        so an entry made after the ruleset stays unreadable under it; a command's own ruleset is made as it
        starts. None when there is nothing to leave out."""
        if not secrets:
            return None
        return ["--rw", "/", *(arg for path in secrets for arg in ("--deny-read", str(path)))]


# --- detection --------------------------------------------------------------------------------

_cache: dict[str, tuple[Sandbox | None, str]] = {}
_cache_lock = threading.Lock()
def landlock_limits(abi: int) -> str:
    """What Landlock at this ABI does not do, in one clause (the warnings say what auto mode does about it)."""
    limits = ["no read-only paths inside the writable project (.git not protected)"]
    limits.append("TCP restricted by port only, UDP not restricted" if abi >= 4 else "network NOT restricted")
    if abi < 6:
        limits.append("signals and abstract sockets to host processes NOT blocked")
    return "; ".join(limits)


def detect(preference: str = "auto") -> tuple[Sandbox | None, str]:
    """Pick the best working sandbox: "auto" (bwrap, else landlock), "bwrap", "landlock", or "off".

    Returns (sandbox or None, a one-line explanation). Both mechanisms are probed for real
    (bwrap runs `true` once; Landlock is asked for its ABI version), because being
    installed is not the same as working: containers often forbid namespaces, and kernels
    may build Landlock without enabling it. The answer is kept per preference for the process, and
    bwrap's (its version, whether the probe ran) in auger's cache dir across processes (`_checked_bwrap`).
    """
    if preference not in PREFERENCES:
        raise ValueError(f"sandbox preference must be one of {PREFERENCES}, not {preference!r}")
    with _cache_lock:
        if preference not in _cache:
            _cache[preference] = _detect(preference)
        return _cache[preference]


def detect_ahead(preference: str) -> None:
    """Start `detect(preference)` on a thread now. Front ends call this first, so that on a first start
    bwrap's two checks (a process each) overlap their imports; the session's own `detect` then waits for the
    answer (on the lock) instead of asking again. Any problem is left for that call to report."""
    with _cache_lock:
        if preference not in PREFERENCES or preference in _cache:
            return

    def run() -> None:
        try:
            detect(preference)
        except Exception:  # noqa: BLE001 - the session's own call meets it again and reports it
            pass

    threading.Thread(target=run, name="auger-sandbox-detect", daemon=True).start()


def _detect(preference: str) -> tuple[Sandbox | None, str]:
    if preference == "off":
        return None, "no sandbox: turned off by configuration"
    bwrap_reason = ""
    if preference in ("auto", "bwrap"):
        # System locations first: PATH often starts with project dirs (.venv/bin,
        # node_modules/.bin) where a command could have planted a fake `bwrap`.
        found = shutil.which("bwrap", path=SYSTEM_BIN) or shutil.which("bwrap")
        if not found:
            bwrap_reason = "bwrap not installed"
        else:
            version, failure = _checked_bwrap(found)
            if failure is None:
                shown = ".".join(map(str, version)) or "(unknown version)"
                return BwrapSandbox(found, version), f"bubblewrap {shown} (filesystem + network)"
            bwrap_reason = failure
        if preference == "bwrap":
            return None, f"no sandbox: {bwrap_reason}"
    from auger.policy import landlock

    try:
        abi = landlock.abi_version()
    except landlock.LandlockUnavailable as exc:
        landlock_reason = f"Landlock unavailable ({exc.strerror})"
    else:
        if abi >= 1:
            prefix = f"{bwrap_reason}; using " if bwrap_reason else ""
            return LandlockSandbox(abi), f"{prefix}Landlock ABI {abi} ({landlock_limits(abi)})"
        landlock_reason = "Landlock unavailable (kernel ABI < 1)"
    if preference == "landlock":
        return None, f"no sandbox: {landlock_reason}"
    return None, f"no sandbox: {bwrap_reason} and {landlock_reason}"


DETECTION_FILE = "sandbox-detection.json"  # in auger's cache dir: the last bwrap checked, and how it went
DETECTION_TTL = 86_400.0  # seconds a check is believed: a change of the system's namespace settings is seen


def _checked_bwrap(path: str) -> tuple[tuple[int, ...], str | None]:
    """(version, why the probe failed or None) of the bwrap at `path`: run once, then read from auger's
    cache dir while the same binary (path, mtime, size) runs on the same kernel (`uname -r`), for at most
    DETECTION_TTL. Spawning it twice cost every session's start 10-20 ms."""
    from auger.config import home_dirs

    cache_dir = home_dirs()["cache"]
    key = _bwrap_key(path)
    kept = json_cache.read(cache_dir / DETECTION_FILE)
    at = kept.get("at")
    if key is not None and kept.get("key") == key and isinstance(at, (int, float)) \
            and 0 <= time.time() - at < DETECTION_TTL and isinstance(kept.get("version"), list):
        failure = kept.get("failure")
        return tuple(int(n) for n in kept["version"]), failure if isinstance(failure, str) else None
    version = _bwrap_version(path)
    failure = BwrapSandbox(path, version).probe()
    if key is not None:
        json_cache.write(cache_dir / DETECTION_FILE, {"key": key, "at": time.time(), "version": list(version),
                                                 "failure": failure})
    return version, failure


def _bwrap_key(path: str) -> dict[str, object] | None:
    """What a check of the bwrap at `path` holds for: the binary (path, mtime, size) and the kernel."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return {"path": path, "mtime_ns": st.st_mtime_ns, "size": st.st_size, "kernel": os.uname().release}


# --- explaining failures ----------------------------------------------------------------------

# "/.ssh", "/.config/gcloud", ...: matched as whole components anywhere in a path an error names.
_HIDDEN_SUFFIXES = tuple(entry[1:] for entry in DEFAULT_HIDDEN if entry.startswith("~/"))
_PATH_IN_LINE = (
    lazy_compile(r"'([^']+)'"),                      # touch: cannot touch '/x': ...
    lazy_compile(r'"([^"]+)"'),
    # cat: /x: Permission denied; sh: cannot create /x: ...
    lazy_compile(r"(?:^|\s)(\S+?):\s*(?:Permission denied|Read-only file system|Operation not permitted"
                 r"|No such file or directory|Directory nonexistent|Device or resource busy)", re.I),
)
_NETWORK = lazy_compile(r"could not resolve host|temporary failure in name resolution|name or service not known"
                        r"|network is unreachable|no route to host|nodename nor servname|getaddrinfo failed"
                        r"|failed to resolve|name resolution", re.I)
_LOCAL = lazy_compile(r"127\.0\.0\.1|localhost|::1")
_PROXY_DENIED = lazy_compile(r"CONNECT tunnel failed, response 403|Received HTTP code 403 from proxy"
                             r"|403 Forbidden.*proxy|proxy.*403", re.I)


def blocked_by_sandbox(exit_code: int | None, stderr_text: str, policy: SandboxPolicy | None = None,
                       cwd: Path | None = None, kind: str | None = None) -> str | None:
    """If a failed command's stderr shows the sandbox stopped it, a one-line explanation
    for the model ("blocked by the sandbox: ..."); else None.

    Heuristic by necessity (the kernel only says EROFS/EACCES/ENETUNREACH), so the
    optional arguments sharpen it: with `policy` (and `cwd`, default the root) the paths
    an error names are checked against the writable set and the network mode is known;
    with `kind` "landlock", network errors are never blamed on the sandbox (it does not
    touch the network). Without them, "Permission denied" on a plain relative path
    (`./build.sh: Permission denied`, most likely inside the project) is not reported,
    and a refused connection is only "possibly" the sandbox.
    """
    if exit_code == 0 or not stderr_text:
        return None
    network = policy.network if policy is not None else None
    check_network = network != "full" and kind != "landlock"
    for raw in stderr_text.splitlines()[-200:]:
        line = raw.strip()
        lowered = line.lower()
        quote = f" ({line[:160]})"
        path = _path_in(line)
        if "permission denied" in lowered or "no such file or directory" in lowered or "nonexistent" in lowered:
            if path is not None and _is_secret(path, policy, cwd):
                return PROTECTED_BLOCKED + quote
            if kind == "landlock" and "permission denied" in lowered and path is not None \
                    and _beside_secret(path, policy, cwd):
                return ("blocked by the sandbox: under Landlock, a file a command creates in a directory that holds "
                        "a protected file is unreadable to that same command; read it in a separate command" + quote)
            if path is not None and _is_hidden(path, policy, cwd):
                return ("blocked by the sandbox: credential files and directories (~/.ssh, ~/.aws, tokens ...) "
                        "and auger's own files (its config, sessions and snapshots) are hidden from commands" + quote)
            if "permission denied" not in lowered:
                if kind != "landlock" and path is not None and _in_fresh_dir(path, policy, cwd):
                    return ("blocked by the sandbox: commands have a fresh /tmp and /run of their own (the host's "
                            "are not visible; use the project or $TMPDIR)" + quote)
                continue
        if "read-only file system" in lowered:
            if path is not None and _is_protected(path, policy, cwd):
                return "blocked by the sandbox: this path is read-only (protected even inside the project)" + quote
            return "blocked by the sandbox: " + _WRITE_OUTSIDE + quote
        if "permission denied" in lowered:
            if path is None or not _outside_writable(path, policy, cwd):
                continue
            return "blocked by the sandbox: " + _WRITE_OUTSIDE + quote
        if "operation not permitted" in lowered and (path is None or _outside_writable(path, policy, cwd)):
            return ("blocked by the sandbox: commands run without privileges (no mount, chown to others, "
                    "ptrace, raw sockets, Unix-domain sockets (a socketpair works) ...)" + quote)
        if "resource busy" in lowered and path is not None and "/.git" in "/" + path:
            return ("blocked by the sandbox: this path cannot be removed or replaced (.git itself and the "
                    "repository's pack files are protected; git's own commands change the repository)" + quote)
        if not check_network:
            continue
        if _PROXY_DENIED.search(line):
            return "blocked by the sandbox: this host is not on the network allowlist" + quote
        no_network = ("only allowlisted hosts are reachable, through the proxy (HTTP_PROXY/ALL_PROXY)"
                      if network == "proxy" else "network access is disabled for commands")
        if _NETWORK.search(line):
            return f"blocked by the sandbox: {no_network}" + quote
        if _CONNECT_FAILED.search(line):
            if _LOCAL.search(line):
                return ("possibly blocked by the sandbox: commands have their own network namespace, so servers "
                        "on the host's localhost are unreachable (a server started in the same command works)"
                        + quote)
            return ("blocked by the sandbox: " if network is not None else "possibly blocked by the sandbox: ") + (
                no_network + quote)
    return None


_WRITE_OUTSIDE = "writing outside the project, its temp and scratch dirs is not allowed"

_CONNECT_FAILED = lazy_compile(r"connection refused|couldn't connect to server|failed to connect to"
                               r"|connection timed out", re.I)


def _path_in(line: str) -> str | None:
    for pattern in _PATH_IN_LINE:
        match = pattern.search(line)
        if match:
            candidate = match.group(1).strip()
            if candidate and ("/" in candidate or candidate.startswith((".", "~"))):
                return candidate
    return None


def _absolute(path: str, policy: SandboxPolicy | None, cwd: Path | None) -> Path | None:
    if path.startswith("~"):
        return _real(path)
    if os.path.isabs(path):
        return _real(path)
    base = cwd or (policy.root if policy is not None else None)
    return _real(Path(base) / path) if base is not None else None


def _in_fresh_dir(path: str, policy: SandboxPolicy | None, cwd: Path | None) -> bool:
    """An absolute path in the host's /tmp or /run that the bwrap sandbox does not show."""
    absolute = _absolute(path, policy, cwd)
    if absolute is None or absolute.parts[:2] not in _FRESH:
        return False
    return _outside_writable(path, policy, cwd)


def _is_hidden(path: str, policy: SandboxPolicy | None, cwd: Path | None) -> bool:
    padded = "/" + path.lstrip("~") + "/"
    if any(suffix + "/" in padded for suffix in _HIDDEN_SUFFIXES):
        return True
    if policy is None or not policy.hidden:
        return False
    absolute = _absolute(path, policy, cwd)
    return absolute is not None and any(is_inside(_real(h), absolute) for h in policy.hidden)


def _is_secret(path: str, policy: SandboxPolicy | None, cwd: Path | None) -> bool:
    if policy is None or not policy.secrets:
        return False
    absolute = _absolute(path, policy, cwd)
    return absolute is not None and any(is_inside(_real(p), absolute) for p in policy.secrets)


def _beside_secret(path: str, policy: SandboxPolicy | None, cwd: Path | None) -> bool:
    """Whether `path` lies directly in a directory on the way to a protected file (Landlock splits its grant there)."""
    if policy is None or not policy.secrets:
        return False
    absolute = _absolute(path, policy, cwd)
    return absolute is not None and any(is_inside(absolute.parent, _real(p)) for p in policy.secrets)


def _is_protected(path: str, policy: SandboxPolicy | None, cwd: Path | None) -> bool:
    if ".git/hooks" in path or path.endswith(".git/config"):
        return True
    absolute = _absolute(path, policy, cwd)
    if policy is None or absolute is None:
        return False
    return any(is_inside(_real(p), absolute) for p in policy.read_only)


def _outside_writable(path: str, policy: SandboxPolicy | None, cwd: Path | None) -> bool:
    """Whether a path an error names lies outside what commands may write.

    Without a policy: absolute and parent-relative paths count as outside, plain relative
    ones (most likely inside the project) do not.
    """
    if policy is None:
        return path.startswith(("/", "~", ".."))
    absolute = _absolute(path, policy, cwd)
    if absolute is None:
        return False
    writable = [_real(policy.root), *(_real(w) for w in (*policy.writable, *policy.granted))]
    if any(is_inside(w, absolute) for w in writable):
        return _is_protected(path, policy, cwd)
    return True
