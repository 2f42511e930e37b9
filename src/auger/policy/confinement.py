"""A session's confinement: the OS sandbox and its supervisor, what it protects, and the egress proxy.

Built once per session. One sandbox holds every command of the session (see
`auger.policy.supervisor`): a background server is reachable and killable from
later commands, and nothing outlives the session. Per command, `spawn` decides
whether it runs read-only (plan mode always; safe mode when the command was
classified read-only) or with the project writable.

The egress proxy runs whenever the network policy is "proxy", sandbox or not:
without a sandbox, commands are pointed at it but nothing forces them through
(the warning says so). If the proxy cannot start, sandboxed commands have no network.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from auger.config import Config
from auger.policy.gitsweep import GitWatch
from auger.policy.listening import DEV_PORTS
from auger.process import owned_temp_dir

if TYPE_CHECKING:  # imported when a sandbox is built, not when this module loads
    from auger.policy.egress import EgressProxy
    from auger.policy.sandbox import Sandbox, SandboxPolicy
    from auger.policy.supervised import SessionSandbox, SupervisedProcess

READ_ONLY_EFFECT = "read_only"


@dataclass
class Confinement:
    sandbox: Sandbox | None  # None: no sandbox, only the proxy
    policy: SandboxPolicy
    proxy: EgressProxy | None = None
    description: str = ""
    box: SessionSandbox | None = None
    mode: Callable[[], str] = lambda: "auto"
    missing: tuple[str, ...] = ()  # guarantees this sandbox cannot give here (auto mode then asks)
    private_dir: Path | None = None  # auger's own files (background logs): no command can write here
    git: GitWatch | None = None  # repositories commands could plant code in, watched (policy/gitsweep.py)
    _socket_dir: Path | None = field(default=None, repr=False)
    _logs: int = 0
    _writers: list[SupervisedProcess] = field(default_factory=list, repr=False)  # started writable since the walk

    def sweep_git(self) -> str | None:
        """Defuse what commands planted in git directories (see policy/gitsweep.py). The project is walked
        only when a command that could write ran since the last walk, or may still run (a read-only command
        cannot have planted anything). Returns a note for the model, or None."""
        if self.git is None:
            return None
        walk = bool(self._writers)
        self._writers = [proc for proc in self._writers if proc.returncode is None]
        notes = self.git.after_command(walk)
        return "blocked by the sandbox: " + "; ".join(notes) if notes else None

    @property
    def kind(self) -> str:
        return self.sandbox.kind if self.sandbox is not None else "none"

    @property
    def writes_confined(self) -> bool:
        """Whether commands can write only beneath the root and the scratch dir (whatever else is missing)."""
        return self.box is not None

    @property
    def enforced(self) -> bool:
        """Whether auto mode may rely on it: a working sandbox with every guarantee it needs."""
        return self.box is not None and not self.missing

    def readonly_for(self, effect: str, mode: str | None = None) -> bool:
        """Plan mode: every command read-only. Safe mode: a command classified read-only runs
        read-only, so a misclassification fails instead of writing. Auto: writable. `mode`: the caller's
        (a sub-agent may run in a stricter mode than the session); by default the session's, now."""
        mode = mode or self.mode()
        return mode == "plan" or (mode == "safe" and effect == READ_ONLY_EFFECT)

    def command_env(self, env: dict[str, str]) -> dict[str, str]:
        from auger.policy.sandbox import _proxy_env

        return _proxy_env(env, self.policy)

    async def spawn(self, argv: list[str], cwd: Path, env: dict[str, str], stdio: tuple[int, int, int],
                    effect: str, mode: str | None = None, tty: bool = False):
        """Start a command (stdio: its stdin, stdout, stderr fds) and return its process handle; `mode` is
        the trust mode of whoever runs it now (default: the session's); `tty`: stdin is a pseudo-terminal,
        which becomes the controlling terminal of the command's session."""
        from auger.policy import supervised

        if self.box is None:
            return await supervised.spawn_local(argv, cwd, self.command_env(env), stdio, tty)
        if self.git is not None:
            await self.git.before_command()
        readonly = self.readonly_for(effect, mode)
        env = self.command_env(env)
        writable: tuple[str, ...] = ()
        remount = False
        if readonly:
            assert self.sandbox is not None  # a box is only ever built around a sandbox
            argv, remount = self.sandbox.readonly_argv(argv, self.policy)
            if remount:  # bwrap: the supervisor makes every mount read-only but the scratch and /tmp
                writable = (*(str(p) for p in self.policy.writable), "/tmp")
        if self.kind == "bwrap":
            env = {**env, "TMPDIR": "/tmp", "TMP": "/tmp", "TEMP": "/tmp"}
        elif self.policy.tmp is not None:
            env = {**env, "TMPDIR": str(self.policy.tmp), "TMP": str(self.policy.tmp), "TEMP": str(self.policy.tmp)}
        proc = await self.box.run(argv, cwd, env, stdio, readonly=remount, writable=writable, tty=tty)
        proc.readonly = readonly
        if not readonly:
            self._writers.append(proc)
        return proc

    def open_log(self) -> tuple[int, Path]:
        """A new background-command log in auger's private dir: named by a counter, opened by
        auger (O_EXCL, no symlinks followed), readable by commands, writable by none."""
        if self.private_dir is None:
            self.private_dir = owned_temp_dir("private")
        self._logs += 1
        path = self.private_dir / f"background-{self._logs}.log"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        return fd, path

    def explain(self, exit_code: int | None, stderr: str, since: float, readonly: bool = False) -> str | None:
        """Why a command failed, when the sandbox or the proxy is the reason; None otherwise.
        `readonly`: the command ran read-only (plan mode, or classified read-only in safe mode)."""
        from auger.policy.sandbox import blocked_by_sandbox

        notes = []
        swept = self.sweep_git()
        if swept:
            notes.append(swept)
        if self.proxy is not None:
            denials = self.proxy.denials_since(since)
            for why in sorted({d.why for d in denials}):
                refused = sorted({f"{d.host}:{d.port}" for d in denials if d.why == why})
                notes.append(f"the sandbox's network proxy refused {', '.join(refused)} ({why})")
        if exit_code not in (0, None) and self.box is not None:
            blocked = blocked_by_sandbox(exit_code, stderr, policy=self.policy, kind=self.kind)
            denied = re.search(r"read-only file system|permission denied", stderr, re.I)
            if readonly and denied and (blocked is None or "credential" not in blocked):
                blocked = ("blocked by the sandbox: this command ran read-only (" +
                           ("plan mode runs every command read-only" if self.mode() == "plan" else
                            "it was judged read-only, so it ran without write access; a command that changes "
                            "files is run writable once the user approves it") + ")")
            if blocked:
                notes.append(blocked)
        return "; ".join(notes) or None

    async def close(self) -> None:
        import shutil

        if self.box is not None:
            await self.box.close()
        if self.git is not None:
            await self.git.close()
        if self.proxy is not None:
            await self.proxy.stop()
        for path in (self._socket_dir, self.private_dir):
            if path is not None:
                shutil.rmtree(path, ignore_errors=True)


async def confine(config: Config, root: Path, scratch_dir: Path, protected: tuple[Path, ...],
                  warn: Callable[[str], None], mode: Callable[[], str] = lambda: "auto", *,
                  dirs: Mapping[str, Path]) -> Confinement | None:
    """The session's confinement. Without a working sandbox: the proxy alone (network "proxy"),
    or None; either way with one warning saying what is and is not enforced.

    `protected`: paths commands may read but not write. `dirs`: auger's config, data and cache dirs
    (`config.home_dirs()`), hidden from commands with the session database (policy/own_data.py)."""
    from auger.policy.own_data import exposed_paths, hidden_paths
    from auger.policy.sandbox import SandboxPolicy, detect

    sandbox, description = detect(config.sandbox)
    root = Path(os.path.realpath(root))  # resolved once: every mount and rule is built from this
    network = config.sandbox_network
    proxy, socket_dir, sockets, proxy_problem = await _start_proxy(config, sandbox, network)
    if proxy_problem:
        network = "none"
    private_dir = owned_temp_dir("private")
    if sandbox is None:
        _remove(socket_dir if proxy is None else None)
        if proxy is None:
            if config.sandbox != "off" or config.mode == "auto":
                warn(f"commands run unsandboxed: {description}. auto mode will ask before changes, as safe mode does")
            _remove(private_dir)
            return None
        policy = SandboxPolicy(root=root, network="proxy", proxy_sockets=sockets)
        warn(f"commands run unsandboxed: {description}. auto mode will ask before changes, as safe mode does. "
             "Commands are pointed at the egress proxy (HTTP_PROXY/ALL_PROXY), but this is advisory: "
             "nothing stops a command from connecting directly")
        return Confinement(None, policy, proxy, description, private_dir=private_dir, _socket_dir=socket_dir)
    hidden = hidden_paths(dirs, config.db_path)
    policy = SandboxPolicy(root=root, writable=(scratch_dir,), read_only=(*protected, private_dir), network=network,
                           hidden=hidden, exposed=exposed_paths(dirs, root, hidden), proxy_sockets=sockets,
                           tmp=scratch_dir / "tmp" if sandbox.kind == "landlock" else None, dev_ports=DEV_PORTS)
    if proxy_problem:
        warn(f"the egress proxy could not start ({proxy_problem}); " + (
            "sandboxed commands have no network" if sandbox.kind == "bwrap" or getattr(sandbox, "abi", 0) >= 4
            else "the network is NOT restricted (Landlock below ABI 4 cannot block it)"))
    missing = _missing(sandbox, policy)
    try:
        box = await _start_supervisor(sandbox, policy, private_dir)
    except OSError as exc:
        warn(f"commands run unsandboxed: {exc}. auto mode will ask before changes, as safe mode does")
        if proxy is not None:
            await proxy.stop()
        _remove(socket_dir)
        _remove(private_dir)
        return None
    description += "; " + _enforced(sandbox, policy)
    if missing:
        warn(f"the {sandbox.kind} sandbox cannot enforce here: {'; '.join(missing)}. "
             "auto mode will ask before changes, as safe mode does")
    return Confinement(sandbox, policy, proxy, description, box, mode, missing, private_dir, GitWatch(root),
                       socket_dir)




async def _start_proxy(config: Config, sandbox, network: str):
    if network != "proxy":
        return None, None, (), ""
    from auger.policy.egress import DEFAULT_ALLOWLIST, Allowlist, EgressProxy, make_socket_dir

    socket_dir = make_socket_dir()
    try:
        allow = Allowlist([*DEFAULT_ALLOWLIST, *config.egress_allow])
        proxy = EgressProxy(allow, socket_dir=socket_dir, hosts=config.egress_hosts)
        await proxy.start()
    except (OSError, ValueError) as exc:
        _remove(socket_dir)
        return None, None, (), str(exc)
    if sandbox is not None and sandbox.kind == "bwrap":  # a bridge inside the namespace listens on fixed ports
        sockets = ((3128, proxy.http_socket), (1080, proxy.socks_socket))
    else:  # same network as the host: point straight at the proxy's own ports
        sockets = ((proxy.http_port, proxy.http_socket), (proxy.socks_port, proxy.socks_socket))
    return proxy, socket_dir, sockets, ""


async def _start_supervisor(sandbox, policy, private_dir: Path):
    from auger.policy.sandbox import _python, _source
    from auger.policy.supervised import SessionSandbox

    if sandbox.kind == "landlock":
        Path(policy.tmp).mkdir(parents=True, exist_ok=True)
    # Planned with auger's own environment (its HOME's secrets are hidden); the supervisor
    # itself runs with almost none: each command brings its own.
    supervisor = _source(Path(__file__).with_name("supervisor.py"))
    launched = sandbox.launch([_python(), "-S", "-I", "-c", supervisor], dict(os.environ), policy)
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    return await SessionSandbox.start(launched.argv, env, private_dir / "supervisor.log")


def _missing(sandbox, policy) -> tuple[str, ...]:
    """Guarantees auto mode relies on that this sandbox cannot give on this kernel, for this project."""
    if sandbox.kind != "landlock":
        return ()
    missing = []
    if os.path.lexists(Path(policy.root) / ".git"):
        missing.append(".git is not protected (Landlock cannot make part of the writable project read-only)")
    if sandbox.abi < 4 and policy.network != "full":
        missing.append(f"the network is NOT restricted (Landlock ABI {sandbox.abi} < 4)")
    if sandbox.abi < 6:
        missing.append("signals and abstract sockets to host processes are NOT blocked "
                       f"(Landlock ABI {sandbox.abi} < 6)")
    return tuple(missing)


def _enforced(sandbox, policy) -> str:
    """What is really enforced, in one clause (for the session's description)."""
    net = {"none": "no network", "full": "full network",
           "proxy": "network only through the egress proxy"}[policy.network]
    if sandbox.kind == "landlock":
        if sandbox.abi < 4 and policy.network != "full":
            net = "network NOT restricted (Landlock ABI < 4; commands are only pointed at the proxy)"
        elif policy.network != "full":
            net += " (TCP by port only; UDP not restricted)"
    return f"one sandbox per session, {net}"


def _remove(path: Path | None) -> None:
    if path is not None:
        import shutil

        shutil.rmtree(path, ignore_errors=True)
