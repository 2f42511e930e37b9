"""The fleet on a real PostgreSQL server: real `auger worker` and `auger submit` processes, a loopback
model, real git checkouts. Each task completes exactly once — across worker crashes, pauses, lost
connections and a database restart — and leaves one result."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psycopg
import pytest

from tests.support.fleet import fleet_env, make_repo, start_worker, submit, task_model

LEASE = 2.0  # seconds: a worker silent this long loses its tasks


def rows(url: str, sql: str, *params) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


def wait_for(predicate, timeout: float = 40.0, what: str = "the condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def states(url: str) -> dict[str, str]:
    return dict(rows(url, "SELECT id, state FROM tasks"))


def all_final(url: str, count: int) -> bool:
    found = states(url)
    return len(found) == count and all(s in ("done", "failed", "cancelled") for s in found.values())


def stop(*workers: subprocess.Popen) -> None:
    for worker in workers:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(10)


@pytest.fixture
def fleet(tmp_path, postgres_url):
    home = tmp_path / "home"
    home.mkdir()
    return home, postgres_url, make_repo(tmp_path / "repo")


def test_three_workers_complete_twenty_tasks_each_exactly_once(fleet, tmp_path):
    home, url, repo = fleet
    with task_model(delay=0.05) as model:
        ids = [submit(home, url, model, repo, f"task t{n}").stdout.strip() for n in range(20)]
        workers = [start_worker(home, url, model, "--concurrency", "2", log=tmp_path / f"w{n}.log")
                   for n in range(3)]
        try:
            wait_for(lambda: all_final(url, 20), 90, "20 tasks to finish")
        finally:
            stop(*workers)
    assert set(states(url).values()) == {"done"}
    results = rows(url, "SELECT t.id, t.attempts, r.final_message, r.diff, r.session_id FROM tasks t "
                        "JOIN task_results r ON r.task_id = t.id")
    assert sorted(r[0] for r in results) == sorted(ids)  # one result row each
    by_prompt = {r[2].decode(): r for r in results}
    for n in range(20):
        _, attempts, _, diff, session_id = by_prompt[f"done t{n}"]
        assert attempts == 1
        assert f"+++ b/t{n}.txt" in diff.decode() and f"written by task t{n}" in diff.decode()
        turns = rows(url, "SELECT COUNT(*) FROM events WHERE session_id = %s AND type = 'turn_ended'", session_id)
        assert turns == [(1,)]  # the session ran once
    workers_used = {r[0] for r in rows(url, "SELECT DISTINCT worker FROM tasks")}
    assert len(workers_used) >= 2, "one worker took everything: the test proves nothing about sharing"
    checkouts = home / "worker" / "checkouts"
    assert not checkouts.exists() or not any(checkouts.iterdir())  # every checkout removed


def test_a_repeated_submission_id_makes_one_task(fleet):
    home, url, repo = fleet
    with task_model() as model:
        first = submit(home, url, model, repo, "task once", "--submission-id", "client-42")
        again = submit(home, url, model, repo, "task once", "--submission-id", "client-42", "--json")
    assert json.loads(again.stdout)["id"] == first.stdout.strip()
    assert rows(url, "SELECT COUNT(*) FROM tasks") == [(1,)]
    assert rows(url, "SELECT COUNT(*) FROM pgqueuer") == [(1,)]  # delivered once too


def test_a_task_recorded_but_never_delivered_is_delivered_by_its_repeated_submission(fleet, tmp_path):
    """The submitter died between recording the task and queueing it: submitting again with the same
    submission id queues it (once), and a worker runs it."""
    home, url, repo = fleet
    with task_model() as model:
        first = submit(home, url, model, repo, "task lost", "--submission-id", "client-7").stdout.strip()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DELETE FROM pgqueuer")  # as if the job had never been queued
        again = submit(home, url, model, repo, "task lost", "--submission-id", "client-7").stdout.strip()
        submit(home, url, model, repo, "task lost", "--submission-id", "client-7")
        assert again == first and rows(url, "SELECT COUNT(*) FROM pgqueuer") == [(1,)]
        worker = start_worker(home, url, model, log=tmp_path / "w.log")
        try:
            wait_for(lambda: all_final(url, 1), 60, "the task to finish")
        finally:
            stop(worker)
    assert states(url) == {first: "done"}


def test_a_worker_killed_mid_turn_loses_its_task_to_another_which_completes_it(fleet, tmp_path):
    home, url, repo = fleet
    with task_model(delay=1.5) as model:
        task_id = submit(home, url, model, repo, "task slow").stdout.strip()
        doomed = start_worker(home, url, model, lease_timeout=LEASE, log=tmp_path / "doomed.log")
        try:
            wait_for(lambda: model.chat_requests, what="the first worker's model call")
            first_session = rows(url, "SELECT session_id FROM tasks WHERE id = %s", task_id)[0][0]
            os.killpg(doomed.pid, signal.SIGKILL)
            doomed.wait(10)
            rescuer = start_worker(home, url, model, lease_timeout=LEASE, log=tmp_path / "rescuer.log")
            try:
                wait_for(lambda: all_final(url, 1), 60, "the task to finish")
            finally:
                stop(rescuer)
        finally:
            stop(doomed)
    (state, attempts, retried, session_id), = rows(url, "SELECT state, attempts, retried, session_id FROM tasks")
    assert (state, attempts, retried) == ("done", 2, 1)
    assert session_id != first_session
    assert rows(url, "SELECT session_id FROM task_results") == [(session_id,)]  # one result, the retry's
    assert rows(url, "SELECT parent_id, agent FROM session_links WHERE child_id = %s", session_id) == [
        (first_session, b"retry")]
    aborted = rows(url, "SELECT data FROM items WHERE session_id = %s AND type = 'turn_aborted'", first_session)
    assert aborted and "retried in session" in aborted[0][0]
    files = rows(url, "SELECT diff FROM task_results")[0][0].decode()
    assert files.count("+++ b/slow.txt") == 1  # from a fresh checkout of the base


def test_a_paused_worker_resumed_after_the_timeout_cannot_write_a_result(fleet, tmp_path):
    home, url, repo = fleet
    with task_model(delay=1.0) as model:
        task_id = submit(home, url, model, repo, "task paused").stdout.strip()
        paused = start_worker(home, url, model, lease_timeout=LEASE, log=tmp_path / "paused.log")
        other = None
        try:
            wait_for(lambda: model.chat_requests, what="the first worker's model call")
            first_session = rows(url, "SELECT session_id FROM tasks WHERE id = %s", task_id)[0][0]
            os.killpg(paused.pid, signal.SIGSTOP)
            other = start_worker(home, url, model, lease_timeout=LEASE, log=tmp_path / "other.log")
            wait_for(lambda: all_final(url, 1), 60, "the other worker to finish the task")
            os.killpg(paused.pid, signal.SIGCONT)
            log = tmp_path / "paused.log"
            wait_for(lambda: "result is dropped" in log.read_text(), 30, "the paused worker to try to write")
        finally:
            if paused.poll() is None:
                os.killpg(paused.pid, signal.SIGCONT)
            stop(paused, *([other] if other else []))
    results = rows(url, "SELECT session_id FROM task_results")
    assert len(results) == 1 and results[0][0] != first_session  # the paused attempt wrote nothing
    assert rows(url, "SELECT state, attempts FROM tasks") == [("done", 2)]


def test_tasks_are_still_picked_up_after_the_listening_connection_is_killed(fleet, tmp_path):
    home, url, repo = fleet
    with task_model() as model:
        worker = start_worker(home, url, model, log=tmp_path / "w.log")
        try:
            submit(home, url, model, repo, "task before")
            wait_for(lambda: all_final(url, 1), 40, "the first task")
            listening = rows(url, "SELECT pid FROM pg_stat_activity WHERE query ILIKE 'LISTEN%%' "
                                  "AND datname = current_database()")
            assert listening, "no listening connection to kill"
            for (pid,) in listening:
                rows(url, "SELECT pg_terminate_backend(%s)", pid)
            submit(home, url, model, repo, "task after")
            wait_for(lambda: all_final(url, 2), 40, "a task submitted after the kill")
        finally:
            stop(worker)
    assert set(states(url).values()) == {"done"}


def test_workers_reconnect_and_finish_after_a_database_restart(fleet, tmp_path, postgres_server):
    home, url, repo = fleet
    with task_model(delay=0.5) as model:
        for n in range(4):
            submit(home, url, model, repo, f"task r{n}")
        worker = start_worker(home, url, model, "--concurrency", "2", log=tmp_path / "w.log")
        try:
            wait_for(lambda: model.chat_requests, what="a task to start")
            postgres_server.restart()
            wait_for(lambda: all_final(url, 4), 60, "the tasks to finish after the restart")
        finally:
            stop(worker)
    assert set(states(url).values()) == {"done"}
    assert rows(url, "SELECT COUNT(*) FROM task_results") == [(4,)]


def test_cancel_interrupts_a_running_task_within_seconds(fleet, tmp_path):
    home, url, repo = fleet
    with task_model(delay=3.0) as model:
        task_id = submit(home, url, model, repo, "task cancelled").stdout.strip()
        worker = start_worker(home, url, model, log=tmp_path / "w.log")
        try:
            wait_for(lambda: model.chat_requests, what="the task to start")
            env = fleet_env(home, url, model.base_url)
            done = subprocess.run([sys.executable, "-m", "auger", "tasks", "cancel", task_id[:8]], env=env,
                                  capture_output=True, text=True, timeout=30)
            assert done.returncode == 0, done.stderr
            asked = time.monotonic()
            wait_for(lambda: all_final(url, 1), 20, "the cancel")
            assert time.monotonic() - asked < 5
            show = subprocess.run([sys.executable, "-m", "auger", "tasks", "show", "--json", task_id], env=env,
                                  capture_output=True, text=True, timeout=30)
        finally:
            stop(worker)
    record = json.loads(show.stdout)
    assert record["state"] == "cancelled" and record["result"]["exit_reason"] == "cancelled"


def test_sigterm_records_the_session_and_gives_the_task_to_another_worker(fleet, tmp_path):
    home, url, repo = fleet
    with task_model(delay=2.0) as model:
        task_id = submit(home, url, model, repo, "task handed").stdout.strip()
        leaving = start_worker(home, url, model, "--drain", "0.2", log=tmp_path / "leaving.log")
        try:
            wait_for(lambda: model.chat_requests, what="the task to start")
            first_session = rows(url, "SELECT session_id FROM tasks WHERE id = %s", task_id)[0][0]
            os.killpg(leaving.pid, signal.SIGTERM)
            assert leaving.wait(30) == 0
            assert rows(url, "SELECT state FROM tasks") == [("queued",)]
            aborted = rows(url, "SELECT data FROM items WHERE session_id = %s AND type = 'turn_aborted'",
                           first_session)
            assert aborted and "terminated by SIGTERM" in aborted[0][0]
            taker = start_worker(home, url, model, log=tmp_path / "taker.log")
            try:
                wait_for(lambda: all_final(url, 1), 40, "another worker to finish it")
            finally:
                stop(taker)
        finally:
            stop(leaving)
    assert rows(url, "SELECT state FROM tasks") == [("done",)]
    assert rows(url, "SELECT COUNT(*) FROM task_results") == [(1,)]


def test_the_queue_needs_postgres_and_says_so(tmp_path, auger_home):
    from tests.support.harness import auger_cli

    done = auger_cli("submit", "--db", str(tmp_path / "s.db"), "task x", home=auger_home, cwd=tmp_path)
    assert done.returncode != 0
    assert "the task queue needs PostgreSQL" in done.stderr and "Traceback" not in done.stderr


def test_a_task_whose_base_cannot_be_checked_out_fails_and_can_be_retried(fleet, tmp_path):
    home, url, repo = fleet
    with task_model() as model:
        env = fleet_env(home, url, model.base_url)
        task_id = submit(home, url, model, repo, "task nowhere", "--ref", "no-such-branch").stdout.strip()
        worker = start_worker(home, url, model, log=tmp_path / "w.log")
        try:
            wait_for(lambda: all_final(url, 1), 30, "the task to fail")
            show = subprocess.run([sys.executable, "-m", "auger", "tasks", "show", task_id], env=env,
                                  capture_output=True, text=True, timeout=30)
            retried = subprocess.run([sys.executable, "-m", "auger", "tasks", "retry", task_id[:10]], env=env,
                                     capture_output=True, text=True, timeout=30)
            wait_for(lambda: rows(url, "SELECT retried FROM tasks WHERE state = 'failed'") == [(1,)], 30,
                     "the retry to fail again")
            listed = subprocess.run([sys.executable, "-m", "auger", "tasks", "list", "--json"], env=env,
                                    capture_output=True, text=True, timeout=30)
            stats = subprocess.run([sys.executable, "-m", "auger", "tasks", "stats", "--json"], env=env,
                                   capture_output=True, text=True, timeout=30)
        finally:
            stop(worker)
    assert "state     failed" in show.stdout and "no-such-branch" in show.stdout
    assert retried.returncode == 0 and retried.stdout.strip() == f"{task_id} queued"
    assert [t["id"] for t in json.loads(listed.stdout)] == [task_id]
    assert json.loads(stats.stdout)["failed"] == 1 and json.loads(stats.stdout)["retried"] == 1


def test_the_workers_health_port_answers_while_it_runs_a_task_and_imports_no_web_framework(fleet, tmp_path):
    import socket

    import httpx

    from auger._version import __version__

    home, url, repo = fleet
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    def asked(path: str = "/health", method: str = "GET") -> tuple[int, dict] | None:
        try:
            answer = httpx.request(method, f"http://127.0.0.1:{port}{path}", timeout=10)
        except httpx.TransportError:
            return None
        return answer.status_code, answer.json()

    with task_model(delay=2.0) as model:
        worker = start_worker(home, url, model, "--health-port", str(port), log=tmp_path / "w.log")
        try:
            idle = wait_for(asked, 30, "the health port")
            submit(home, url, model, repo, "task watched")
            wait_for(lambda: model.chat_requests, what="the task to start")
            busy = asked()
            elsewhere, posted = asked("/api/sessions"), asked(method="POST")
            wait_for(lambda: all_final(url, 1), 40, "the task to end")
            after = asked()
            loaded = subprocess.run([sys.executable, "-c", "import sys, auger.frontends.fleet_cli, auger.fleet.worker; "
                                     "print(sorted({m.split('.')[0] for m in sys.modules} & {'starlette', 'uvicorn'}))"],
                                    capture_output=True, text=True, timeout=60)
        finally:
            stop(worker)
    ok = {"status": "ok", "version": __version__, "store": "ok"}
    assert idle == (200, {**ok, "running": 0})
    assert busy == (200, {**ok, "running": 1})
    assert after == (200, {**ok, "running": 0})
    assert elsewhere is not None and elsewhere[0] == 404 and posted is not None and posted[0] == 405
    assert loaded.stdout.strip() == "[]", loaded.stderr
