"""`auger serve` on the fleet's PostgreSQL database: it lists and streams a session a worker runs (on
another machine as far as the server knows: the checkout is beyond its roots), relays an approval to
it through the database, reports the fleet's numbers, and cancels and retries tasks."""

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


def test_a_task_is_cancelled_and_retried_through_the_api_and_a_hostile_id_is_refused(tmp_path, postgres_url,
                                                                                   server):
    project = tmp_path / "project"
    project.mkdir()
    result = asyncio.run(_cancel_and_retry(project, server, postgres_url))
    (cancelled, again_cancel, retry_queued, retried, fleet, bad_ids, unknown, unknown_field, unknown_query,
     depths, plain) = result
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    assert again_cancel.status_code == 409 and "cancelled" in again_cancel.json()["error"]
    assert retry_queued.status_code == 409 and "queued" in retry_queued.json()["error"]
    assert retried.status_code == 200 and retried.json()["state"] == "queued" and retried.json()["retried"] == 1
    assert depths == (2, 3)  # the retried task is delivered again, as `auger tasks retry` does
    assert fleet["stats"]["queued"] == 2 and fleet["stats"]["cancelled"] == 0 and fleet["stats"]["retried"] == 1
    assert all("cost" in t for t in fleet["tasks"])
    assert {code for code, _ in bad_ids} == {400}, bad_ids
    assert unknown == 404
    assert unknown_field == 400 and unknown_query == 400
    assert plain == 404  # a SQLite store has no fleet
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        states = [state for (state,) in conn.execute("SELECT state FROM tasks").fetchall()]
    assert states == ["queued", "queued"]  # nothing a refused request named was touched


async def _cancel_and_retry(project, model, url):
    from auger.fleet import queue
    from auger.fleet.submit import submit as submit_task
    from auger.fleet.policy import TaskSpec
    from tests.support.serve import in_process

    async with in_process(project, model, url) as (client, server):
        store = server.hub.store
        first, _ = await submit_task(store, TaskSpec(prompt="task first", repo=str(project)))
        second, _ = await submit_task(store, TaskSpec(prompt="task second", repo=str(project)))
        before = await queue.depth(url)
        cancelled = await client.post(f"/api/fleet/tasks/{first.id}/cancel", json={})
        again_cancel = await client.post(f"/api/fleet/tasks/{first.id}/cancel")
        retry_queued = await client.post(f"/api/fleet/tasks/{second.id}/retry", json={})
        retried = await client.post(f"/api/fleet/tasks/{first.id}/retry", json={})
        after = await queue.depth(url)
        fleet = (await client.get("/api/fleet")).json()
        bad_ids = []
        for hostile in (first.id.upper(), first.id[:8], first.id + "0", f"{first.id[:31]}%27",
                        "%27%20OR%20%271%27%3D%271", "%00" * 32, "x" * 32):
            response = await client.post(f"/api/fleet/tasks/{hostile}/cancel", json={})
            bad_ids.append((response.status_code, hostile))
        unknown = (await client.post(f"/api/fleet/tasks/{'0' * 32}/cancel", json={})).status_code
        unknown_field = (await client.post(f"/api/fleet/tasks/{second.id}/cancel", json={"force": True})).status_code
        unknown_query = (await client.post(f"/api/fleet/tasks/{second.id}/cancel?force=1", json={})).status_code
    async with in_process(project, model, project / "s.db") as (plain, _):
        plain_code = (await plain.post(f"/api/fleet/tasks/{first.id}/cancel", json={})).status_code
    return (cancelled, again_cancel, retry_queued, retried, fleet, bad_ids, unknown, unknown_field, unknown_query,
            (before, after), plain_code)
