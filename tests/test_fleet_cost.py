"""What one fleet task costs the database end to end — submitted as `auger serve` and the library submit it
(fleet/submit.py), delivered, leased, run by a real `auger worker` as a session, its result recorded and
the task finished — counted by the server itself (pg_stat_statements), on the suite's PostgreSQL.

The bound is the fleet's budget: a write that takes a lock, a read or a transaction more for each item or
event a session records shows up here, at a few statements per item and a dozen items and events a task.
bench/bench_fleet.py prints the same count, statement by statement."""

from __future__ import annotations

import asyncio
import os
import signal
import time

from tests.support.fleet import CostMeter, make_repo, start_worker, submit_tasks, task_model

BUDGET = 50  # statements per task
TASKS = 4


def wait_all_final(meter: CostMeter, worker, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while meter.unfinished():
        assert worker.poll() is None, "the worker exited"
        assert time.monotonic() < deadline, "timed out waiting for the tasks"
        time.sleep(0.2)


def test_a_fleet_task_costs_the_database_at_most_fifty_statements(tmp_path, postgres_url):
    home = tmp_path / "home"
    home.mkdir()
    repo = make_repo(tmp_path / "repo")
    meter = CostMeter(postgres_url)
    try:
        with task_model() as model:
            # Long leases and polls: no heartbeat or idle poll falls in the measured seconds, only tasks.
            worker = start_worker(home, postgres_url, model, "--poll", "30", lease_timeout=60.0,
                                  log=tmp_path / "worker.log")
            try:
                asyncio.run(submit_tasks(postgres_url, repo, 1, prefix="warm"))  # the worker's start, paid once
                wait_all_final(meter, worker)
                before = meter.counts()
                asyncio.run(submit_tasks(postgres_url, repo, TASKS))
                wait_all_final(meter, worker)
                cost = meter.counts() - before
                states = meter.query("SELECT state, COUNT(*) FROM tasks GROUP BY state")
            finally:
                if worker.poll() is None:
                    os.killpg(worker.pid, signal.SIGKILL)
                worker.wait(10)
    finally:
        meter.close()
    assert states == [("done", TASKS + 1)]
    per_task = cost.statements / TASKS
    breakdown = "\n".join(f"{n / TASKS:5.1f}  {q[:120]}" for q, n in sorted(cost.calls.items(), key=lambda c: -c[1]))
    assert per_task <= BUDGET, f"{per_task:.1f} statements per task (budget {BUDGET}):\n{breakdown}"
