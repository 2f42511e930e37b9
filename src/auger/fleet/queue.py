"""Task delivery: the one module that knows the queue library (pgqueuer), so it can be swapped.

Why pgqueuer: a job a worker picked carries a heartbeat the worker renews; its dequeue query itself
re-picks a job whose heartbeat is older than the timeout, so a worker killed mid-task (`kill -9`, a lost
machine) has its task delivered again to another worker with no reaper process. (procrastinate's worker
records heartbeats too, but leaves a dead worker's jobs in `doing` until something calls
`get_stalled_jobs` and retries them: a reaper to run and keep alive.) pgqueuer wakes idle workers with
LISTEN/NOTIFY and polls as a fallback, and takes jobs with `FOR UPDATE SKIP LOCKED`.

A delivery is at least once: the same task may arrive twice (a re-pick while the first worker still
runs, a lost acknowledgement). What a delivery means — run, drop as a duplicate, or nothing to do — is
decided by the tasks table and the task's lease (fleet/tasks.py), never here. A job carries only the
task id; the handler's return acknowledges it whatever the task's outcome.

The connection pgqueuer uses for LISTEN and its queries is its own; when it is lost (the backend killed,
the server restarted), `consume` builds a new one and carries on, while tasks already running finish on
their own connections.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Awaitable, Callable

if TYPE_CHECKING:
    from psycopg import AsyncConnection

    from auger.store.postgres import PostgresStore

log = logging.getLogger("auger.fleet")

ENTRYPOINT = "auger.task"  # one entrypoint per queue name: f"{ENTRYPOINT}.{queue}"
_INSTALL_LOCK = 0x61756766


def entrypoint(queue: str) -> str:
    return f"{ENTRYPOINT}.{queue}"


async def install(url: str) -> None:
    """Create the library's tables once (many workers may start together). A worker does this as it starts;
    a submitter only when its delivery finds no queue (`enqueue`), so a submission costs no inspection of the
    schema."""
    import psycopg
    from pgqueuer import Queries

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("SELECT pg_advisory_lock(%s)", (_INSTALL_LOCK,))
        try:
            queries = Queries.from_psycopg_connection(conn)
            if not await queries.schema_is_installed():
                await queries.install()
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (_INSTALL_LOCK,))


async def enqueue(store: PostgresStore, task_id: str, *, queue: str = "default", priority: int = 0,
                  delay_s: float | None = None) -> None:
    """Deliver `task_id` to a worker of `queue` (after `delay_s`); the insert wakes idle workers. One statement
    on the store's connections; a database with no queue yet gets one first. Made twice (a lost answer,
    retried), it is a duplicate delivery, which the worker drops."""
    import psycopg
    from pgqueuer import Queries

    async def insert(conn: AsyncConnection) -> bool:
        try:
            await Queries.from_psycopg_connection(conn).enqueue(
                entrypoint(queue), task_id.encode(), priority=priority,
                execute_after=timedelta(seconds=delay_s) if delay_s else None)
        except (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedObject):
            return False
        return True

    if not await store.autocommit(insert, repeatable=True):
        await install(store.url)
        await store.autocommit(insert, repeatable=True)


async def waiting(store: PostgresStore, task_id: str) -> bool:
    """Whether a job for `task_id` is in the queue (waiting, or taken by a worker)."""
    import psycopg

    async def find(conn: AsyncConnection) -> bool:
        try:
            row = await (await conn.execute("SELECT 1 FROM pgqueuer WHERE payload = %s LIMIT 1",
                                            (task_id.encode(),))).fetchone()
        except psycopg.errors.UndefinedTable:  # no queue yet: nothing waits in it
            return False
        return row is not None

    return await store.autocommit(find, "read", repeatable=True)


async def depth(url: str) -> int:
    """Jobs waiting in every queue (not yet picked)."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        row = await (await conn.execute("SELECT COUNT(*) FROM pgqueuer WHERE status = 'queued'")).fetchone()
        return int(row[0]) if row else 0


class Consumer:
    """Takes jobs of one queue and hands each task id to `handler`, at most `concurrency` at once.

    `stop()` takes no new job; running handlers finish (the worker decides how fast they must)."""

    def __init__(self, url: str, handler: Callable[[str], Awaitable[None]], *, queue: str = "default",
                 concurrency: int = 1, heartbeat_timeout_s: float = 30.0, poll_s: float = 5.0) -> None:
        self.url = url
        self.handler = handler
        self.queue = queue
        self.concurrency = concurrency
        self.heartbeat_timeout_s = heartbeat_timeout_s
        self.poll_s = poll_s
        self._stopping = asyncio.Event()
        self._manager: object | None = None
        self.reconnects = 0

    def stop(self) -> None:
        self._stopping.set()
        manager = self._manager
        if manager is not None:
            manager.shutdown.set()  # type: ignore[attr-defined]

    async def run(self) -> None:
        """Consume until stopped; a lost connection is replaced (with backoff) and consuming goes on."""
        import psycopg

        delay = 0.2
        while not self._stopping.is_set():
            try:
                await self._consume_once()
                delay = 0.2
            except (psycopg.Error, OSError) as exc:
                log.warning("queue connection lost (%s); reconnecting", " ".join(str(exc).split()))
            except Exception as exc:  # the library's own errors (a failed listener health check …)
                log.warning("queue consumer stopped (%s: %s); restarting", type(exc).__name__, exc)
            if self._stopping.is_set():
                return
            self.reconnects += 1
            try:
                await asyncio.wait_for(self._stopping.wait(), delay)
            except TimeoutError:
                pass
            delay = min(delay * 2, 5.0)

    async def _consume_once(self) -> None:
        import psycopg
        from pgqueuer import QueueManager
        from pgqueuer.models import Job
        from pgqueuer.queries import Queries

        handler = self.handler

        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            manager = QueueManager(Queries.from_psycopg_connection(conn))

            @manager.entrypoint(entrypoint(self.queue))
            async def run_task(job: Job) -> None:
                await handler((job.payload or b"").decode())

            self._manager = manager
            if self._stopping.is_set():
                return
            batch = max(1, self.concurrency // 2)
            await manager.run(dequeue_timeout=timedelta(seconds=self.poll_s), batch_size=batch,
                              max_concurrent_tasks=max(self.concurrency, 2 * batch),
                              heartbeat_timeout=timedelta(seconds=self.heartbeat_timeout_s),
                              shutdown_on_listener_failure=True, log_aggregation_interval=timedelta(0))
            self._manager = None
