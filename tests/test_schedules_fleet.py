"""Schedules on the fleet's PostgreSQL database, for real: three `auger worker` and two `auger serve`
processes all fire the same schedules (a short period: every 3 seconds); each due time becomes one task,
whichever process claims it; every process is killed, the database keeps the schedules, and once all of
them are back the downtime's due times are handled by each schedule's missed-run policy — one late run
(`once`) or none (`skip`) — and the schedules go on."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import psycopg

from tests.support.fleet import fleet_env, make_repo, start_worker, task_model
from tests.support.serve import start_process

PERIOD = 3.0


def rows(url: str, sql: str, *params) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


def add_schedule(home, url, model, repo, missed: str, name: str) -> str:
    done = subprocess.run([os.sys.executable, "-m", "auger", "schedule", "add", "--every", f"{int(PERIOD)}s",
                           "--missed", missed, "--repo", str(repo), "--mode", "auto", "-m", "m", "--max-attempts", "1",
                           "--json", f"task {name}"],
                          env=fleet_env(home, url, model.base_url), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["id"]


def start_all(home, url, model, project, tmp_path, round_: int) -> list[subprocess.Popen]:
    workers = [start_worker(home, url, model, log=tmp_path / f"w{round_}-{n}.log") for n in range(3)]
    servers = [start_process(project, home, model, url)[0] for _ in range(2)]
    return [*workers, *servers]


def kill_all(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()
        proc.wait(10)


def test_three_workers_and_two_servers_fire_each_due_time_once_across_a_restart_of_all(tmp_path, postgres_url):
    home = tmp_path / "home"
    home.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    repo = make_repo(tmp_path / "repo")
    url = postgres_url
    with task_model() as model:
        once = add_schedule(home, url, model, repo, "once", "once")
        skip = add_schedule(home, url, model, repo, "skip", "skip")
        procs = start_all(home, url, model, project, tmp_path, 1)
        try:
            time.sleep(4 * PERIOD + 1)
        finally:
            kill_all(procs)
        killed_at = time.time()
        before = {sid: rows(url, "SELECT due FROM schedule_runs WHERE schedule_id = %s", sid) for sid in (once, skip)}
        time.sleep(4 * PERIOD)  # nothing runs: at least three due times pass unfired
        procs = start_all(home, url, model, project, tmp_path, 2)
        try:
            time.sleep(3 * PERIOD + 1)
        finally:
            kill_all(procs)
    for sid in (once, skip):
        assert len(before[sid]) >= 3, f"the schedule hardly fired before the restart: {before[sid]}"
    runs = {sid: rows(url, "SELECT due, state, late, missed, task_id, claimed_by FROM schedule_runs "
                           "WHERE schedule_id = %s ORDER BY due", sid) for sid in (once, skip)}
    for sid, found in runs.items():
        started = [r for r in found if r[1] == "started"]
        tasks = rows(url, "SELECT origin, state FROM tasks WHERE origin LIKE %s", f"schedule:{sid}@%")
        assert len(tasks) == len({origin for origin, _ in tasks}), "a due time became two tasks"
        assert {r[4] for r in started} <= {t[0] for t in rows(url, "SELECT id FROM tasks")}
        assert len(tasks) == len(started) + sum(1 for r in found if r[1] == "claimed" and r[4])
        dues = [r[0] for r in found if r[1] != "skipped"]
        steps = [round((b - a) / PERIOD) for a, b in zip(dues, dues[1:])]
        assert steps.count(1) >= len(steps) - 1, f"due times were skipped or repeated: {steps}"  # one gap: the downtime
        assert all(s >= 1 for s in steps)
    late = [r for r in runs[once] if r[2]]
    assert len(late) == 1 and late[0][3] >= 2 and late[0][0] < killed_at + 4 * PERIOD, late  # one run for the downtime
    assert not any(r[2] for r in runs[skip]) and any(r[1] == "skipped" for r in runs[skip])
    skipped = rows(url, "SELECT skipped FROM schedules WHERE id = %s", skip)[0][0]
    assert skipped >= 3
    claimers = {r[5] for found in runs.values() for r in found}
    assert len(claimers) >= 2, "one process fired everything: the test shows nothing about sharing"
    assert rows(url, "SELECT COUNT(*) FROM tasks WHERE state = 'done' AND origin IS NOT NULL")[0][0] >= 3
