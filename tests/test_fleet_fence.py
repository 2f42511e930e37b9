"""A task's writes are fenced on its lease, each in the one statement that makes it: once another store
has taken the lease over (the first holder paused past the timeout), the first holder's attach, park,
release and finish change nothing and say so, while the new holder's finish records the one result."""

from __future__ import annotations

import asyncio

import psycopg

from auger.fleet.policy import TaskSpec
from auger.fleet.tasks import TaskResult, Tasks, lease_key
from auger.protocol.events import Usage
from auger.store.postgres import PostgresStore


def result(session_id: str) -> TaskResult:
    return TaskResult(session_id, f"done in {session_id}", "", [], Usage(3, 0, 2, 0), None, "complete")


def test_a_holder_whose_lease_was_taken_over_writes_nothing_and_the_new_holder_finishes_once(postgres_url, tmp_path):
    async def main():
        first = PostgresStore(postgres_url, lease_timeout_s=1.0, heartbeat_s=0.2)
        second = PostgresStore(postgres_url, lease_timeout_s=1.0, heartbeat_s=0.2)
        try:
            record, _ = await Tasks(first).submit(TaskSpec(prompt="task f", repo=str(tmp_path)))
            key = lease_key(record.id)
            assert await first.claim(key) is None
            old = first.generation(key)
            verdict, _, _ = await Tasks(first).begin_attempt(record.id, old)
            assert verdict == "run"
            first._renewer.cancel()  # paused: no more heartbeats
            await asyncio.sleep(1.3)
            assert await second.claim(key) is None
            new = second.generation(key)
            assert new == old + 1
            stale = Tasks(first)
            refused = [await stale.attach_session(record.id, "old-session", old),
                       await stale.park(record.id, old, {"request": {}}, "a diff"),
                       await stale.release(record.id, old),
                       await stale.finish(record.id, old, "done", result("old-session"))]
            untouched = await Tasks(second).get(record.id)
            taken = await Tasks(second).finish(record.id, new, "done", result("new-session"))
            return refused, untouched, taken
        finally:
            await first.aclose()
            await second.aclose()

    refused, untouched, taken = asyncio.run(main())
    assert refused == [False, False, False, False]
    assert (untouched.state, untouched.session_id, untouched.attempts) == ("running", None, 1)
    assert taken is True
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT state FROM tasks").fetchall() == [("done",)]
        assert conn.execute("SELECT session_id, final_message FROM task_results").fetchall() == [
            ("new-session", b"done in new-session")]
