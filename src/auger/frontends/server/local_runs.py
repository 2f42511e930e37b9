"""Runs `auger serve` starts itself, where there is no fleet to queue them for (a SQLite store, one
machine): a schedule's run, or a webhook intake's task, becomes a session of this server.

A run is data, held to this server's ceilings as a client's new session is: its repository must be a
directory inside the server's roots (the session works there, on the files as they are — what a person
who wants a nightly run on their own checkout asks for), its mode at most the server's `--mode` (a run
that names none gets it), its model and provider the server's own or ones it offers (Hub.create checks
them as it does a client's). It is a session like any other: listed, streamed, and in `safe` mode its
approvals wait for a person in the web UI. With a PostgreSQL store the same runs are fleet tasks instead
(fleet/schedules.py `fleet_starter`), held to the workers' policy.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from auger.fleet.policy import is_remote
from auger.fleet.schedules import Schedule, Started
from auger.frontends.server.sessions import Refused
from auger.protocol.ops import UserTurn
from auger.store.base import ScheduleRun

if TYPE_CHECKING:
    from auger.fleet.policy import TaskSpec
    from auger.fleet.schedules import Starter
    from auger.frontends.server.state import Server


async def run_here(server: Server, spec: TaskSpec, created_by: str, title: str = "") -> Started:
    """Start `spec` as a session of this server: its id, or why it may not run here."""
    if is_remote(spec.repo):
        return Started(error=f"repository {spec.repo} is a URL: without a fleet (a SQLite store) a run works in "
                             "a directory of this server's roots")
    if spec.deliver != "none" or spec.kind != "change":
        return Started(error="a run of this server (no fleet: a SQLite store) changes its directory and answers in "
                             "its session: delivering past it, and review tasks, need a fleet worker's [forge]")
    if spec.ref not in ("HEAD", ""):
        return Started(error=f"ref {spec.ref!r}: a run of this server works on its directory as it is (ref HEAD); "
                             "a base ref needs a fleet's checkout")
    where = os.path.realpath(os.path.expanduser(spec.repo))
    try:
        session = await server.hub.create(where, mode=spec.mode, model=spec.model, provider=spec.provider,
                                          created_by=created_by)
    except Refused as exc:
        return Started(error=exc.message)
    if title:
        await session.set_title(title[:80])
    session.submit(UserTurn(spec.prompt))
    return Started(session_id=session.id)


def local_starter(server: Server) -> Starter:
    """Start a schedule's runs as this server's sessions."""

    async def start(schedule: Schedule, run: ScheduleRun) -> Started:
        if schedule.spec is None:
            return Started(error=f"refused: {schedule.refusal}")
        return await run_here(server, schedule.spec, f"schedule {schedule.id[:12]}",
                              f"schedule {schedule.id[:8]}: {' '.join(schedule.spec.prompt.split())}")

    return start
