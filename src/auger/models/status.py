"""Which model providers can be used here, in the words `auger providers` and `auger serve` both use, and
whether each really answers — found once, kept in the user's cache dir, read by either.

Two tiers. The presence check is cheap and always runs: is the provider configured, enabled, is its key
set, does it know where to send requests (`presence`). The reachability check does the real thing: it asks
the provider's server for its model list — does it answer, does it take the key (`reach`). What a check
finds is kept for PROBE_TTL_S seconds in `probes.json` in the cache dir (`ProbeCache`), per provider and
the URL it is reached at — an agent's check (backends/status.py `probe`) per agent and command — so
`auger providers --probe` and a server's `GET /api/providers` show the same finding, whichever made it.

Statuses: `available`, `disabled`, `key missing`, `unreachable`, `error` (agents add `not installed`),
each with a one-line detail a person can act on.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeGuard

from auger import json_cache
from auger.models.registry import registry_for

PROBE_TTL_S = 300.0  # how long what a check found is believed
PROBE_TIMEOUT_S = 10.0
CACHE_FILE = "probes.json"  # {"<kind> <name> <target>": {"status": …, "detail": …, "at": unix time}}
STATUSES = ("available", "disabled", "key missing", "not installed", "unreachable", "error")
_DETAIL_MAX = 500  # a kept detail longer than this is not believed (the file is the user's, but still read)


@dataclass
class ProviderStatus:
    """A model provider as a person sees it: its status now, and what it serves."""

    name: str
    label: str
    wire: str
    source: str
    status: str
    detail: str
    base_url: str = ""  # where its requests go ("" when nowhere yet)
    key_env: str | None = None
    default_model: str | None = None
    models: list[str] = field(default_factory=list)  # the configured model first, for a model picker
    checked: float | None = None  # seconds since its reachability was checked; None: not checked lately

    @property
    def probe_key(self) -> str:
        return probe_key("model", self.name, self.base_url)


def probe_key(kind: str, name: str, target: str) -> str:
    """Where a check's finding is kept: what was checked (`model`/`agent`), its name, where it was reached."""
    return f"{kind} {name} {target}"


def presence(config: Any) -> list[ProviderStatus]:
    """Every provider the configuration knows, with its presence check; a broken table is a row with its
    problem, never an exception."""
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
            status, detail = "error", "no base URL: set base_url (or start with --base-url)"
        elif status == "config error":
            status = "error"
        models = [provider.default_model] if provider.default_model else []
        if name == config.provider and config.model:
            models.insert(0, config.model)  # the configured model comes first
        models += [m for m in provider.models if m not in models]
        rows.append(ProviderStatus(name, provider.label, provider.wire, provider.source, status, detail, base_url,
                                   provider.key_env, provider.default_model, list(dict.fromkeys(models))))
    for name, problem in registry.errors.items():
        if name not in registry.providers:
            rows.append(ProviderStatus(name, name, "", "config", "error", problem))
    return rows


async def reach(config: Any, name: str, timeout: float = PROBE_TIMEOUT_S) -> tuple[str, str]:
    """Ask the provider's server for its models: (status, detail) — `available` when it answers,
    `unreachable` when nothing answers, `error` when it refuses the key or the request."""
    import httpx

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
        async with httpx.AsyncClient(timeout=timeout) as client:
            response = await client.get(url, headers=headers)
    except httpx.HTTPError as exc:
        return "unreachable", f"{url}: {type(exc).__name__}: {exc}"
    if response.status_code in (401, 403):
        return "error", f"{url} refused the key (HTTP {response.status_code})"
    if response.status_code >= 400:
        return "error", f"{url} answered HTTP {response.status_code}"
    return "available", f"{url} answers"


class Checkable(Protocol):
    """A row whose status a check's finding may replace: a model provider's, or an agent's."""

    status: str
    detail: str
    checked: float | None


async def statuses(config: Any, cache: ProbeCache, probe: str | None = None) -> list[ProviderStatus]:
    """Every model provider with its presence check and what a check found lately. `probe`: `stale` checks
    the available ones whose finding is older than the cache's TTL (or missing), `now` every available one."""
    rows = presence(config)
    due = [r for r in rows if r.status == "available" and (probe == "now" or probe == "stale"
                                                            and cache.found(r.probe_key) is None)]
    for row in rows:
        if row not in due:
            overlay(row, row.probe_key, cache)
    await asyncio.gather(*(check(config, row, cache) for row in due))
    return rows


async def check(config: Any, row: ProviderStatus, cache: ProbeCache) -> None:
    """Check one available provider now: what it finds is shown on the row, and kept."""
    if row.status != "available":
        return
    row.status, row.detail = await reach(config, row.name)
    row.checked = 0.0
    cache.keep(row.probe_key, row.status, row.detail)


def overlay(row: Checkable, key: str, cache: ProbeCache) -> None:
    """Put a fresh finding on an available row, and say how long ago it was made (`checked`, seconds)."""
    found = cache.found(key) if row.status == "available" else None
    row.checked = None
    if found is not None:
        row.status, row.detail, row.checked = found.status, found.detail, round(found.age, 1)


@dataclass(frozen=True)
class Finding:
    status: str
    detail: str
    age: float  # seconds since the check


class ProbeCache:
    """What checks found lately, in `cache_dir/probes.json`, shared by every auger process of the user.
    Reading never fails (a missing, broken or foreign file is an empty cache); writing replaces the file
    whole (a reader never sees half of it) and never raises — a cache that cannot be written is only slower."""

    def __init__(self, cache_dir: Path | None, ttl: float = PROBE_TTL_S) -> None:
        self.path = cache_dir / CACHE_FILE if cache_dir is not None else None
        self.ttl = ttl

    def found(self, key: str) -> Finding | None:
        """The finding kept under `key`, if it is fresh."""
        entry = self._read().get(key)
        now = time.time()
        if not _believable(entry) or not 0 <= now - entry["at"] < self.ttl:
            return None
        return Finding(entry["status"], entry["detail"], now - entry["at"])

    def keep(self, key: str, status: str, detail: str) -> None:
        entries = self._fresh()
        entries[key] = {"status": status, "detail": detail[:_DETAIL_MAX], "at": time.time()}
        self._write(entries)

    def forget(self, key: str) -> None:
        """Drop a finding (what was checked changed: the user's config was edited)."""
        entries = self._fresh()
        if entries.pop(key, None) is not None:
            self._write(entries)

    def _fresh(self) -> dict[str, Any]:
        now = time.time()
        return {k: v for k, v in self._read().items() if _believable(v) and 0 <= now - v["at"] < self.ttl}

    def _write(self, entries: dict[str, Any]) -> None:
        if self.path is not None:
            json_cache.write(self.path, entries, private=True)  # details name URLs: the user's only

    def _read(self) -> dict[str, Any]:
        return {} if self.path is None else json_cache.read(self.path)


def _believable(entry: Any) -> TypeGuard[dict[str, Any]]:
    return (isinstance(entry, dict) and entry.get("status") in STATUSES and isinstance(entry.get("detail"), str)
            and len(entry["detail"]) <= _DETAIL_MAX and isinstance(entry.get("at"), (int, float))
            and not isinstance(entry.get("at"), bool))


def _base_url(config: Any, name: str, registered: str) -> str:
    """Where the provider's requests go: the configured base_url (a server's --base-url) for the chosen
    provider, else the registry's."""
    return config.base_url if name == config.provider and config.base_url else registered
