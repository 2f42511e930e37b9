"""A task waiting for a person does not hold a worker. Past its approval timeout a tool approval parks
the task: its delivery ends, its slot frees (another task runs on the same one-slot worker), it is
`waiting` with the request; an answer queues it again, and another worker — on another machine as far as
anyone can tell — resumes the session on the same tree and applies the answer: the call runs once."""

from __future__ import annotations

import asyncio
import json
import time

import psycopg

from tests.support.fleet import make_repo, start_worker, submit, task_model, task_rows


def rows(url, sql, *params):
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


def wait_for(predicate, timeout=40.0, what="the condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def answer(url, task_id, request_id, decision, by):
    from auger.fleet.submit import answer as answer_task
    from auger.store.postgres import PostgresStore

    async def main():
        store = PostgresStore(url)
        try:
            return await answer_task(store, task_id, request_id, decision, None, by)
        finally:
            await store.aclose()

    return asyncio.run(main())


def test_a_parked_task_frees_its_worker_and_another_worker_finishes_it_once(tmp_path, postgres_url):
    from auger.fleet.tasks import AnswerRefused

    home = tmp_path / "home"
    home.mkdir()
    repo = make_repo(tmp_path / "repo")
    with task_model() as model:
        submit(home, postgres_url, model, repo, "task parked", "--mode", "safe", "--approval-timeout", "1")
        first = start_worker(home, postgres_url, model, "--mode", "auto", log=tmp_path / "a.log")
        try:
            wait_for(lambda: [r for r in task_rows(postgres_url) if r[1] == "waiting"], what="the task to park")
            # the slot is free: a task submitted now runs on the same one-slot worker while the first waits
            submit(home, postgres_url, model, repo, "task meanwhile", "--mode", "auto")
            wait_for(lambda: [r for r in task_rows(postgres_url) if r[1] == "done"], what="the second task")
            first_holder = rows(postgres_url, "SELECT worker FROM tasks WHERE state = 'done'")[0][0]
        finally:
            first.kill()
            first.wait(10)
        (task_id, parked, worker), = rows(postgres_url, "SELECT id, parked, worker FROM tasks WHERE state = 'waiting'")
        request = json.loads(bytes(parked))["request"]
        assert worker is None and request["type"] == "approval_request" and "parked.txt" in request["message"]
        refused = []
        for bad in (("nope", "approve"), (request["request_id"], "approve_always")):
            try:
                answer(postgres_url, task_id, *bad, "mallory")
            except AnswerRefused as exc:
                refused.append(exc.status)
        answered = answer(postgres_url, task_id, request["request_id"], "approve", "alice")
        try:
            answer(postgres_url, task_id, request["request_id"], "deny", "bob")
        except AnswerRefused as exc:
            late = (exc.status, str(exc))
        second = start_worker(home, postgres_url, model, "--mode", "auto", log=tmp_path / "b.log")
        try:
            wait_for(lambda: all(r[1] == "done" for r in task_rows(postgres_url)), what="the parked task to finish")
        finally:
            second.kill()
            second.wait(10)
    assert refused == [409, 400]
    assert answered.state == "queued" and late[0] == 409 and "already answered by alice" in late[1]
    (holder, diff, session_id), = rows(postgres_url, "SELECT t.worker, r.diff, t.session_id FROM tasks t "
                                                     "JOIN task_results r ON r.task_id = t.id WHERE t.id = %s", task_id)
    assert holder != first_holder  # finished by the other worker
    assert "parked.txt" in bytes(diff).decode()
    resolved = [json.loads(d) for (d,) in rows(postgres_url, "SELECT data FROM events WHERE session_id = %s AND "
                                                             "type = 'approval_resolved'", session_id)]
    assert [(r["request_id"], r["decision"], r["by"]) for r in resolved] == [(request["request_id"], "approve",
                                                                             "alice")]
    calls = rows(postgres_url, "SELECT COUNT(*) FROM items WHERE session_id = %s AND type = 'tool_call'", session_id)
    outputs = rows(postgres_url, "SELECT data FROM items WHERE session_id = %s AND type = 'tool_output'", session_id)
    assert calls == [(1,)] and len(outputs) == 1 and "interrupted" not in outputs[0][0]  # it ran once
