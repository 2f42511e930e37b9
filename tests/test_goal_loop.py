"""Goal runs through the real `auger exec`: turns until a command passes (`--until`), a model says a goal in
words is met (`--goal`), or a limit ends the run with its own exit status; a goal command the session could
never run is refused before any turn."""

from __future__ import annotations

import asyncio
import json

import pytest

import auger
from tests.support.harness import auger_cli, json_events
from tests.support.mock_openai import Reply, ToolCall

FAST = ["-c", "model_retry_base_delay=0.01", "-c", "model_retry_max_delay=0.02", "-c", "generate_titles=false"]
CHECK = "python3 -B check_calc.py"  # -B: two versions of calc.py written in one second, of one size, would
# share a cached bytecode file (its key is the source's mtime in seconds and its size)
TEST = "from calc import add\nassert add(2, 3) == 5, f'add(2, 3) is {add(2, 3)}, not 5'\nprint('ok')\n"


def _exec(server, auger_home, project, *args: str):
    return auger_cli("exec", "--json", "--base-url", server.base_url, "-m", "m", *FAST, *args,
                     home=auger_home, cwd=project, timeout=120)


def _write(body: str) -> Reply:
    return Reply(tool_calls=[ToolCall("write_file", {"path": "calc.py", "content": f"def add(a, b):\n    {body}\n"})])


def _user_texts(request) -> list[str]:
    return [m["content"] for m in request.body["messages"] if m["role"] == "user" and isinstance(m["content"], str)]


def test_until_runs_exactly_three_turns_when_the_third_fixes_the_test_and_exits_0(project, server, auger_home):
    (project / "check_calc.py").write_text(TEST)
    server.add(_write("return 0"), Reply(text="Written."),
               _write("return a - b"), Reply(text="Fixed, I think."),
               _write("return a + b"), Reply(text="Now it adds."))
    result = _exec(server, auger_home, project, "--until", CHECK, "make add work")
    assert result.returncode == 0, result.stderr
    events = json_events(result.stdout)
    checks = [e for e in events if e["type"] == "goal_checked"]
    assert [(c["attempt"], c["passed"], c["exit_code"]) for c in checks] == [(1, False, 1), (2, False, 1), (3, True, 0)]
    assert "add(2, 3) is 0, not 5" in checks[0]["output"] and "add(2, 3) is -1, not 5" in checks[1]["output"]
    assert [e["type"] for e in events].count("turn_started") == 3
    ended = [e for e in events if e["type"] == "goal_ended"]
    assert len(ended) == 1 and ended[0]["reason"] == "passed" and ended[0]["attempts"] == 3
    # the model read what failed as the next turn's message, and nothing more was asked of it
    assert len(server.chat_requests) == 6
    second_turn = _user_texts(server.chat_requests[2])[-1]
    assert f"`{CHECK}` still fails (exit code 1)" in second_turn and "add(2, 3) is 0, not 5" in second_turn
    assert (project / "calc.py").read_text().endswith("return a + b\n")


def test_a_goal_that_never_passes_stops_at_max_turns_with_its_own_exit_status(project, server, auger_home):
    (project / "check_calc.py").write_text(TEST)
    server.add(_write("return 0"), Reply(text="one"), _write("return 1"), Reply(text="two"))
    result = _exec(server, auger_home, project, "--until", CHECK, "--max-turns", "2", "make add work")
    assert result.returncode == 4, (result.returncode, result.stderr)
    assert "goal not met after 2 turns (--max-turns 2)" in result.stderr
    events = json_events(result.stdout)
    assert [e["reason"] for e in events if e["type"] == "goal_ended"] == ["max_turns"]
    assert len(server.chat_requests) == 4 and server.remaining == []


def test_turns_that_change_nothing_twice_end_the_run_as_no_progress(project, server, auger_home):
    (project / "check_calc.py").write_text(TEST)
    server.add(Reply(text="I cannot see the problem."), Reply(text="Still nothing to do."))
    result = _exec(server, auger_home, project, "--until", CHECK, "fix it")
    assert result.returncode == 6, (result.returncode, result.stderr)
    assert "the last 2 turns changed nothing" in result.stderr
    assert len(server.chat_requests) == 2


def test_a_goal_command_needing_approval_is_refused_headless_before_any_turn(project, server, auger_home):
    (project / "check_calc.py").write_text(TEST)
    server.add(Reply(text="never asked"))
    result = _exec(server, auger_home, project, "--mode", "safe", "--until", CHECK, "make add work")
    assert result.returncode == 3, (result.returncode, result.stderr)
    assert f"goal refused: the goal command `{CHECK}` may not run here: it needs approval" in result.stderr
    assert "nobody to approve it" in result.stderr
    assert server.chat_requests == []  # refused before a token was spent
    events = json_events(result.stdout)
    assert [e["type"] for e in events if e["type"] in ("goal_ended", "turn_started")] == ["goal_ended"]


def test_a_goal_in_words_is_judged_by_the_small_model_with_structured_output(project, server, auger_home):
    server.add(Reply(text="Started."), Reply(text=json.dumps({"met": False, "reason": "no file was written"})),
               Reply(tool_calls=[ToolCall("write_file", {"path": "notes.md", "content": "# notes\n"})]),
               Reply(text="Wrote notes.md."), Reply(text=json.dumps({"met": True, "reason": "notes.md exists"})))
    result = _exec(server, auger_home, project, "-c", "small_model=mini", "--goal", "notes.md is written",
                   "write the notes")
    assert result.returncode == 0, result.stderr
    models = [r.body["model"] for r in server.chat_requests]
    assert models == ["m", "mini", "m", "m", "mini"]
    checker = server.chat_requests[1].body
    assert checker["response_format"]["type"] == "json_schema" and "tools" not in checker
    assert "notes.md is written" in _user_texts(server.chat_requests[1])[-1]
    assert "no file was written" in _user_texts(server.chat_requests[2])[-1]  # the reason is the next prompt
    events = json_events(result.stdout)
    checks = [(e["passed"], e["reason"]) for e in events if e["type"] == "goal_checked"]
    assert checks == [(False, "no file was written"), (True, "notes.md exists")]
    usage = [(e["model"], e["purpose"]) for e in events if e["type"] == "token_usage"]
    assert usage.count(("mini", "goal_check")) == 2 and ("m", "turn") in usage
    listed = auger_cli("sessions", "--cost", "--json", home=auger_home, cwd=project)
    by_model = {row["model"]: row for row in json.loads(listed.stdout.splitlines()[0])["by_model"]}
    assert set(by_model) == {"m", "mini"} and by_model["mini"]["output_tokens"] > 0  # each model's share, stored
    by_purpose = {row["purpose"]: row for row in json.loads(listed.stdout.splitlines()[0])["by_purpose"]}
    assert set(by_purpose) == {"turn", "goal_check"}  # and each job's: the checks were the small model's calls
    assert by_purpose["goal_check"]["input_tokens"] == by_model["mini"]["input_tokens"] > 0
    assert by_purpose["turn"]["output_tokens"] == by_model["m"]["output_tokens"]
    shown = auger_cli("sessions", "--cost", home=auger_home, cwd=project).stdout
    assert "· goal_check" in shown and "· turn" in shown and " mini " in shown


def _api(project, server, **settings):
    return {"cwd": project, "base_url": server.base_url, "model": "m", "config": {
        "model_retry_base_delay": 0.01, "generate_titles": False}, **settings}


def test_through_the_api_a_goal_command_needing_approval_is_asked_and_the_result_says_how_it_ended(project, server):
    (project / "check_calc.py").write_text(TEST)
    server.add(_write("return a + b"), Reply(text="Done."))
    asked: list[str] = []

    def approve(request) -> bool:
        asked.append(request.details.subject)
        return True

    async def main():
        async with auger.open(**_api(project, server, mode="safe", approve=approve)) as session:
            return await session.run("make add work", until=CHECK)

    result = asyncio.run(asyncio.wait_for(main(), 60))
    assert any(CHECK in subject for subject in asked), asked  # safe mode asks for the goal command too
    assert result.goal is not None and (result.goal.reason, result.goal.attempts) == ("passed", 1)
    assert result.text == "Done." and result.reason == "complete"


def test_through_the_api_a_goal_command_nobody_can_approve_is_refused_before_any_turn(project, server):
    server.add(Reply(text="never asked"))

    async def main():
        async with auger.open(**_api(project, server, mode="safe")) as session:
            return await session.run("make add work", until=CHECK, max_turns=3)

    with pytest.raises(auger.Refused, match="needs approval"):
        asyncio.run(asyncio.wait_for(main(), 60))
    assert server.chat_requests == []
