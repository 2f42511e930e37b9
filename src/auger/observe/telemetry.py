"""Whether and where telemetry goes: the user's `[otel]` table and the standard OTEL_EXPORTER_OTLP_*
variables. Nothing of OpenTelemetry is imported here; observe/otel.py is imported (by observe/__init__.py)
only when this says to export.

Telemetry is on when the user's config has `[otel] endpoint = "http://collector:4318"`, or the environment
has `OTEL_EXPORTER_OTLP_ENDPOINT` (or the per-signal `…_TRACES_ENDPOINT` / `…_METRICS_ENDPOINT`), unless
`[otel] enabled = false` or `OTEL_SDK_DISABLED=true`. A project's `.auger/config.toml` can neither turn it on
nor redirect it (config.py drops a project's `[otel]` table): where the data goes is the user's choice.
The exporter speaks OTLP over HTTP with protobuf bodies (`protocol = "http/protobuf"`, the only value).
Prompt and output text stay out of the data unless `log_prompts = true`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

PROTOCOL = "http/protobuf"
ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                 "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
_KEYS = {"enabled", "endpoint", "headers", "protocol", "log_prompts", "timeout"}


@dataclass(frozen=True)
class OtelSettings:
    """`endpoint` is the collector's base URL (the exporters add /v1/traces and /v1/metrics); None leaves the
    endpoint, and the headers, to the OTEL_EXPORTER_OTLP_* variables the exporters read themselves."""

    endpoint: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    log_prompts: bool = False
    timeout: float = 5.0  # seconds an export may take (a collector that is down costs at most this at exit)


def parse_settings(tables: Mapping[str, Any], environ: Mapping[str, str]) -> tuple[OtelSettings | None, list[str]]:
    """The settings when telemetry is on (None: off), and what is wrong in the `[otel]` table."""
    raw = tables.get("otel", {})
    problems: list[str] = []
    if not isinstance(raw, dict):
        return None, ["[otel] must be a table; telemetry is off"]
    problems += [f"[otel] unknown key {key!r} ignored (known: {', '.join(sorted(_KEYS))})"
                 for key in raw if key not in _KEYS]
    if raw.get("enabled") is False or environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None, problems
    endpoint = raw.get("endpoint")
    if endpoint is not None and (not isinstance(endpoint, str) or not endpoint.startswith(("http://", "https://"))):
        return None, [*problems, f"[otel] endpoint must be an http:// or https:// URL, got {endpoint!r}; "
                                 "telemetry is off"]
    if endpoint is None and not any(environ.get(var) for var in ENDPOINT_VARS):
        return None, problems
    protocol = raw.get("protocol") or environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") \
        or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or PROTOCOL
    if protocol != PROTOCOL:
        return None, [*problems, f"telemetry protocol {protocol!r} is not supported (only {PROTOCOL!r}); "
                                 "telemetry is off"]
    headers = raw.get("headers", {})
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        problems.append("[otel] headers must be a table of strings; ignored")
        headers = {}
    log_prompts = raw.get("log_prompts", False)
    if not isinstance(log_prompts, bool):
        problems.append(f"[otel] log_prompts must be true or false, got {log_prompts!r}; prompts stay out")
        log_prompts = False
    timeout = raw.get("timeout", 5.0)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        problems.append(f"[otel] timeout must be a number of seconds, got {timeout!r}; using 5")
        timeout = 5.0
    return OtelSettings(endpoint.rstrip("/") if endpoint else None, tuple(sorted(headers.items())), log_prompts,
                        float(timeout)), problems
