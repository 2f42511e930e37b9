"""`notify = [...]` in the user's config: the program gets turn_ended (with the turn's last reply) and
shutdown_complete of a real `auger exec` run as one JSON argument, detached — a slow or missing program
never holds up or breaks the run, and a project's config can never name one. (approval_request, which only
an interactive session emits, is covered in tests/tui/test_tui_notify.py.)"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from tests.support.harness import auger_cli
from tests.support.mock_openai import MockChatServer, Reply, ToolCall

RECORDER = Path(__file__).parent / "support" / "notify_recorder.py"


def notify_config(home: Path, out: Path, *extra: str) -> None:
    argv = [sys.executable, str(RECORDER), str(out), *extra]
    (home / "config.toml").write_text(f"notify = {json.dumps(argv)}\n")


def recorded(out: Path, count: int, timeout: float = 20.0) -> list[dict]:
    """The events the recorder wrote, once there are `count` (it runs detached: wait for it)."""
    deadline = time.monotonic() + timeout
    while True:
        lines = out.read_text().splitlines() if out.exists() else []
        if len(lines) >= count or time.monotonic() > deadline:
            return [json.loads(line) for line in lines]
        time.sleep(0.05)


def test_an_exec_run_tells_turn_ended_and_shutdown_complete(project, auger_home, tmp_path):
    out = tmp_path / "events.jsonl"
    notify_config(auger_home, out, "--flag")
    with MockChatServer([Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "x"})]),
                         Reply(text="first reply"), ]) as server:
        result = auger_cli("exec", "--base-url", server.base_url, "-m", "mock-model", "make a.txt",
                           home=auger_home, cwd=project)
    assert result.returncode == 0, result.stderr
    events = recorded(out, 2)
    assert [e["type"] for e in events] == ["turn_ended", "shutdown_complete"]
    ended = events[0]
    assert ended["reason"] == "complete" and ended["last_agent_message"] == "first reply"
    assert ended["cwd"] == str(project.resolve()) and ended["session_id"] == events[1]["session_id"]
    assert isinstance(ended["seq"], int) and ended["parent_call_id"] is None


def test_a_slow_program_does_not_hold_up_the_run(project, auger_home, tmp_path):
    notify_config(auger_home, tmp_path / "never.jsonl", "--slow")
    with MockChatServer([Reply(text="quick")]) as server:
        started = time.monotonic()
        result = auger_cli("exec", "--base-url", server.base_url, "-m", "mock-model", "hi", home=auger_home,
                           cwd=project)
        took = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert result.stdout == "quick\n"
    assert took < 15  # the program sleeps 20 s, twice; the run never waits for it


def test_a_missing_program_is_one_warning_and_the_run_goes_on(project, auger_home):
    (auger_home / "config.toml").write_text('notify = ["no-such-notifier-program", "x"]\n')
    with MockChatServer([Reply(text="still works")]) as server:
        result = auger_cli("exec", "--base-url", server.base_url, "-m", "mock-model", "hi", home=auger_home,
                           cwd=project)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "still works\n"
    assert result.stderr.count("no-such-notifier-program") == 1 and "not found" in result.stderr


def test_a_projects_config_cannot_name_a_program(project, auger_home, tmp_path):
    users, projects = tmp_path / "user.jsonl", tmp_path / "project.jsonl"
    notify_config(auger_home, users)
    (project / ".auger").mkdir()
    (project / ".auger" / "config.toml").write_text(
        f"notify = {json.dumps([sys.executable, str(RECORDER), str(projects)])}\n")
    with MockChatServer([Reply(text="done")]) as server:
        result = auger_cli("exec", "--base-url", server.base_url, "-m", "mock-model", "hi", home=auger_home,
                           cwd=project)
    assert result.returncode == 0, result.stderr
    assert "'notify' cannot be set by a project's config file" in result.stderr
    assert [e["type"] for e in recorded(users, 2)] == ["turn_ended", "shutdown_complete"]  # the user's program
    time.sleep(0.2)  # started at the same moments as the user's would have been
    assert not projects.exists()
