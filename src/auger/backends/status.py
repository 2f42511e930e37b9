"""Which agents can run here: a cheap presence check (is the command on PATH), cached for a while,
and on demand a probe that starts the agent and runs `initialize`.

Statuses: `available` (the command is found), `disabled` (enabled = false), `not installed` (not on
PATH), `error` (its config table is broken, or a probe failed) — each with a one-line diagnostic.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from typing import Any

from auger.backends.base import BackendError, BackendSpec
from auger.backends.config import load_backends
from auger.extras import missing, needs

WHICH_TTL_S = 30.0
_which: dict[str, tuple[float, str | None]] = {}  # command -> (checked at, path)


@dataclass
class BackendStatus:
    name: str
    label: str
    command: str
    status: str  # available | disabled | not installed | error
    detail: str = ""
    source: str = "built-in"
    checked: float | None = None  # seconds since a probe found this (models/status.py keeps what probes find)


def which(command: str, ttl: float = WHICH_TTL_S) -> str | None:
    """Where `command` is on PATH, remembered for `ttl` seconds (a listing asks for every agent)."""
    now = time.monotonic()
    cached = _which.get(command)
    if cached is not None and now - cached[0] < ttl:
        return cached[1]
    found = shutil.which(command)
    _which[command] = (now, found)
    return found


def statuses(tables: dict[str, Any], source: str = "config") -> list[BackendStatus]:
    catalog = load_backends(tables, source)
    rows = [status_of(spec) for spec in catalog.specs.values()]
    rows += [BackendStatus(name, name, "", "error", f"[backends.{name}] {problem}", source)
             for name, problem in catalog.errors.items()]
    return sorted(rows, key=lambda row: row.name)


def status_of(spec: BackendSpec) -> BackendStatus:
    command = " ".join((spec.command, *spec.args))
    if not spec.enabled:
        return BackendStatus(spec.name, spec.title, command, "disabled", "enabled = false", spec.source)
    found = which(spec.command)
    if found is None:
        return BackendStatus(spec.name, spec.title, command, "not installed", f"{spec.command!r} is not on PATH",
                             spec.source)
    module = missing("acp")
    if module is not None:  # auger speaks to every agent over ACP
        return BackendStatus(spec.name, spec.title, command, "error", needs("acp", "running another agent", module),
                             spec.source)
    return BackendStatus(spec.name, spec.title, command, "available", found, spec.source)


async def probe(spec: BackendSpec, cwd: str, timeout: float = 30.0) -> BackendStatus:
    """Start the agent and initialize it: `available` with what it says it is, or `error` with why not."""
    from auger.backends.acp import AcpBackend

    row = status_of(spec)
    if row.status != "available":
        return row
    try:
        row.detail = await AcpBackend(spec, start_timeout=timeout).probe(cwd)
    except BackendError as exc:
        row.status, row.detail = "error", str(exc)
    return row
