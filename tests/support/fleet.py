"""What the fleet tests and the fleet benchmark share: a scripted model that does one task (writes a file
named after the task's prompt, then answers), a repository to check out, and real `auger worker` and
`auger submit` processes on a database."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.harness import cli_env, conversation
from tests.support.mock_openai import MockChatServer, Reply, ToolCall

TASK = re.compile(r"task (\S+)")


def task_model(delay: float = 0.0, tool: str = "write_file") -> MockChatServer:
    """A model that, given "task X", writes `X.txt` then says "done X"; `delay` before each reply."""

    def step(body: dict[str, Any]) -> Reply:
        messages = conversation(body["messages"])
        prompt = next((m["content"] for m in messages if m["role"] == "user" and isinstance(m["content"], str)
                       and TASK.search(m["content"])), "task unknown")
        name = TASK.search(prompt).group(1)
        if not any(m["role"] == "tool" for m in messages):
            args = {"path": f"{name}.txt", "content": f"written by task {name}\n"}
            if tool == "shell":
                return Reply(tool_calls=[ToolCall("shell", {"command": f"echo {name} > {name}.txt"})], delay=delay)
            return Reply(tool_calls=[ToolCall(tool, args)], delay=delay)
        return Reply(text=f"done {name}", delay=delay)

    return MockChatServer([step], loop=True)


def make_repo(path: Path) -> Path:
    """A git repository with one commit."""
    path.mkdir(parents=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    (path / "README.md").write_text("a project\n")
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=path, check=True, env=env)
    subprocess.run(["git", "add", "-A"], cwd=path, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "-m", "start"], cwd=path, check=True, env=env)
    return path


def fleet_env(home: Path, url: str, base_url: str, lease_timeout: float = 2.0) -> dict[str, str]:
    """A worker's environment: the database, the mock model, short leases for tests."""
    return cli_env(home, {"AUGER_DB": url, "AUGER_LEASE_TIMEOUT": str(lease_timeout),
                          "AUGER_LEASE_HEARTBEAT": str(lease_timeout / 4)})


def start_worker(home: Path, url: str, model: MockChatServer, *args: str, lease_timeout: float = 2.0,
                 log: Path | None = None, allow_repo: str | None = None,
                 env_extra: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """A real `auger worker` whose own model is the mock (its operator's --base-url), taking local
    repositories beneath the test's directory (`allow_repo`: another --allow-repo pattern)."""
    out = open(log, "w") if log is not None else subprocess.DEVNULL  # noqa: SIM115 - the process keeps it
    allowed = allow_repo if allow_repo is not None else f"{home.parent}/**"
    return subprocess.Popen([sys.executable, "-m", "auger", "worker", "--poll", "1", "--data-dir",
                             str(home / "worker"), "--base-url", model.base_url, "-m", "m",
                             *(["--allow-repo", allowed] if allowed else []), *args],
                            env={**fleet_env(home, url, model.base_url, lease_timeout), **(env_extra or {})},
                            stdout=out,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def submit(home: Path, url: str, model: MockChatServer, repo: Path, prompt: str, *args: str,
           check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "auger", "submit", "--repo", str(repo), "-m", "m",
                           "--mode", "auto", *args, prompt],
                          env=fleet_env(home, url, model.base_url), capture_output=True, text=True, timeout=60)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def plant_task(url: str, spec: dict[str, Any], *, queue: str = "default") -> str:
    """A task row written straight into the database — as someone with write access to it, not through any
    submit route — and delivered to the workers; its id. The workers must not trust it either."""
    import asyncio
    import json
    import time
    import uuid

    import psycopg

    from auger.fleet import queue as delivery
    from auger.store.postgres import PostgresStore, migrate

    task_id = uuid.uuid4().hex
    asyncio.run(migrate(url))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO tasks (id, submission_id, queue, state, spec, priority, attempts, max_attempts, "
                     "created) VALUES (%s, NULL, %s, 'queued', %s, 0, 0, 1, %s)",
                     (task_id, queue, json.dumps(spec), time.time()))

    async def deliver() -> None:
        store = PostgresStore(url)
        try:
            await delivery.enqueue(store, task_id, queue=queue)
        finally:
            await store.aclose()

    asyncio.run(deliver())
    return task_id


def task_rows(url: str) -> list[tuple[str, str, str | None, str | None]]:
    """(id, state, exit_reason, error) of every task."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT id, state, exit_reason, error FROM tasks ORDER BY created").fetchall()


def wait_final(url: str, count: int = 1, timeout: float = 40.0) -> list[tuple[str, str, str | None, str | None]]:
    """The tasks once `count` of them have reached a final state."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = task_rows(url)
        if len(found) >= count and all(row[1] in ("done", "failed", "cancelled") for row in found):
            return found
        time.sleep(0.1)
    raise AssertionError(f"the tasks did not end: {task_rows(url)}")


# -- what a fleet task costs the database (the benchmark and tests/test_fleet_cost.py) ----------------------
_OWN = "/* fleet-cost */"  # marks the measuring side's own queries, left out of the counts


@dataclass(frozen=True)
class DatabaseCounts:
    """What one database was sent so far: statements (all, and the queue library's), committed
    transactions, and the calls of each statement."""

    statements: int
    queue_statements: int
    transactions: int
    calls: dict[str, int]

    def __sub__(self, earlier: DatabaseCounts) -> DatabaseCounts:
        return DatabaseCounts(self.statements - earlier.statements,
                              self.queue_statements - earlier.queue_statements,
                              self.transactions - earlier.transactions,
                              {q: n - earlier.calls.get(q, 0) for q, n in self.calls.items()
                               if n > earlier.calls.get(q, 0)})


class CostMeter:
    """Counts what a database was sent, from pg_stat_statements and pg_stat_database (the server must load
    the extension: tests/support/postgres.py does), on one connection of its own whose queries are left
    out of the statements and subtracted from the transactions."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)
        self.conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        self.own = 0  # transactions this meter committed

    def close(self) -> None:
        self.conn.close()

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Rows of a query of the meter's own (not counted)."""
        self.own += 1
        return self.conn.execute(f"{_OWN} {sql}", params).fetchall()

    def counts(self) -> DatabaseCounts:
        xacts = self.query("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")[0][0]
        rows = self.query("SELECT regexp_replace(query, '\\s+', ' ', 'g'), calls FROM pg_stat_statements s "
                           "JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = current_database() "
                           "AND query NOT LIKE %s AND query NOT LIKE 'CREATE EXTENSION%%'", f"%{_OWN}%")
        calls: dict[str, int] = {}
        for query, n in rows:
            calls[query] = calls.get(query, 0) + int(n)
        return DatabaseCounts(sum(calls.values()), sum(n for q, n in calls.items() if "pgqueuer" in q),
                              int(xacts) - self.own, calls)

    def unfinished(self) -> int:
        """Tasks not yet done, failed or cancelled."""
        return int(self.query("SELECT COUNT(*) FROM tasks WHERE state IN ('queued', 'running')")[0][0])

    def consumers_started(self) -> int:
        """How many times a queue consumer asked for jobs: each worker does once its start is done (its
        checks of the queue's schema made, its listener up)."""
        return int(self.query("SELECT COALESCE(SUM(calls), 0) FROM pg_stat_statements s JOIN pg_database d "
                               "ON d.oid = s.dbid WHERE d.datname = current_database() "
                               "AND query LIKE '%%pgqueuer%%' AND query LIKE '%%SKIP LOCKED%%'")[0][0])


async def submit_tasks(url: str, repo: Path, count: int, *, rate: float = 0.0, prefix: str = "b") -> None:
    """Submit `count` tasks the way `auger serve` and the library do (fleet/submit.py), on one store."""
    import asyncio

    from auger.fleet.policy import TaskSpec
    from auger.fleet.submit import submit as submit_task
    from auger.store.postgres import PostgresStore

    store = PostgresStore(url)
    try:
        for n in range(count):
            await submit_task(store, TaskSpec(prompt=f"task {prefix}{n}", repo=str(repo), model="m", mode="auto"))
            if rate:
                await asyncio.sleep(1 / rate)
    finally:
        await store.aclose()
