"""Schedules on the fleet's PostgreSQL database, for real: three `auger worker` and two `auger serve`
processes all fire the same schedules (a short period: every 3 seconds); each due time becomes one task,
whichever process claims it; every process is killed, the database keeps the schedules, and once all of
them are back the downtime's due times are handled by each schedule's missed-run policy — one late run
(`once`) or none (`skip`) — and the schedules go on. The exact semantics, with a fake clock, are
tests/test_schedules.py's; this test waits on the database's rows rather than for fixed times."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable

import psycopg

from tests.support.fleet import make_repo, start_worker, task_model
from tests.support.serve import TOKEN, start_process

PERIOD = 3.0


def rows(url: str, sql: str, *params) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


def add_schedule(server: str, repo, missed: str, name: str) -> str:
    """Through one server's /api/fleet/schedules: every process on the database fires it (its NOTIFY)."""
    body = {"every": f"{int(PERIOD)}s", "missed": missed, "repo": str(repo), "mode": "auto", "model": "m",
            "max_attempts": 1, "prompt": f"task {name}"}
    request = urllib.request.Request(f"{server}/api/fleet/schedules", data=json.dumps(body).encode(), method="POST",
                                     headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 201
        return json.loads(response.read())["id"]


def start_all(home, url, model, project, tmp_path, round_: int) -> tuple[list[subprocess.Popen], str]:
    workers = [start_worker(home, url, model, log=tmp_path / f"w{round_}-{n}.log") for n in range(3)]
    servers = [start_process(project, home, model, url) for _ in range(2)]  # each returns once it listens
    return [*workers, *(proc for proc, _, _ in servers)], servers[0][1]


def kill_all(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL) if os.getpgid(proc.pid) == proc.pid else proc.kill()
            except ProcessLookupError:
                pass
        proc.wait(10)


def wait_for(what: str, done: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_three_workers_and_two_servers_fire_each_due_time_once_across_a_restart_of_all(tmp_path, postgres_url):
    home = tmp_path / "home"
    home.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    repo = make_repo(tmp_path / "repo")
    url = postgres_url

    def runs(sid: str) -> list[tuple]:
        return rows(url, "SELECT due, state, late, missed, task_id, claimed_by FROM schedule_runs "
                         "WHERE schedule_id = %s ORDER BY due", sid)

    with task_model() as model:
        procs, server = start_all(home, url, model, project, tmp_path, 1)
        try:
            once = add_schedule(server, repo, "once", "once")
            skip = add_schedule(server, repo, "skip", "skip")
            wait_for("three runs of each schedule", lambda: all(
                sum(r[1] == "started" for r in runs(sid)) >= 3 for sid in (once, skip)), 6 * PERIOD + 20)
        finally:
            kill_all(procs)
        before = {sid: runs(sid) for sid in (once, skip)}
        # nothing runs while three due times pass unfired: the next one of each and the two after it
        last_next = max(r[0] for r in rows(url, "SELECT next_run FROM schedules"))
        time.sleep(max(0.0, last_next + 2 * PERIOD + 0.5 - float(rows(url, "SELECT extract(epoch FROM now())")[0][0])))
        procs, _ = start_all(home, url, model, project, tmp_path, 2)
        try:  # the downtime's run (late, or skipped) and one on time after it
            wait_for("two runs of each schedule after the restart", lambda: all(
                len(runs(sid)) >= len(before[sid]) + 2 and runs(sid)[-1][1] == "started"
                for sid in (once, skip)), 3 * PERIOD + 30)
        finally:
            kill_all(procs)
    after = {sid: runs(sid) for sid in (once, skip)}
    for sid, found in after.items():
        tasks = rows(url, "SELECT origin, id FROM tasks WHERE origin LIKE %s", f"schedule:{sid}@%")
        assert len(tasks) == len({origin for origin, _ in tasks}), "a due time became two tasks"
        started = [r for r in found if r[1] == "started"]
        assert {r[4] for r in started} <= {task_id for _, task_id in tasks}
        assert len(tasks) == len(started) + sum(1 for r in found if r[1] == "claimed" and r[4])
        dues = [r[0] for r in found if r[1] != "skipped"]
        steps = [round((b - a) / PERIOD) for a, b in zip(dues, dues[1:], strict=False)]
        assert all(s >= 1 for s in steps), f"a due time was fired twice: {steps}"
        assert steps.count(1) >= len(steps) - 1, f"due times were skipped before the restart: {steps}"
        downtime = found[len(before[sid])]  # the first due time after every process was killed
        assert downtime[3] >= 2, f"the downtime's run does not count the due times it missed: {downtime}"
        assert all(r[3] == 0 for r in found if r is not downtime), "only the downtime's run missed due times"
    once_downtime = after[once][len(before[once])]
    assert once_downtime[1] == "started" and once_downtime[2], "policy once: one late run for the downtime"
    assert [r for r in after[once] if r[2] and r[3]] == [once_downtime]
    skip_downtime = after[skip][len(before[skip])]
    assert skip_downtime[1] == "skipped" and not skip_downtime[4], "policy skip: the downtime starts nothing"
    assert rows(url, "SELECT skipped FROM schedules WHERE id = %s", skip)[0][0] == skip_downtime[3] + 1
    claimers = {r[5] for found in after.values() for r in found if r[1] != "skipped"}
    assert len(claimers) >= 2, "one process fired everything: the test shows nothing about sharing"
    assert rows(url, "SELECT COUNT(*) FROM tasks WHERE state = 'done' AND origin IS NOT NULL")[0][0] >= 3
