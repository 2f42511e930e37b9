"""Every model provider and backend agent, with a status a person can act on, for `GET /api/providers`.

Two tiers. The presence check is cheap and always runs: is the provider configured, enabled, is its
key set; is the agent's command on PATH. The reachability check does the real thing — asks a model
server for its model list, starts an ACP agent and runs `initialize` — and is cached for `ttl`
seconds, per provider, refreshed on request (`POST /api/providers/NAME/probe`, or `?probe=stale`).

A model provider's row names the models it is known to serve (`models`: the server's own model first
for its provider, then the provider's default and described ones), for a model picker.

Statuses: `available`, `disabled`, `key missing`, `not installed`, `unreachable`, `error` — each with
a one-line diagnostic. `patch` enables or disables one, or adds a custom ACP agent, in the user's
config.toml (never a project's).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

from auger.frontends.server.sessions import Refused

PROBE_TTL_S = 300.0
PROBE_TIMEOUT_S = 10.0


class Providers:
    def __init__(self, config_for: Callable[[str], Any], cwd: str, *, ttl: float = PROBE_TTL_S) -> None:
        self.config_for = config_for
        self.cwd = cwd  # where an agent is started for its probe
        self.ttl = ttl
        self._probed: dict[str, tuple[float, str, str]] = {}  # name -> (when, status, detail)

    async def rows(self, probe_stale: bool = False) -> list[dict[str, Any]]:
        rows = self._presence()
        if probe_stale:
            stale = [r["name"] for r in rows if r["status"] == "available" and not self._fresh(r["name"])]
            await asyncio.gather(*(self.probe(name) for name in stale))
        for row in rows:
            self._overlay(row)
        return rows

    async def probe(self, name: str) -> dict[str, Any]:
        """Check one provider or agent for real now; its row, with the result."""
        row = next((r for r in self._presence() if r["name"] == name), None)
        if row is None:
            raise Refused(404, f"no provider or backend agent is named {name!r}")
        if row["status"] == "available":
            status, detail = await (self._probe_model(name) if row["kind"] == "model" else self._probe_agent(name))
            self._probed[name] = (time.monotonic(), status, detail)
        self._overlay(row)
        return row

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
        self._probed.pop(name, None)
        return await self.probe(name) if any(r["name"] == name for r in self._presence()) else {"name": name}

    # -- presence -----------------------------------------------------------------------
    def _presence(self) -> list[dict[str, Any]]:
        from auger.backends.status import statuses
        from auger.models.registry import registry_for

        config = self.config_for(self.cwd)
        registry = registry_for(config)
        rows = []
        for name, provider in registry.providers.items():
            status = registry.status(name)
            detail = registry.errors.get(name, "")
            base_url = _base_url(config, name, provider.base_url)
            if status == "needs base_url" and base_url:
                status = "configured"
            if status == "configured":
                status, detail = "available", base_url or provider.wire
            elif status == "key missing":
                detail = f"set {provider.key_env}"
            elif status == "needs base_url":
                status, detail = "error", "no base URL: set base_url (or start the server with --base-url)"
            elif status == "config error":
                status = "error"
            models = [provider.default_model] if provider.default_model else []
            if name == config.provider and config.model:
                models.insert(0, config.model)  # the server's own model comes first
            models += [m for m in provider.models if m not in models]
            rows.append({"name": name, "kind": "model", "label": provider.label, "wire": provider.wire,
                         "source": provider.source, "status": status, "detail": detail,
                         "models": list(dict.fromkeys(models))})
        for name, problem in registry.errors.items():
            if name not in registry.providers:
                rows.append({"name": name, "kind": "model", "label": name, "wire": "", "source": "config",
                             "status": "error", "detail": problem})
        for agent in statuses(config.tables):
            rows.append({"name": agent.name, "kind": "agent", "label": agent.label, "command": agent.command,
                         "source": agent.source, "status": agent.status, "detail": agent.detail})
        return rows

    def _fresh(self, name: str) -> bool:
        probed = self._probed.get(name)
        return probed is not None and time.monotonic() - probed[0] < self.ttl

    def _overlay(self, row: dict[str, Any]) -> None:
        """Put a fresh probe's finding on an available row (and say when it was checked)."""
        probed = self._probed.get(row["name"])
        row["checked"] = None
        if probed is not None and self._fresh(row["name"]) and row["status"] == "available":
            row["status"], row["detail"] = probed[1], probed[2]
            row["checked"] = round(time.monotonic() - probed[0], 1)  # seconds ago

    # -- reachability -------------------------------------------------------------------
    async def _probe_model(self, name: str) -> tuple[str, str]:
        """Ask the provider's server for its models: does it answer, does it take the key."""
        import os

        import httpx

        from auger.models.registry import registry_for

        config = self.config_for(self.cwd)
        provider = registry_for(config).providers[name]
        if provider.wire == "replay":
            return "available", "replays recordings; nothing to reach"
        key = os.environ.get(provider.key_env) if provider.key_env else None
        base = _base_url(config, name, provider.base_url).rstrip("/")
        if provider.wire == "anthropic":
            url = f"{base}/v1/models"
            headers = {"anthropic-version": "2023-06-01", **({"x-api-key": key} if key else {})}
        else:
            url, headers = f"{base}/models", ({"authorization": f"Bearer {key}"} if key else {})
        try:
            async with httpx.AsyncClient(timeout=PROBE_TIMEOUT_S) as client:
                response = await client.get(url, headers=headers)
        except httpx.HTTPError as exc:
            return "unreachable", f"{url}: {type(exc).__name__}: {exc}"
        if response.status_code in (401, 403):
            return "error", f"{url} refused the key (HTTP {response.status_code})"
        if response.status_code >= 400:
            return "error", f"{url} answered HTTP {response.status_code}"
        return "available", f"{url} answers"

    async def _probe_agent(self, name: str) -> tuple[str, str]:
        from auger.backends.config import load_backends
        from auger.backends.status import probe

        spec = load_backends(self.config_for(self.cwd).tables).specs[name]
        row = await probe(spec, self.cwd, timeout=PROBE_TIMEOUT_S)
        return row.status, row.detail


def _base_url(config: Any, name: str, registered: str) -> str:
    """Where the provider's requests go: the server's --base-url for its own provider, else the registry's."""
    return config.base_url if name == config.provider and config.base_url else registered
