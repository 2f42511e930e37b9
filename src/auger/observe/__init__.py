"""Observers: what follows a session from outside it — the user's `notify` program (notify.py) and
OpenTelemetry export (telemetry.py, otel.py).

An observer is a follower: an async function over one session's envelopes (a subscription from its first
event), run as a task of the session (`Session.follow`), so `Session.wait_closed` returns once it has
handled `shutdown_complete`. It reads envelopes and nothing else: it cannot stall the session (a subscriber
that falls behind catches up from the store) or reach into it. Every front end opens its sessions through
the SessionManager, which attaches the observers the user's config asks for; with none configured nothing
here is imported beyond this module and its settings checks.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Coroutine, Mapping

if TYPE_CHECKING:
    from auger.config import Config
    from auger.protocol.envelope import Envelope

Follower = Callable[["AsyncIterator[Envelope]"], Coroutine[Any, Any, None]]


def observers(config: Config, warn: Callable[[str], None], environ: Mapping[str, str] | None = None
              ) -> list[Follower]:
    """The followers `config` asks for; what cannot work as configured is said through `warn`, once."""
    followers: list[Follower] = []
    if config.notify:
        from auger.observe.notify import Notifier, notify_problem

        problem = notify_problem(config.notify)
        if problem:
            warn(problem)
        else:
            followers.append(Notifier(config.notify, warn).follow)
    follower = telemetry_follower(config, os.environ if environ is None else environ, warn)
    if follower is not None:
        followers.append(follower)
    return followers


def telemetry_follower(config: Config, environ: Mapping[str, str], warn: Callable[[str], None]) -> Follower | None:
    """The follower that exports one session's spans and metrics, when telemetry is on and can work."""
    if "otel" not in config.tables and not any(value for name, value in environ.items()
                                               if name.startswith("OTEL_EXPORTER_OTLP_")):
        return None  # nothing could turn it on: its settings are not even read
    from auger.observe.telemetry import parse_settings

    settings, problems = parse_settings(config.tables, environ)
    for problem in problems:
        warn(problem)
    if settings is None:
        return None
    from auger.extras import MissingExtra, importing

    try:
        with importing("otel", "telemetry"):
            from auger.observe.otel import SessionTelemetry, exporter_for
    except MissingExtra as exc:
        warn(f"{exc}; the session runs without it")
        return None
    try:
        exporter = exporter_for(settings)
    except Exception as exc:  # a broken exporter setup must not keep a session from opening
        warn(f"telemetry could not start: {type(exc).__name__}: {exc}")
        return None
    return SessionTelemetry(exporter, settings, reasoning_effort=config.model_reasoning_effort).follow
