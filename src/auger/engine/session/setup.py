"""What a session sets up as it opens, beside its sandbox and store: the configured MCP servers, the web
tools, the plugins' tools and the hooks, and the model's real context window (learned in the background:
the session opens without waiting for it). Each problem becomes a warning the session announces after
`session_configured`; none of them stops a session from opening.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping

from auger.config import Config
from auger.engine.workspace import Workspace
from auger.models.base import ModelClient
from auger.protocol.items import Item, SecretMarker
from auger.tools.base import CommandSandbox
from auger.tools.mcp_servers import McpServers
from auger.tools.router import ToolRouter

if TYPE_CHECKING:
    from auger.engine.hooks import Hooks
    from auger.models.context_window import LearnedWindow
    from auger.secrets.scrub import Scrubber


async def start_mcp_servers(config: Config, router: ToolRouter, root: Path, confinement: CommandSandbox | None,
                            warnings: list[str]) -> McpServers:
    """The MCP servers configured for every session, started together; problems become warnings."""
    mcp = McpServers(router.registry, root=root, sandbox=confinement, warn=warnings.append)
    if "mcp_servers" in config.tables or "project_mcp_servers" in config.tables:  # else not even read
        from auger.tools.mcp_config import configured_servers

        servers, problems = configured_servers(config.tables, trust_project=config.trust_project_mcp)
        warnings.extend(problems)
        await mcp.start(servers)
    return mcp


async def open_web_tools(config: Config, client: ModelClient, router: ToolRouter, warnings: list[str]) -> None:
    """web_fetch and a configured web_search as a registry member (tools/web.py); a hosted search is the
    model client's (models/), so only its absence is told."""
    from auger.tools.web import SOURCE, web_toolset

    toolset, problems = web_toolset(config, hosted_search=bool(getattr(client, "web_search", False)))
    warnings.extend(problems)
    if toolset is not None:
        await router.registry.add(SOURCE, toolset)


async def open_plugins(workspace: Workspace, router: ToolRouter, env: dict[str, str], session_id: str,
                        warnings: list[str]) -> Hooks | None:
    """The workspace's plugin tools as a registry member, and the session's hooks (plugins' and the
    configured shell commands); None when there are no hooks. Problems become warnings."""
    from auger.tools.plugins import REGISTRY_NAME, PluginTools

    plugins, config = workspace.plugins, workspace.config
    warnings.extend(plugins.warnings)
    if plugins.toolsets or plugins.contributions:
        await router.registry.add(REGISTRY_NAME, PluginTools(plugins, warnings.append))
    if not plugins.hooks and not config.tables.get("hooks") and not config.tables.get("project_hooks"):
        return None
    from auger.engine.hooks import Hooks, configured_hooks  # only for a session that has hooks

    shell, problems = configured_hooks(config.tables, trust_project=config.trust_project_hooks,
                                       timeout=config.hooks_timeout)
    warnings.extend(problems)
    if not shell and not plugins.hooks:
        return None
    return Hooks(shell, plugins.hooks, cwd=workspace.root, env=env, session_id=session_id,
                 timeout=config.hooks_timeout)


def learn_model_window(client: ModelClient, config: Config, cache_dir: Path) -> LearnedWindow:
    """What window the model's server reports, unless configuration says (models/context_window): from
    the cache, else asked in the background, so no request waits for it."""
    from auger.models.context_window import learn_window
    from auger.models.registry import registry_for

    described = any(client.model in p.models for p in registry_for(config).providers.values())
    return learn_window(client, explicit=bool(config.model_context_window) or described, cache_dir=cache_dir)


def open_secrets(config: Config, env: Mapping[str, str], data_dir: Path, items: Iterable[Item]) -> Scrubber:
    """The session's redaction of secret values (auger/secrets): the values its configuration and environment
    say are secret, the marker numbers it gave before (its `secret_marker` items), and the numbering key in
    auger's data dir. With `[secrets] redact = false`, a scrubber that changes nothing."""
    from auger.models.registry import secret_key_envs
    from auger.secrets.known import known_secrets
    from auger.secrets.numbering import Numbering, load_key
    from auger.secrets.redact import Redactor
    from auger.secrets.scrub import Scrubber
    from auger.secrets.settings import secrets_settings

    settings = secrets_settings(config)
    if not settings.redact:
        return Scrubber(Redactor((), Numbering(None), settings.env_patterns, enabled=False))
    recorded = [(i.kind, i.number, i.digest) for i in items if isinstance(i, SecretMarker)]
    known = known_secrets(config, env, secret_key_envs(config))
    return Scrubber(Redactor(known, Numbering(load_key(data_dir), recorded), settings.env_patterns))
