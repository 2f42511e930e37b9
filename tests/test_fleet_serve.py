"""`auger serve` on the fleet's PostgreSQL database: it lists and streams a session a worker runs (on
another machine as far as the server knows: the checkout is beyond its roots), relays an approval to
it through the database, and reports the fleet's numbers."""

from __future__ import annotations

import asyncio
import time

import psycopg

from tests.support.fleet import make_repo, start_worker, submit, task_model
from tests.support.serve import served


def task_row(url: str) -> tuple:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT id, state, session_id FROM tasks").fetchone()


async def wait_for(predicate, timeout: float = 30.0, what: str = "the condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await predicate()
        if value:
            return value
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_serve_streams_a_workers_session_and_relays_an_approval_to_it(tmp_path, postgres_url):
    home = tmp_path / "home"
    home.mkdir()
    project = tmp_path / "elsewhere"  # the server's root: the worker's checkout is not below it
    project.mkdir()
    repo = make_repo(tmp_path / "repo")
    with task_model() as model:
        submit(home, postgres_url, model, repo, "task asks", "--mode", "safe", "--approval-timeout", "60")
        worker = start_worker(home, postgres_url, model, log=tmp_path / "worker.log")
        try:
            result = asyncio.run(_serve_and_approve(project, model, postgres_url))
        finally:
            worker.kill()
            worker.wait(10)
    listed, waiting, relayed, seen, fleet, missing = result
    assert listed
    assert waiting["kind"] == "tool" and "asks.txt" in waiting["message"]
    assert relayed.status_code == 202 and relayed.json().get("relayed") is True
    assert "approval_resolved" in seen and seen.index("approval_resolved") < seen.index("turn_ended")
    assert task_row(postgres_url)[1] == "done"
    assert fleet["stats"]["done"] == 1 and fleet["tasks"][0]["state"] == "done"
    assert missing.status_code == 404


async def _serve_and_approve(project, model, url):
    async with served(project, model, url) as srv:
        async def session_id():
            row = task_row(url)
            return row[2] if row and row[2] else None

        sid = await wait_for(session_id, what="the worker to start the task's session")

        async def approval_waiting():
            snapshot = (await srv.client.get(f"/api/sessions/{sid}")).json()
            waiting = snapshot.get("state", {}).get("pending_approvals", [])
            return waiting[0] if waiting else None

        waiting = await wait_for(approval_waiting, what="the approval request")
        listed = [s for s in (await srv.client.get("/api/sessions")).json()["sessions"] if s["id"] == sid]
        seen: list[str] = []
        async with srv.events(sid) as stream:
            relayed = None
            async for event in stream:
                kind = event.get("data", {}).get("type") if "data" in event else None
                if kind is None:
                    continue
                seen.append(kind)
                if kind == "approval_request" and relayed is None:
                    relayed = await srv.client.post(f"/api/sessions/{sid}/ops", json={
                        "submission_id": "approve-1",
                        "op": {"type": "approval_decision", "request_id": waiting["request_id"],
                               "decision": "approve"}})
                if kind == "turn_ended":
                    break

        async def finished():
            return task_row(url)[1] == "done"

        await wait_for(finished, what="the task to be recorded done")
        fleet = (await srv.client.get("/api/fleet")).json()
    async with served(project, model, project / "s.db") as plain:
        missing = await plain.client.get("/api/fleet")
    return listed, waiting, relayed, seen, fleet, missing


def test_an_approval_left_unanswered_is_denied_at_the_tasks_timeout(tmp_path, postgres_url):
    home = tmp_path / "home"
    home.mkdir()
    repo = make_repo(tmp_path / "repo")
    with task_model() as model:
        submit(home, postgres_url, model, repo, "task ignored", "--mode", "safe", "--approval-timeout", "1")
        worker = start_worker(home, postgres_url, model, log=tmp_path / "worker.log")
        try:
            deadline = time.monotonic() + 40
            while task_row(postgres_url)[1] != "done" and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            worker.kill()
            worker.wait(10)
    task_id, state, session_id = task_row(postgres_url)
    assert state == "done"
    with psycopg.connect(postgres_url) as conn:
        resolved = conn.execute("SELECT data FROM events WHERE session_id = %s AND type = 'approval_resolved'",
                                (session_id,)).fetchall()
        diff = conn.execute("SELECT diff FROM task_results").fetchone()[0].decode()
    assert resolved and '"deny"' in resolved[0][0] and '"timeout"' in resolved[0][0]
    assert "ignored.txt" not in diff  # denied: nothing written


