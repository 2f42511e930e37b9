"""A task carries data, never configuration. A hostile submitter once ran any command on every worker
(`-c notify='["sh","-c",…]'` was applied after the worker's own settings, and `notify` runs outside the
sandbox) and could change anything else a config key changes. Now `auger submit` refuses every `-c` and
`--base-url`, and a worker refuses a task whose stored spec carries configuration — someone with write
access to the database is not trusted either. Judged by effect: the marker file `notify` would write."""

from __future__ import annotations

import json

from tests.support.fleet import (
    make_repo, plant_task, start_worker, submit, task_model, task_rows, wait_final,
)


def notify_marker(tmp_path):
    marker = tmp_path / "notified"
    return marker, json.dumps(["sh", "-c", f"echo owned > {marker}"])


def test_submit_refuses_configuration_and_queues_nothing(tmp_path, postgres_url):
    home = tmp_path / "home"
    home.mkdir()
    repo = make_repo(tmp_path / "repo")
    marker, command = notify_marker(tmp_path)
    with task_model() as model:
        attempts = [("-c", f"notify={command}"), ("-c", "sandbox=off"), ("-c", "trust_project_hooks=true"),
                    ("-c", "db_path=/tmp/elsewhere.db"), ("-c", "api_key_env=HOME"),
                    ("--base-url", "http://127.0.0.1:9/v1")]
        refused = [submit(home, postgres_url, model, repo, "task owned", *flags, check=False) for flags in attempts]
        worker = start_worker(home, postgres_url, model)
        try:
            submit(home, postgres_url, model, repo, "task fine")  # control: a task that is only data runs
            rows = wait_final(postgres_url)
        finally:
            worker.kill()
            worker.wait(10)
    for flags, done in zip(attempts, refused):
        assert done.returncode != 0, flags
        assert "carries data, never configuration" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert [row[1] for row in rows] == ["done"]  # only the control was queued, and it ran
    assert not marker.exists()


def test_a_worker_refuses_a_stored_task_that_carries_configuration(tmp_path, postgres_url):
    home = tmp_path / "home"
    home.mkdir()
    repo = make_repo(tmp_path / "repo")
    marker, command = notify_marker(tmp_path)
    with task_model() as model:
        planted = [
            {"prompt": "task one", "repo": str(repo), "overrides": [f"notify={command}"]},
            {"prompt": "task two", "repo": str(repo), "base_url": "http://127.0.0.1:9/v1"},
            {"prompt": "task three", "repo": str(repo), "notify": json.loads(command)},
            {"prompt": "task four", "repo": str(repo), "mode": "yolo"},
            {"prompt": "task five", "repo": str(repo), "ref": "--upload-pack=touch /tmp/owned"},
        ]
        for spec in planted:
            plant_task(postgres_url, spec)
        worker = start_worker(home, postgres_url, model)
        try:
            rows = wait_final(postgres_url, len(planted))
        finally:
            worker.kill()
            worker.wait(10)
        assert model.chat_requests == []  # none of them reached a model, let alone ran a tool
    assert [row[1] for row in rows] == ["failed"] * len(planted)
    assert all(row[2] == "refused" and row[3].startswith("refused: ") for row in rows), rows
    assert "carries data, never configuration" in rows[0][3] and "'overrides'" in rows[0][3]
    assert "'base_url'" in rows[1][3]
    assert not marker.exists()


def test_the_operators_own_settings_still_apply(tmp_path, postgres_url):
    """What the worker's operator sets with -c stays theirs: here a budget of one token, which a task asking
    for more cannot lift."""
    home = tmp_path / "home"
    home.mkdir()
    repo = make_repo(tmp_path / "repo")
    with task_model() as model:
        submit(home, postgres_url, model, repo, "task capped", "--token-budget", "100000")
        worker = start_worker(home, postgres_url, model, "-c", "session_token_budget=1")
        try:
            rows = wait_final(postgres_url)
        finally:
            worker.kill()
            worker.wait(10)
    assert rows[0][1] == "failed" and rows[0][2] == "error", rows  # stopped by the operator's budget
    assert len(model.chat_requests) == 1
