"""The fleet under load on this machine: N short scripted tasks through W `auger worker` processes on a
PostgreSQL server the benchmark starts itself, against the mock model (each task: one write_file call, then
an answer). Prints tasks per second, the queue latency (submit → started) at p50/p99, and what each task
cost the database: statements and transactions (from pg_stat_statements and pg_stat_database), with the
share of the queue library's own statements.

Not a test: tests/test_fleet.py checks the behaviour. Submission is a burst by default (every task queued
at once, so latency includes the backlog); `--rate` submits at a steady rate instead.

    python bench/bench_fleet.py [--tasks 1000] [--workers 8] [--concurrency 1] [--rate 0]
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

from tests.support.fleet import make_repo, start_worker, task_model  # noqa: E402
from tests.support.postgres import PostgresServer  # noqa: E402


async def submit_all(url: str, repo: Path, count: int, rate: float) -> None:
    from auger.fleet import queue
    from auger.fleet.policy import TaskSpec
    from auger.fleet.tasks import Tasks
    from auger.store.postgres import PostgresStore

    store = PostgresStore(url)
    tasks = Tasks(store)
    await queue.install(url)
    try:
        for n in range(count):
            spec = TaskSpec(prompt=f"task b{n}", repo=str(repo), model="m", mode="auto")
            record, _ = await tasks.submit(spec)
            await queue.enqueue(url, record.id)
            if rate:
                await asyncio.sleep(1 / rate)
    finally:
        await store.aclose()


def counters(url: str) -> tuple[int, int, dict[str, int]]:
    """Statements run (all, and by the queue library's tables) and transactions committed, so far."""
    with psycopg.connect(url, autocommit=True) as conn:
        xacts = conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
                             ).fetchone()[0]
        rows = conn.execute("SELECT query, calls FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid "
                            "WHERE d.datname = current_database()").fetchall()
    total = sum(calls for _, calls in rows)
    queue = sum(calls for query, calls in rows if "pgqueuer" in query)
    return total, int(xacts), {"queue": queue}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=1, help="tasks each worker runs at once")
    parser.add_argument("--rate", type=float, default=0.0, help="tasks submitted per second (0: all at once)")
    parser.add_argument("--top", type=int, default=0, help="also print the N statements run most often")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    server = PostgresServer(extra="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.max=5000")
    workers = []
    try:
        url = server.fresh_database()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
        home = tmp / "home"
        home.mkdir()
        repo = make_repo(tmp / "repo")
        with task_model() as model:
            asyncio.run(submit_all(url, repo, 1, 0))  # schema and queue tables in place
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("DELETE FROM task_results; DELETE FROM tasks; DELETE FROM pgqueuer")
            workers = [start_worker(home, url, model, "--concurrency", str(args.concurrency), "--poll", "5",
                                    lease_timeout=30.0, log=tmp / f"worker{n}.log") for n in range(args.workers)]
            time.sleep(3)  # workers up and listening
            before = counters(url)
            started = time.monotonic()
            asyncio.run(submit_all(url, repo, args.tasks, args.rate))
            submitted = time.monotonic() - started
            while True:
                with psycopg.connect(url, autocommit=True) as conn:
                    left = conn.execute("SELECT COUNT(*) FROM tasks WHERE state IN ('queued', 'running')"
                                        ).fetchone()[0]
                if not left:
                    break
                if any(w.poll() is not None for w in workers):
                    raise SystemExit(f"a worker exited; see {tmp}")
                time.sleep(0.5)
            elapsed = time.monotonic() - started
            after = counters(url)
        with psycopg.connect(url, autocommit=True) as conn:
            done = conn.execute("SELECT state, COUNT(*) FROM tasks GROUP BY state").fetchall()
            waits = sorted(r[0] for r in conn.execute("SELECT started - created FROM tasks WHERE started IS NOT NULL"))
            runs = sorted(r[0] for r in conn.execute("SELECT finished - started FROM tasks WHERE state = 'done'"))
            results = conn.execute("SELECT COUNT(*), COUNT(DISTINCT task_id) FROM task_results").fetchone()
            top = conn.execute("SELECT calls, regexp_replace(query, '\\s+', ' ', 'g') FROM pg_stat_statements s "
                               "JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = current_database() "
                               "ORDER BY calls DESC LIMIT %s", (args.top,)).fetchall() if args.top else []
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(60)
        server.close()

    statements = after[0] - before[0]
    transactions = after[1] - before[1]
    queue_statements = after[2]["queue"] - before[2]["queue"]
    n = args.tasks

    def pct(values: list[float], p: float) -> float:
        return values[min(len(values) - 1, int(p * len(values)))] if values else float("nan")

    print(f"fleet: {n} tasks, {args.workers} workers x {args.concurrency}, submitted in {submitted:.1f}s "
          f"({'burst' if not args.rate else f'{args.rate}/s'})")
    print(f"  states                     {dict(done)}; result rows {results[0]} for {results[1]} tasks")
    print(f"  tasks per second           {n / elapsed:8.2f}   (all done in {elapsed:.1f}s)")
    print(f"  queue latency p50 / p99    {pct(waits, 0.5):8.2f}s / {pct(waits, 0.99):.2f}s   (submit -> started)")
    print(f"  run time p50 / p99         {pct(runs, 0.5):8.2f}s / {pct(runs, 0.99):.2f}s")
    print(f"  statements per task        {statements / n:8.1f}   (queue library: {queue_statements / n:.1f})")
    print(f"  transactions per task      {transactions / n:8.1f}")
    print(f"  mean run                   {statistics.mean(runs) if runs else float('nan'):8.2f}s")
    for calls, query in top:
        print(f"  {calls / n:7.1f}/task  {query[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
