"""A session's confinement: the OS sandbox and its supervisor, what it protects, and the egress proxy.

Decided once per session, as it opens (which sandbox works here, what it hides and protects, what it
cannot enforce), and started only when needed: the sandbox, its supervisor and the egress proxy start
with the session's first command (shell, a sandboxed stdio MCP server: whatever calls `spawn`), and
the watch for planted repositories (policy/gitsweep.py) with its first command that could write. A
server or a fleet worker holds many sessions, most of them idle: such a session holds no process.

One sandbox holds every command of the session (see `auger.policy.supervisor`): a background server
is reachable and killable from later commands, and nothing outlives the session. When no command has
run for `sandbox_idle_timeout` seconds and nothing is left running in it (a background server keeps it
alive), the sandbox stops; the next command starts it again with the same policy — mounts, hidden
paths, environment, egress allowlist, seccomp filter — so only the time differs. Per command, `spawn`
decides whether it runs read-only (plan mode always; safe mode when the command was classified
read-only) or with the project writable. A writable root the user grants mid-session (`add_writable`)
needs a new mount, so the sandbox starts again before the next command that may write.

The project's protected files (secrets/protected.py) are found again each time the sandbox starts (a bounded
walk, `ProtectedFiles.scan`) and hidden from every command in it: bubblewrap covers them with mounts; under
Landlock each command gets a ruleset of its own without them. A protected file that appears while the sandbox
runs (a command made one) is looked for before each command, in the directories where one is most likely
(`ProtectedFiles.look_again`): Landlock leaves it out of that command's ruleset; bubblewrap needs a new mount,
so the sandbox starts again first when nothing runs in it — while a background command or an MCP server keeps
it running, the file stays readable to commands until it stops (a warning says so).

The egress proxy runs whenever the network policy is "proxy" and commands run, sandbox or not:
without a sandbox, commands are pointed at it but nothing forces them through (the warning says so).
If the proxy cannot start, sandboxed commands have no network.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from auger.config import Config
from auger.policy.listening import DEV_PORTS
from auger.process import owned_temp_dir

if TYPE_CHECKING:  # imported when a sandbox starts, not when this module loads
    from auger.policy.egress import Allowlist, Denial, EgressProxy
    from auger.policy.gitsweep import GitWatch
    from auger.policy.sandbox import Sandbox, SandboxPolicy
    from auger.policy.supervised import LocalProcess, SessionSandbox, SupervisedProcess
    from auger.secrets.protected import ProtectedFiles

READ_ONLY_EFFECT = "read_only"
# Protected files hidden from commands, at most: each is a mount the supervisor makes (bwrap) or a path a
# command's ruleset leaves out (Landlock), and the list travels in one message to the sandbox's template.
MAX_HIDDEN = 2000


@dataclasses.dataclass(frozen=True)
class ProxySettings:
    """What the session's egress proxy will allow, checked when the session opens."""

    allowlist: Allowlist
    hosts: Mapping[str, str]


class Confinement:
    def __init__(self, sandbox: Sandbox | None, policy: SandboxPolicy, *, description: str = "",
                 mode: Callable[[], str] = lambda: "auto", missing: tuple[str, ...] = (),
                 proxy: ProxySettings | None = None, idle_timeout: float = 300.0,
                 warn: Callable[[str], None] = lambda message: None, secrets: Sequence[ProtectedFiles] = ()) -> None:
        self.sandbox = sandbox  # None: no sandbox, only the proxy
        self.policy = policy  # as planned; the running sandbox's adds the proxy's sockets and the private dir
        self.description = description
        self.mode = mode
        self.missing = missing  # guarantees this sandbox cannot give here (auto mode then asks)
        self._idle_timeout = idle_timeout
        self.warn = warn  # a problem found after the session opened (the session makes it a warning event)
        self.box: SessionSandbox | None = None  # the running sandbox
        self.proxy: EgressProxy | None = None  # the running proxy
        self.git: GitWatch | None = None  # repositories commands could plant code in, once one could write
        self.private_dir: Path | None = None  # auger's own files (background logs): no command can write here
        self._proxy_settings = proxy
        self._proxy_failed = False  # it could not start (said once): commands run without it
        self._started_policy = policy  # what the running (or last) sandbox was started with
        self._denials: list[Denial] = []  # every proxy refusal of the session, across restarts
        self._socket_dir: Path | None = None
        self._logs = 0
        self._writers: list[SupervisedProcess] = []  # started writable since the walk
        self._live: set[SupervisedProcess | LocalProcess] = set()  # started and not ended
        self._busy = 0  # spawns under way
        self._lock: asyncio.Lock | None = None  # starting and stopping, one at a time
        self._idle: asyncio.TimerHandle | None = None
        self._stopping: asyncio.Task[None] | None = None
        self._preparing: asyncio.Task[None] | None = None
        self._closed = False
        self.secrets = tuple(secrets)  # the protected files of the root (and of the project, when it differs)
        self._told: set[Path] = set()  # protected files said to be readable until the sandbox starts again

    @property
    def kind(self) -> str:
        return self.sandbox.kind if self.sandbox is not None else "none"

    @property
    def writes_confined(self) -> bool:
        """Whether commands can write only beneath the root and the scratch dir (whatever else is missing)."""
        return self.sandbox is not None

    @property
    def enforced(self) -> bool:
        """Whether auto mode may rely on it: a working sandbox with every guarantee it needs."""
        return self.sandbox is not None and not self.missing

    @property
    def idle_timeout(self) -> float:
        """Seconds the sandbox lives on once nothing runs in it (0 or less: until the session ends)."""
        return self._idle_timeout

    @idle_timeout.setter
    def idle_timeout(self, seconds: float) -> None:
        self._idle_timeout = seconds
        self._cancel_idle()
        self._arm_idle()  # counted from now

    @property
    def running(self) -> bool:
        """Whether a sandbox (or, without one, the proxy) runs now."""
        return self.box is not None or self.proxy is not None

    def readonly_for(self, effect: str, mode: str | None = None) -> bool:
        """Plan mode: every command read-only. Safe mode: a command classified read-only runs
        read-only, so a misclassification fails instead of writing. Auto: writable. `mode`: the caller's
        (a sub-agent may run in a stricter mode than the session); by default the session's, now."""
        mode = mode or self.mode()
        return mode == "plan" or (mode == "safe" and effect == READ_ONLY_EFFECT)

    def add_writable(self, root: Path) -> None:
        """Bind `root` writable for the commands that may write (a writable root the user granted), from the
        next one on. A running sandbox cannot take a new mount: it is started again before that command
        (`_start`), and every later start, after an idle stop too, has it."""
        if root not in self.policy.granted:
            self.policy = dataclasses.replace(self.policy, granted=(*self.policy.granted, root))

    def command_env(self, env: dict[str, str]) -> dict[str, str]:
        from auger.policy.sandbox import _proxy_env

        return _proxy_env(env, self._started_policy)

    # --- commands --------------------------------------------------------------------------------

    async def spawn(self, argv: list[str], cwd: Path, env: dict[str, str], stdio: tuple[int, int, int],
                    effect: str, mode: str | None = None, tty: bool = False, offline: bool = False) -> Any:
        """Start a command (stdio: its stdin, stdout, stderr fds) and return its process handle; `mode` is
        the trust mode of whoever runs it now (default: the session's); `tty`: stdin is a pseudo-terminal,
        which becomes the controlling terminal of the command's session; `offline`: a command that needs no
        network (a language server) gets none — no proxy variables, and under bubblewrap a network namespace
        of its own, under Landlock (ABI 4+, read-only commands) no TCP. Starts the sandbox first when it is
        not running."""
        from auger.policy import supervised

        readonly = self.readonly_for(effect, mode)
        self._busy += 1
        self._cancel_idle()
        try:
            async with self._guard():
                await self._start(writes=not readonly)
            if self.box is None:
                proc: Any = await supervised.spawn_local(argv, cwd, env if offline else self.command_env(env),
                                                         stdio, tty)
            else:
                proc = await self._run(self.box, argv, cwd, env, stdio, readonly, tty, offline)
        finally:
            self._busy -= 1
        self._track(proc)
        return proc

    async def _run(self, box: SessionSandbox, argv: list[str], cwd: Path, env: dict[str, str],
                   stdio: tuple[int, int, int], readonly: bool, tty: bool, offline: bool) -> SupervisedProcess:
        assert self.sandbox is not None  # a box is only ever built around a sandbox
        env = env if offline else self.command_env(env)
        writable: tuple[str, ...] = ()
        remount = False
        if readonly:
            argv, remount = self.sandbox.readonly_argv(argv, self.policy, offline)
            if remount:  # bwrap: the supervisor makes every mount read-only but the scratch and /tmp
                writable = (*(str(p) for p in self.policy.writable), "/tmp")
        layer = self.sandbox.secrets_layer(self._secrets_now()) if self.secrets and self.kind == "landlock" else None
        if self.kind == "bwrap":
            env = {**env, "TMPDIR": "/tmp", "TMP": "/tmp", "TEMP": "/tmp"}
        elif self.policy.tmp is not None:
            env = {**env, "TMPDIR": str(self.policy.tmp), "TMP": str(self.policy.tmp), "TEMP": str(self.policy.tmp)}
        proc = await box.run(argv, cwd, env, stdio, readonly=remount, writable=writable, tty=tty, landlock=layer,
                             offline=offline and self.kind == "bwrap")
        proc.readonly = readonly
        if not readonly:
            self._writers.append(proc)
        return proc

    def prepare(self) -> None:
        """Start the sandbox now, in the background, where a command is surely coming (a headless task):
        its start then overlaps the model's first reply. A failure is the first command's to report."""
        if self._closed or self.running or (self._preparing is not None and not self._preparing.done()):
            return
        self._preparing = asyncio.ensure_future(self._prepare())

    async def _prepare(self) -> None:
        from auger.policy.supervised import SandboxGone

        try:
            async with self._guard():
                await self._start(writes=self.mode() != "plan")
        except (SandboxGone, OSError):
            return
        self._arm_idle()  # a command may not come after all

    def open_log(self) -> tuple[int, Path]:
        """A new background-command log in auger's private dir: named by a counter, opened by
        auger (O_EXCL, no symlinks followed), readable by commands, writable by none."""
        self._logs += 1
        path = self._private() / f"background-{self._logs}.log"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        return fd, path

    async def sweep_git(self) -> str | None:
        """Defuse what commands planted in git directories (see policy/gitsweep.py). The project is walked
        only when a command that could write ran since the last walk, or may still run (a read-only command
        cannot have planted anything). Returns a note for the model, or None."""
        if self.git is None:
            return None
        walk = bool(self._writers)
        self._writers = [proc for proc in self._writers if proc.returncode is None]
        notes = await self.git.after_command(walk)
        return "blocked by the sandbox: " + "; ".join(notes) if notes else None

    async def explain(self, exit_code: int | None, stderr: str, since: float, readonly: bool = False) -> str | None:
        """Why a command failed, when the sandbox or the proxy is the reason; None otherwise.
        `readonly`: the command ran read-only (plan mode, or classified read-only in safe mode)."""
        from auger.policy.sandbox import blocked_by_sandbox

        notes = []
        swept = await self.sweep_git()
        if swept:
            notes.append(swept)
        denials = [d for d in self._denials if d.at >= since]
        for why in sorted({d.why for d in denials}):
            refused = sorted({f"{d.host}:{d.port}" for d in denials if d.why == why})
            notes.append(f"the sandbox's network proxy refused {', '.join(refused)} ({why})")
        if exit_code not in (0, None) and self.sandbox is not None:
            blocked = blocked_by_sandbox(exit_code, stderr, policy=self._started_policy, kind=self.kind)
            denied = re.search(r"read-only file system|permission denied", stderr, re.I)
            if readonly and denied and (blocked is None or "credential" not in blocked):
                blocked = ("blocked by the sandbox: this command ran read-only (" +
                           ("plan mode runs every command read-only" if self.mode() == "plan" else
                            "it was judged read-only, so it ran without write access; a command that changes "
                            "files is run writable once the user approves it") + ")")
            if blocked:
                notes.append(blocked)
        return "; ".join(notes) or None

    # --- starting and stopping -------------------------------------------------------------------

    def _guard(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    def _private(self) -> Path:
        if self.private_dir is None:
            self.private_dir = owned_temp_dir("private")
        return self.private_dir

    async def _start(self, writes: bool) -> None:
        """Whatever the next command needs and does not run yet: the proxy, the sandbox; the watch for
        planted repositories when the command could write (its first walk over before it runs)."""
        if self._closed:
            from auger.policy.supervised import SandboxGone

            raise SandboxGone("the session has ended")
        if self.box is not None and not self.box.alive:  # it died (killed from outside): start another
            await self._stop()
        if self.box is not None and writes and self._started_policy.granted != self.policy.granted:
            if self._live:
                self.warn("the sandbox starts again to make " + ", ".join(map(str, self.policy.granted)) +
                          " writable: what still ran in it (background commands, MCP servers) was stopped")
            await self._stop()
        if self.box is not None and self.kind == "bwrap" and self._uncovered():
            await self._stop()  # a protected file appeared: the next start covers it
        if self.sandbox is not None and writes:
            self._watch_git()  # its first walk runs while the sandbox starts
        if not self.running:
            await self._start_sandbox()
        if self.sandbox is not None and writes:
            assert self.git is not None
            await self.git.before_command()

    async def _start_sandbox(self) -> None:
        self._started_policy = await self._start_proxy()
        if self.sandbox is None:
            return
        from auger.policy.supervised import SessionSandbox

        secrets = await asyncio.to_thread(self._scan_secrets)
        policy = dataclasses.replace(self._started_policy, read_only=(*self.policy.read_only, self._private()),
                                     secrets=secrets, cover=self._cover() if secrets else None)
        if self.sandbox.kind == "landlock" and policy.tmp is not None:
            Path(policy.tmp).mkdir(parents=True, exist_ok=True)
        self._started_policy = policy
        try:
            self.box = await SessionSandbox.start(self.sandbox, policy, dict(os.environ),
                                                  self._private() / "supervisor.log")
        except BaseException:
            await self._stop()
            raise

    def _scan_secrets(self) -> tuple[Path, ...]:
        """The protected files that exist, found by a new scan of each root (as the sandbox starts)."""
        for protected in self.secrets:
            protected.scan(again=True)
        found = self._secrets_now()
        if len(found) >= MAX_HIDDEN and found[-1] not in self._told:
            self._told.add(found[-1])
            self.warn(f"more than {MAX_HIDDEN:,} protected files: the {MAX_HIDDEN:,} nearest the project's root are "
                      "hidden from commands, the others are not (auger's file tools refuse them all)")
        return found

    def _secrets_now(self) -> tuple[Path, ...]:
        """The protected files that exist now: the last scan's, and those that appeared since where a new one is
        looked for (`ProtectedFiles.look_again`); at most MAX_HIDDEN, the shallowest."""
        if len(self.secrets) == 1:
            return self.secrets[0].paths()[:MAX_HIDDEN]
        found = {path for protected in self.secrets for path in protected.paths()}
        return tuple(sorted(found, key=lambda p: (len(p.parts), p))[:MAX_HIDDEN])

    def _uncovered(self) -> bool:
        """Whether a protected file appeared that the running (bwrap) sandbox does not cover, and it may start
        again for it now (nothing runs in it); one it cannot is told once."""
        if not self.secrets:
            return False
        started = self._started_policy.secrets
        now = self._secrets_now()
        if now == started or not (new := set(now) - set(started)):
            return False
        if not self._live:
            return True
        untold = sorted(new - self._told)
        if untold:
            self._told.update(untold)
            self.warn("protected files appeared while background commands or MCP servers run in the sandbox: "
                      + ", ".join(map(str, untold)) + "; commands can read them until the sandbox starts again")
        return False

    def _cover(self) -> Path:
        """An empty file nobody may read, bound over each protected file (bwrap): reading one fails."""
        path = self._private() / "protected-file"
        if not os.path.lexists(path):  # auger's own private dir: no command can write there
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0))
        return path

    def _watch_git(self) -> None:
        from auger.policy.gitsweep import GitWatch

        if self.git is None:
            self.git = GitWatch(self.policy.root)
        else:
            self.git.resume()

    async def _start_proxy(self) -> SandboxPolicy:
        """Start the proxy (network "proxy"); the policy the sandbox starts with: the proxy's sockets, or no
        network when it could not start (said once, as a warning)."""
        settings = self._proxy_settings
        if settings is None or self.policy.network != "proxy":
            return self.policy
        if self._proxy_failed:
            return dataclasses.replace(self.policy, network="none")
        from auger.policy.egress import EgressProxy, make_socket_dir

        # bubblewrap gives the sandbox a network of its own, reached through the proxy's Unix sockets; any
        # other command is on the host's network and reaches its loopback ports: each gets only what it uses
        bridged = self.sandbox is not None and self.sandbox.kind == "bwrap"
        if bridged and self._socket_dir is None:
            self._socket_dir = make_socket_dir()
        proxy = EgressProxy(settings.allowlist, socket_dir=self._socket_dir if bridged else None, tcp=not bridged,
                            hosts=dict(settings.hosts), denials=self._denials)
        try:
            await proxy.start()
        except OSError as exc:
            self._proxy_failed = True
            self.warn(proxy_failure(self.sandbox, str(exc)))
            return dataclasses.replace(self.policy, network="none")
        self.proxy = proxy
        sockets: tuple[tuple[int, Path | None], ...]
        if bridged:  # the bridge inside listens on fixed ports
            sockets = ((3128, proxy.http_socket), (1080, proxy.socks_socket))
        else:  # same network as the host: point straight at the proxy's own ports
            sockets = ((proxy.http_port, None), (proxy.socks_port, None))
        return dataclasses.replace(self.policy, proxy_sockets=sockets)

    def _track(self, proc: SupervisedProcess | LocalProcess) -> None:
        """Watch a process's end: the sandbox may stop once none is left."""
        self._live.add(proc)

        def ended(_: object) -> None:
            self._live.discard(proc)
            self._arm_idle()

        asyncio.ensure_future(proc.wait()).add_done_callback(ended)

    def _cancel_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None

    def _arm_idle(self) -> None:
        if self._live or self._busy or self._closed or not self.running or self._idle_timeout <= 0:
            return
        self._cancel_idle()
        self._idle = asyncio.get_running_loop().call_later(self._idle_timeout, self._idle_over)

    def _idle_over(self) -> None:
        self._idle = None
        if not (self._live or self._busy or self._closed) and (self._stopping is None or self._stopping.done()):
            self._stopping = asyncio.ensure_future(self._stop_when_idle())

    async def _stop_when_idle(self) -> None:
        async with self._guard():
            if self._live or self._busy or self._closed or not self.running:
                return
            if self.box is not None and self.box.alive and await self.box.left_running():
                self._arm_idle()  # what commands left behind (a daemon) still runs: look again later
                return
            await self._stop()

    async def _stop(self) -> None:
        """Stop the sandbox and the proxy (everything in the sandbox ends); the session can start them again."""
        self._cancel_idle()
        box, self.box = self.box, None
        if box is not None:
            await box.close()
        if self.git is not None:
            await self.git.release()  # nothing can write now: a last walk, and the watches go
        proxy, self.proxy = self.proxy, None
        if proxy is not None:
            await proxy.stop()
        self._writers.clear()

    async def close(self) -> None:
        import shutil

        self._closed = True
        self._cancel_idle()
        await asyncio.gather(*(task for task in (self._stopping, self._preparing) if task is not None),
                             return_exceptions=True)
        async with self._guard():
            box, self.box = self.box, None
            if box is not None:
                await box.close()
            if self.git is not None:
                await self.git.close()
            proxy, self.proxy = self.proxy, None
            if proxy is not None:
                await proxy.stop()
        for path in (self._socket_dir, self.private_dir):
            if path is not None:
                shutil.rmtree(path, ignore_errors=True)


async def confine(config: Config, root: Path, scratch_dir: Path, protected: tuple[Path, ...],
                  warn: Callable[[str], None], mode: Callable[[], str] = lambda: "auto", *,
                  dirs: Mapping[str, Path], secrets: Sequence[ProtectedFiles] = ()) -> Confinement | None:
    """The session's confinement, decided but not started (see the module docstring). Without a working
    sandbox: the proxy alone (network "proxy"), or None; either way with one warning saying what is and
    is not enforced.

    `protected`: paths commands may read but not write. `dirs`: auger's config, data and cache dirs
    (`config.home_dirs()`), hidden from commands with the session database (policy/own_data.py). `secrets`: the
    protected files of the root (and of the project, in pending mode or for a worktree), hidden from commands."""
    from auger.policy.own_data import exposed_paths, hidden_paths
    from auger.policy.sandbox import SandboxPolicy, detect

    sandbox, description = detect(config.sandbox)
    root = Path(os.path.realpath(root))  # resolved once: every mount and rule is built from this
    network = config.sandbox_network
    proxy, proxy_problem = _proxy_settings(config) if network == "proxy" else (None, "")
    if proxy_problem:
        network = "none"
    if sandbox is None:
        if proxy is None:
            if config.sandbox != "off" or config.mode == "auto":
                warn(f"commands run unsandboxed: {description}. auto mode will ask before changes, as safe mode does")
            return None
        warn(f"commands run unsandboxed: {description}. auto mode will ask before changes, as safe mode does. "
             "Commands are pointed at the egress proxy (HTTP_PROXY/ALL_PROXY), but this is advisory: "
             "nothing stops a command from connecting directly")
        return Confinement(None, SandboxPolicy(root=root, network="proxy"), description=description, proxy=proxy,
                           idle_timeout=config.sandbox_idle_timeout, warn=warn)
    hidden = hidden_paths(dirs, config.db_path)
    policy = SandboxPolicy(root=root, writable=(scratch_dir,), read_only=protected, network=network,
                           hidden=hidden, exposed=exposed_paths(dirs, root, hidden),
                           tmp=scratch_dir / "tmp" if sandbox.kind == "landlock" else None, dev_ports=DEV_PORTS)
    if proxy_problem:
        warn(proxy_failure(sandbox, proxy_problem))
    missing = _missing(sandbox, policy)
    description += "; " + _enforced(sandbox, policy)
    if missing:
        warn(f"the {sandbox.kind} sandbox cannot enforce here: {'; '.join(missing)}. "
             "auto mode will ask before changes, as safe mode does")
    return Confinement(sandbox, policy, description=description, mode=mode, missing=missing, proxy=proxy,
                       idle_timeout=config.sandbox_idle_timeout, warn=warn, secrets=secrets)




def _proxy_settings(config: Config) -> tuple[ProxySettings | None, str]:
    """The proxy's allowlist and static hosts, checked now (a typo is reported when the session opens,
    not at its first command); (None, why) when they are unusable."""
    from auger.policy.egress import DEFAULT_ALLOWLIST, Allowlist, check_hosts

    try:
        return ProxySettings(Allowlist([*DEFAULT_ALLOWLIST, *config.egress_allow]),
                             check_hosts(config.egress_hosts)), ""
    except ValueError as exc:
        return None, str(exc)


def proxy_failure(sandbox: Sandbox | None, problem: str) -> str:
    """The warning for a proxy that cannot start: what the network then is."""
    if sandbox is None:
        return f"the egress proxy could not start ({problem}); commands run with the host's network"
    return f"the egress proxy could not start ({problem}); " + (
        "sandboxed commands have no network" if sandbox.kind == "bwrap" or getattr(sandbox, "abi", 0) >= 4
        else "the network is NOT restricted (Landlock below ABI 4 cannot block it)")


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
