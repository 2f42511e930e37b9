"""The fleet under load on this machine: N short scripted tasks through W `auger worker` processes on a
PostgreSQL server the benchmark starts itself, against the mock model (each task: one write_file call, then
an answer). Tasks are submitted as `auger serve` and the library submit them (fleet/submit.py), once the
workers are up. Prints tasks per second, the queue latency (submit → started) at p50/p99, what each task
cost the database — statements (beside the target of 50, tests/test_fleet_cost.py) and transactions, from
pg_stat_statements and pg_stat_database, with the queue library's share — and the CPU time each task took
in the workers and in the database server: with the database's share small, throughput is bounded by the
agent's own work.

Not a test: tests/test_fleet.py checks the behaviour. Submission is a burst by default (every task queued
at once, so latency includes the backlog); `--rate` submits at a steady rate instead.

    python bench/bench_fleet.py [--tasks 1000] [--workers 8] [--concurrency 1] [--rate 0] [--top 0]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg  # noqa: E402

from tests.support.fleet import CostMeter, make_repo, start_worker, submit_tasks, task_model  # noqa: E402
from tests.support.postgres import PostgresServer, process_cpu_seconds  # noqa: E402

TARGET = 50  # statements per task (tests/test_fleet_cost.py holds the fleet to it)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=1, help="tasks each worker runs at once")
    parser.add_argument("--rate", type=float, default=0.0, help="tasks submitted per second (0: all at once)")
    parser.add_argument("--top", type=int, default=0, help="also print the N statements run most often")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    server = PostgresServer()
    workers = []
    meter = None
    try:
        url = server.fresh_database()
        meter = CostMeter(url)
        home = tmp / "home"
        home.mkdir()
        repo = make_repo(tmp / "repo")
        with task_model() as model:
            asyncio.run(submit_tasks(url, repo, 1, prefix="warm"))  # schema and queue tables in place
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("DELETE FROM task_results; DELETE FROM tasks; DELETE FROM pgqueuer")
            workers = [start_worker(home, url, model, "--concurrency", str(args.concurrency), "--poll", "5",
                                    lease_timeout=30.0, log=tmp / f"worker{n}.log") for n in range(args.workers)]
            while meter.consumers_started() < args.workers:  # each worker's consumer up: its start is not a task's cost
                if any(w.poll() is not None for w in workers):
                    raise SystemExit(f"a worker exited; see {tmp}")
                time.sleep(0.2)
            time.sleep(1)
            before = meter.counts()
            cpu_before = [sum(process_cpu_seconds(w.pid, children=True) for w in workers), server.cpu_seconds()]
            started = time.monotonic()
            asyncio.run(submit_tasks(url, repo, args.tasks, rate=args.rate))
            submitted = time.monotonic() - started
            while meter.unfinished():
                if any(w.poll() is not None for w in workers):
                    raise SystemExit(f"a worker exited; see {tmp}")
                time.sleep(0.5)
            elapsed = time.monotonic() - started
            cost = meter.counts() - before
            cpu = [sum(process_cpu_seconds(w.pid, children=True) for w in workers) - cpu_before[0],
                   server.cpu_seconds() - cpu_before[1]]
            for worker in workers:  # their connections end: the server counts their last transactions
                worker.terminate()
            for worker in workers:
                worker.wait(60)
            time.sleep(1)
            transactions = (meter.counts() - before).transactions
        with psycopg.connect(url, autocommit=True) as conn:
            done = conn.execute("SELECT state, COUNT(*) FROM tasks GROUP BY state").fetchall()
            waits = sorted(r[0] for r in conn.execute("SELECT started - created FROM tasks WHERE started IS NOT NULL"))
            runs = sorted(r[0] for r in conn.execute("SELECT finished - started FROM tasks WHERE state = 'done'"))
            results = conn.execute("SELECT COUNT(*), COUNT(DISTINCT task_id) FROM task_results").fetchone()
    finally:
        if meter is not None:
            meter.close()
        for worker in workers:
            if worker.poll() is None:
                worker.terminate()
        for worker in workers:
            worker.wait(60)
        server.close()

    n = args.tasks
    top = sorted(cost.calls.items(), key=lambda qc: -qc[1])[:args.top]

    def pct(values: list[float], p: float) -> float:
        return values[min(len(values) - 1, int(p * len(values)))] if values else float("nan")

    print(f"fleet: {n} tasks, {args.workers} workers x {args.concurrency}, submitted in {submitted:.1f}s "
          f"({'burst' if not args.rate else f'{args.rate}/s'})")
    print(f"  states                     {dict(done)}; result rows {results[0]} for {results[1]} tasks")
    print(f"  tasks per second           {n / elapsed:8.2f}   (all done in {elapsed:.1f}s)")
    print(f"  queue latency p50 / p99    {pct(waits, 0.5):8.2f}s / {pct(waits, 0.99):.2f}s   (submit -> started)")
    print(f"  run time p50 / p99         {pct(runs, 0.5):8.2f}s / {pct(runs, 0.99):.2f}s")
    print(f"  statements per task        {cost.statements / n:8.1f}   (target <= {TARGET}; queue library: "
          f"{cost.queue_statements / n:.1f})")
    print(f"  transactions per task      {transactions / n:8.1f}")
    print(f"  CPU per task               {cpu[0] / n * 1000:8.1f}ms in the workers, {cpu[1] / n * 1000:.1f}ms in the "
          "database")
    print(f"  mean run                   {statistics.mean(runs) if runs else float('nan'):8.2f}s")
    for query, calls in top:
        print(f"  {calls / n:7.1f}/task  {query[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
