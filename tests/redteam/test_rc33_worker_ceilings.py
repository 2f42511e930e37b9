"""`auger worker --mode` is a ceiling and `--allow-repo` a list: the operator's decisions, not the
submitter's. A task asking for `auto` once ran on a worker its operator started in `plan`, a task could
have a worker check out any repository the worker's machine can read, and an op left in the database for
a task's session (a mode switch) was applied as if a person had sent it. Judged by effect: a write made
above the ceiling, a model request about a repository the worker may not take, a file written unasked."""

from __future__ import annotations

import json
import time

import psycopg

from tests.support.fleet import make_repo, start_worker, submit, task_model, task_rows, wait_final


def test_a_task_asking_for_more_than_the_worker_allows_is_refused_or_capped(tmp_path, postgres_url):
    home = tmp_path / "home"
    home.mkdir()
    repo = make_repo(tmp_path / "repo")
    with task_model() as model:
        submit(home, postgres_url, model, repo, "task above", "--mode", "auto")
        worker = start_worker(home, postgres_url, model, "--mode", "plan")
        try:
            refused = wait_final(postgres_url)
        finally:
            worker.kill()
            worker.wait(10)
        assert model.chat_requests == []
        # capped, when the operator says so: it runs in plan, where the write is refused
        submit(home, postgres_url, model, repo, "task capped", "--mode", "auto")
        worker = start_worker(home, postgres_url, model, "--mode", "plan", "--cap-mode")
        try:
            rows = wait_final(postgres_url, 2)
        finally:
            worker.kill()
            worker.wait(10)
        outputs = [m["content"] for m in model.chat_requests[-1].body["messages"] if m["role"] == "tool"]
    assert refused[0][1:3] == ("failed", "refused")
    assert "mode 'auto' is more permissive than this worker allows ('plan'" in refused[0][3]
    assert rows[1][1] == "done"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        diff, = conn.execute("SELECT diff FROM task_results").fetchone()
    assert bytes(diff) == b"" and "plan mode" in outputs[0], outputs


def test_a_worker_checks_out_only_what_its_operator_allows(tmp_path, postgres_url):
    home = tmp_path / "home"
    home.mkdir()
    allowed = make_repo(tmp_path / "allowed" / "app")
    private = make_repo(tmp_path / "private" / "keys")
    with task_model() as model:
        submit(home, postgres_url, model, private, "task steal")
        submit(home, postgres_url, model, allowed, "task fine")
        worker = start_worker(home, postgres_url, model, allow_repo=f"{tmp_path}/allowed/*")
        try:
            rows = wait_final(postgres_url, 2)
        finally:
            worker.kill()
            worker.wait(10)
        prompts = [m["content"] for r in model.chat_requests for m in r.body["messages"] if m["role"] == "user"]
        # by default (no --allow-repo) no local path at all
        submit(home, postgres_url, model, allowed, "task local")
        worker = start_worker(home, postgres_url, model, allow_repo="")
        try:
            more = wait_final(postgres_url, 3)
        finally:
            worker.kill()
            worker.wait(10)
    assert rows[0][1:3] == ("failed", "refused") and "not one this worker may check out" in rows[0][3]
    assert rows[1][1] == "done"
    assert not any("task steal" in str(p) for p in prompts)
    assert more[2][1:3] == ("failed", "refused") and "--allow-repo" in more[2][3]


def test_a_mode_switch_left_in_the_database_is_not_applied(tmp_path, postgres_url):
    home = tmp_path / "home"
    home.mkdir()
    repo = make_repo(tmp_path / "repo")
    with task_model() as model:
        submit(home, postgres_url, model, repo, "task asks", "--mode", "safe", "--approval-timeout", "60")
        worker = start_worker(home, postgres_url, model, "--mode", "safe")
        try:
            session_id = _wait_session(postgres_url)
            with psycopg.connect(postgres_url, autocommit=True) as conn:  # as if relayed by a server
                conn.execute("INSERT INTO session_ops (session_id, op, created) VALUES (%s, %s, %s)",
                             (session_id, json.dumps({"type": "set_mode", "mode": "auto"}).encode(), time.time()))
            time.sleep(2)
            modes = _events(postgres_url, session_id, "mode_changed")
        finally:
            worker.kill()
            worker.wait(10)
    assert modes == []
    assert task_rows(postgres_url)[0][1] != "done"  # still waiting for a person: nothing was written unasked


def _wait_session(url: str) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute("SELECT session_id FROM tasks WHERE session_id IS NOT NULL").fetchone()
            asked = row and conn.execute("SELECT 1 FROM events WHERE session_id = %s AND type = 'approval_request'",
                                         (row[0],)).fetchone()
        if asked:
            return row[0]
        time.sleep(0.1)
    raise AssertionError("the task never asked")


def _events(url: str, session_id: str, kind: str) -> list[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        return [r[0] for r in conn.execute("SELECT data FROM events WHERE session_id = %s AND type = %s",
                                           (session_id, kind))]
