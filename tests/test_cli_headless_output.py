"""`auger exec` off a terminal (a CI log): progress stays quiet, but warnings, refused calls and errors
always reach stderr, and a run whose every change was refused says so and exits 3."""

from __future__ import annotations

import subprocess

from tests.support.harness import auger_cli, json_events
from tests.support.mock_openai import MockChatServer, Reply, ToolCall

NO_SANDBOX = ["-c", "sandbox=off"]  # auto mode then asks before changes, as safe mode does: headless, refused


def _write_then_answer() -> list[Reply]:
    return [Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "x"})]), Reply(text="done")]


def _exec(server: MockChatServer, *args: str, home, cwd) -> subprocess.CompletedProcess:
    return auger_cli("exec", "--base-url", server.base_url, "-m", "m", *NO_SANDBOX, *args, "write it",
                     home=home, cwd=cwd)


def test_a_run_whose_every_change_was_refused_says_so_and_exits_3(project, auger_home):
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    with MockChatServer(_write_then_answer()) as server:
        result = _exec(server, home=auger_home, cwd=project)
    assert result.returncode == 3, result.stderr
    assert result.stdout == "done\n" and not (project / "a.txt").exists()
    lines = result.stderr.splitlines()
    assert any(line.startswith("auger: warning: ") and "ask before changes" in line for line in lines), lines
    assert any(line.startswith("auger: refused: write_file a.txt: Not run: ") for line in lines), lines
    assert lines[-1].startswith("auger: 1 tool call was refused and nothing was changed: ")
    assert "--approve-all" in lines[-1]
    assert "\x1b[" not in result.stderr and "▸" not in result.stderr  # no colours, no progress in a log

    with MockChatServer(_write_then_answer()) as server:
        as_json = _exec(server, "--json", home=auger_home, cwd=project)
    assert as_json.returncode == 3
    ended = [e for e in json_events(as_json.stdout) if e["type"] == "tool_call_ended"]
    assert [(e["name"], e["ok"], e["denied"]) for e in ended] == [("write_file", False, "unapproved")]

    with MockChatServer(_write_then_answer()) as server:
        approved = _exec(server, "--approve-all", home=auger_home, cwd=project)
    assert approved.returncode == 0, approved.stderr
    assert (project / "a.txt").read_text() == "x" and "refused" not in approved.stderr


def test_a_refusal_beside_real_changes_is_told_and_the_run_succeeds(project, auger_home):
    (auger_home / "rules.toml").write_text('[[rules]]\nprefix = "touch"\ndecision = "allow"\n')
    with MockChatServer([Reply(tool_calls=[ToolCall("shell", {"command": "touch made.txt"}, id="c1"),
                                           ToolCall("write_file", {"path": "a.txt", "content": "x"}, id="c2")]),
                         Reply(text="done")]) as server:
        result = _exec(server, home=auger_home, cwd=project)
    assert result.returncode == 0, result.stderr
    assert (project / "made.txt").exists() and not (project / "a.txt").exists()
    assert "auger: refused: write_file a.txt: " in result.stderr
    assert result.stderr.splitlines()[-1].startswith("auger: 1 tool call was refused: ")


def test_plan_mode_refusals_are_told_but_do_not_fail_the_run(project, auger_home):
    with MockChatServer(_write_then_answer()) as server:
        result = auger_cli("exec", "--base-url", server.base_url, "-m", "m", "--mode", "plan", "plan it",
                           home=auger_home, cwd=project)
    assert result.returncode == 0, result.stderr
    assert "auger: refused: write_file a.txt: " in result.stderr
    assert "nothing was changed" not in result.stderr  # plan mode asked for no change


def test_a_call_refused_by_the_users_own_rules_does_not_fail_the_run(project, auger_home):
    (auger_home / "rules.toml").write_text('[[rules]]\nprefix = "touch"\ndecision = "forbidden"\n')
    with MockChatServer([Reply(tool_calls=[ToolCall("shell", {"command": "touch made.txt"})]),
                         Reply(text="done")]) as server:
        result = auger_cli("exec", "--base-url", server.base_url, "-m", "m", "--approve-all", "touch it",
                           home=auger_home, cwd=project)
    assert result.returncode == 0, result.stderr  # the policy at work, not a run that could not be done
    assert "auger: refused: shell touch made.txt: Not run: " in result.stderr
    assert result.stderr.splitlines()[-1] == "auger: 1 tool call was refused by your rules or hooks"
