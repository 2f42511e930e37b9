"""Every model provider and backend agent, with a status a person can act on, for `GET /api/providers`.

Two tiers, as `auger providers` and `auger backends` have them (models/status.py, backends/status.py: the
same code). The presence check is cheap and always runs: is the provider configured, enabled, is its key
set; is the agent's command on PATH. The reachability check does the real thing — asks a model server for
its model list, starts an ACP agent and runs `initialize` — on request (`POST /api/providers/NAME/probe`,
or `?probe=stale` for those not checked lately); what it finds is kept for 5 minutes in the user's cache
dir, shared with `auger providers --probe`.

A model provider's row names the models it is known to serve (`models`: the server's own model first
for its provider, then the provider's default and described ones), for a model picker.

Statuses: `available`, `disabled`, `key missing`, `not installed`, `unreachable`, `error` — each with
a one-line diagnostic. `patch` enables or disables one, or adds a custom ACP agent, in the user's
config.toml (never a project's).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Callable

from auger.frontends.server.sessions import Refused
from auger.models.status import PROBE_TIMEOUT_S, ProbeCache, ProviderStatus, check, overlay, probe_key, statuses


class Providers:
    def __init__(self, config_for: Callable[[str], Any], cwd: str, *, cache_dir: Path | None = None) -> None:
        from auger.config import home_dirs

        self.config_for = config_for
        self.cwd = cwd  # where an agent is started for its probe
        self.cache = ProbeCache(cache_dir if cache_dir is not None else home_dirs()["cache"])

    async def rows(self, probe_stale: bool = False) -> list[dict[str, Any]]:
        from auger.backends.status import statuses as agent_statuses

        config = self.config_for(self.cwd)
        models = await statuses(config, self.cache, "stale" if probe_stale else None)
        agents = agent_statuses(config.tables)
        due = [a for a in agents if probe_stale and a.status == "available" and self.cache.found(_agent_key(a)) is None]
        for agent in agents:
            if agent not in due:
                overlay(agent, _agent_key(agent), self.cache)
        await asyncio.gather(*(self._probe_agent(a) for a in due))
        return [*(_model_row(m) for m in models), *(_agent_row(a) for a in agents)]

    async def probe(self, name: str) -> dict[str, Any]:
        """Check one provider or agent for real now; its row, with the result."""
        from auger.backends.status import statuses as agent_statuses

        config = self.config_for(self.cwd)
        model = next((m for m in await statuses(config, self.cache) if m.name == name), None)
        if model is not None:
            await check(config, model, self.cache)
            return _model_row(model)
        agent = next((a for a in agent_statuses(config.tables) if a.name == name), None)
        if agent is None:
            raise Refused(404, f"no provider or backend agent is named {name!r}")
        await self._probe_agent(agent)
        return _agent_row(agent)

    async def patch(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """Enable or disable a provider or agent (`enabled`), or add a custom ACP agent (`command`, `args`,
        `label`) — in the user's config.toml. `name` is checked by the route (ASCII letters, digits, '-', '_')."""
        from auger.backends.config import load_backends
        from auger.models.registry import registry_for
        from auger.user_config import ConfigEditError, read_text, set_table, tables, user_config_path

        if "enabled" in body and not isinstance(body["enabled"], bool):
            raise Refused(400, "enabled must be true or false")
        config = self.config_for(self.cwd)
        path = user_config_path()
        agent = {k: body[k] for k in ("command", "args", "label") if k in body}
        try:
            if agent:
                section = "backends"
                table = {**tables(read_text(path), path, section).get(name, {}), **agent}
                if "enabled" in body:
                    table["enabled"] = body["enabled"]
                problem = load_backends({"backends": {name: table}}).errors.get(name)
                if problem:
                    raise Refused(400, f"backend {name!r}: {problem}")
            elif name in registry_for(config).providers:
                section = "providers"
                table = {**tables(read_text(path), path, section).get(name, {})}
                if "enabled" not in body:
                    raise Refused(400, "send enabled: true or false")
                table.pop("disabled", None)
                if not body["enabled"]:
                    table["disabled"] = True
            elif name in load_backends(config.tables).specs:
                section = "backends"
                if "enabled" not in body:
                    raise Refused(400, "send enabled: true or false, or command and args for a custom agent")
                table = {**tables(read_text(path), path, section).get(name, {}), "enabled": body["enabled"]}
            else:
                raise Refused(404, f"no provider or backend agent is named {name!r}; send command to add an agent")
            set_table(path, section, name, table or None)
        except ConfigEditError as exc:
            raise Refused(409, str(exc)) from None
        try:
            return await self.probe(name)
        except Refused:  # what was removed was all there was of it
            return {"name": name}

    async def _probe_agent(self, agent: Any) -> None:
        """Start an available agent and run `initialize`: what it finds is shown on the row, and kept."""
        from auger.backends.config import load_backends
        from auger.backends.status import probe

        if agent.status != "available":
            return
        spec = load_backends(self.config_for(self.cwd).tables).specs[agent.name]
        found = await probe(spec, self.cwd, timeout=PROBE_TIMEOUT_S)
        agent.status, agent.detail, agent.checked = found.status, found.detail, 0.0
        self.cache.keep(_agent_key(agent), found.status, found.detail)


def _agent_key(agent: Any) -> str:
    return probe_key("agent", agent.name, agent.command)


def _model_row(row: ProviderStatus) -> dict[str, Any]:
    return {"name": row.name, "kind": "model", "label": row.label, "wire": row.wire, "source": row.source,
            "status": row.status, "detail": row.detail, "models": row.models, "checked": row.checked}


def _agent_row(row: Any) -> dict[str, Any]:
    return {"name": row.name, "kind": "agent", "label": row.label, "command": row.command, "source": row.source,
            "status": row.status, "detail": row.detail, "checked": row.checked}
