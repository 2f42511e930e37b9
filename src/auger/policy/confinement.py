"""A session's confinement: the OS sandbox, what it protects, and the egress proxy behind it.

Built once per session. If the proxy cannot start, commands still run sandboxed,
with no network (fail-open for the proxy, the namespace's block still holds).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from auger.config import Config


@dataclass
class Confinement:
    sandbox: object  # auger.policy.sandbox.Sandbox
    policy: object  # auger.policy.sandbox.SandboxPolicy
    proxy: object | None = None  # auger.policy.egress.EgressProxy
    description: str = ""
    _socket_dir: Path | None = field(default=None, repr=False)

    @property
    def kind(self) -> str:
        return self.sandbox.kind

    def wrap(self, argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        wrapped = self.sandbox.wrap(argv, cwd, env, self.policy)
        return wrapped.argv, wrapped.env

    def explain(self, exit_code: int | None, stderr: str, since: float) -> str | None:
        """Why a command failed, when the sandbox or the proxy is the reason; None otherwise."""
        from auger.policy.sandbox import blocked_by_sandbox

        notes = []
        if self.proxy is not None:
            refused = sorted({f"{d.host}:{d.port}" for d in self.proxy.denials_since(since)})
            if refused:
                notes.append("the sandbox's network proxy refused " + ", ".join(refused) +
                             " (not in the egress allowlist; the user can add hosts with egress_allow)")
        if exit_code not in (0, None):
            blocked = blocked_by_sandbox(exit_code, stderr, policy=self.policy, kind=self.kind)
            if blocked:
                notes.append(blocked)
        return "; ".join(notes) or None

    async def close(self) -> None:
        if self.proxy is not None:
            await self.proxy.stop()
        if self._socket_dir is not None:
            import shutil

            shutil.rmtree(self._socket_dir, ignore_errors=True)


async def confine(config: Config, root: Path, scratch_dir: Path, protected: tuple[Path, ...],
                  warn: Callable[[str], None]) -> Confinement | None:
    """The session's confinement, or None (with one clear warning) when no sandbox works here."""
    from auger.policy.sandbox import SandboxPolicy, detect

    sandbox, description = detect(config.sandbox)
    if sandbox is None:
        if config.sandbox != "off" or config.mode == "auto":
            warn(f"commands run unsandboxed: {description}. auto mode will ask before changes, as safe mode does")
        return None
    network = config.sandbox_network
    proxy = socket_dir = None
    sockets: tuple[tuple[int, Path], ...] = ()
    if network == "proxy":
        from auger.policy.egress import DEFAULT_ALLOWLIST, Allowlist, EgressProxy, make_socket_dir

        socket_dir = make_socket_dir()
        try:
            allow = Allowlist([*DEFAULT_ALLOWLIST, *config.egress_allow])
            proxy = EgressProxy(allow, socket_dir=socket_dir, hosts=config.egress_hosts)
            await proxy.start()
            if sandbox.kind == "bwrap":  # a bridge inside the namespace listens on fixed ports
                sockets = ((3128, proxy.http_socket), (1080, proxy.socks_socket))
            else:  # same network as the host: point straight at the proxy's own ports
                sockets = ((proxy.http_port, proxy.http_socket), (proxy.socks_port, proxy.socks_socket))
        except (OSError, ValueError) as exc:
            warn(f"the egress proxy could not start ({exc}); sandboxed commands have no network")
            proxy, network = None, "none"
    policy = SandboxPolicy(root=root, writable=(scratch_dir,), read_only=protected, network=network,
                           proxy_sockets=sockets)
    if sandbox.kind == "landlock" and network != "full":
        description += "; Landlock cannot block the network: commands are only pointed at the proxy"
    return Confinement(sandbox, policy, proxy, description, socket_dir)
