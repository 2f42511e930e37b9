"""`auger review` end to end: a real git repository, the real command, the scripted mock model. The
diff the model received is read from the mock server's request log; the user's index, HEAD, refs and
stash are compared byte for byte before and after."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from auger.engine.agents.review import REVIEW_SCHEMA, ReviewInvalid, parse_review, schema_error
from tests.support.trees import git
from tests.support.harness import FAST, auger_cli, json_events
from tests.support.mock_openai import Reply

FAST_ARGS = [arg for item in FAST for arg in ("-c", item)]



def git_state(root: Path) -> dict[str, object]:
    index = root / ".git/index"
    os.environ["GIT_OPTIONAL_LOCKS"] = "0"  # this test's own `git status` must not refresh the index either
    try:
        status = git(root, "status", "--porcelain=v1", "-uall")
    finally:
        del os.environ["GIT_OPTIONAL_LOCKS"]
    return {"status": status, "index": index.read_bytes(), "index_mtime": index.stat().st_mtime_ns,
            "head": git(root, "rev-parse", "HEAD"),
            "symbolic": git(root, "symbolic-ref", "HEAD"), "refs": git(root, "show-ref"),
            "stash": git(root, "stash", "list"), "reflog": git(root, "reflog", "--all")}


def make_repo(root: Path) -> None:
    (root / "src").mkdir()
    (root / "src/app.py").write_text("def total(items):\n    return sum(items)\n\n\ndef unused():\n    pass\n")
    (root / "notes.txt").write_text("one\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "initial")
    (root / "stashed.txt").write_text("stash me\n")
    git(root, "add", "stashed.txt")
    git(root, "stash", "-q")


def finding(**fields) -> dict:
    base = {"title": "Off by one", "body": "The sum skips the first item.", "priority": 1, "confidence": 0.8,
            "file": "src/app.py", "line_start": 2, "line_end": 2}
    return {**base, **fields}


def review_json(*findings: dict, verdict: str = "needs changes") -> str:
    return json.dumps({"findings": list(findings), "verdict": verdict, "summary": "Changes the total."})


def review(server, project: Path, home: Path, *args: str, env: dict | None = None):
    return auger_cli("review", "--base-url", server.base_url, "-m", "mock-model", *FAST_ARGS, *args,
                     home=home, cwd=project, env=env)


def last_json(stdout: str) -> dict:
    """The result `auger review --json` prints after the review session's events: its last line."""
    return json.loads(stdout.splitlines()[-1])


def first_prompt(server, request: int = 0) -> str:
    users = [m["content"] for m in server.chat_requests[request].messages if m["role"] == "user"]
    return next(t for t in users if isinstance(t, str) and "The change under review" in t)


def test_uncommitted_review_prints_json_and_leaves_git_untouched(project, server, auger_home):
    make_repo(project)
    (project / "src/app.py").write_text("def total(items):\n    return sum(items[1:])\n\n\ndef unused():\n    pass\n")
    git(project, "add", "src/app.py")  # staged
    (project / "notes.txt").write_text("one\ntwo, unstaged\n")  # unstaged
    (project / "fresh.py").write_text("print('untracked')\n")  # untracked
    (project / ".gitignore").write_text("ignored.log\n")
    (project / "ignored.log").write_text("IGNORED CONTENT\n")
    before = git_state(project)
    server.add(Reply(text=review_json(finding(), finding(title="Elsewhere", file="src/other.py"),
                                      finding(title="Far lines", line_start=40, line_end=41))))
    result = review(server, project, auger_home, "--json")
    assert result.returncode == 0, result.stderr
    out = last_json(result.stdout)
    assert out["verdict"] == "needs changes" and len(out["findings"]) == 3
    assert out["findings"][0]["title"] == "Off by one" and out["findings"][0]["outside_diff"] is None
    assert "not part of the diff" in out["findings"][1]["outside_diff"]
    assert "outside the changed hunks" in out["findings"][2]["outside_diff"]
    prompt = first_prompt(server)
    assert "+    return sum(items[1:])" in prompt  # staged
    assert "+two, unstaged" in prompt  # unstaged
    assert "+print('untracked')" in prompt and "+ignored.log" in prompt  # untracked, .gitignore too
    assert "IGNORED CONTENT" not in prompt
    assert '"verdict"' in prompt and "needs changes" in prompt  # the schema is shown
    assert git_state(project) == before

    sessions = auger_cli("sessions", "--json", home=auger_home, cwd=project)
    rows = [json.loads(line) for line in sessions.stdout.splitlines()]
    assert any(r["id"] == out["session_id"] and r["title"].startswith("review:") for r in rows), rows
    tools = {t["function"]["name"] for t in server.chat_requests[0].body.get("tools", [])}
    assert "read_file" in tools


def test_plain_report_quotes_the_code_without_colour_when_not_a_terminal(project, server, auger_home):
    make_repo(project)
    (project / "src/app.py").write_text("def total(items):\n    return sum(items[1:])\n\n\ndef unused():\n    pass\n")
    server.add(Reply(text=review_json(finding(body="Skips \x1b[31mthe first\x1b[0m item."))))
    result = review(server, project, auger_home)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "[P1] Off by one (confidence 0.80)" in out
    assert "src/app.py:2" in out and "2 │     return sum(items[1:])" in out
    assert "\x1b" not in out  # not a terminal; and the model's escape codes are removed
    assert "needs changes" in out and "auger resume" in out


def test_report_dims_line_numbers_on_a_terminal_and_honours_no_color(project, server, auger_home):
    import pty

    make_repo(project)
    (project / "src/app.py").write_text("def total(items):\n    return sum(items[1:])\n\n\ndef unused():\n    pass\n")

    def on_tty(env: dict) -> str:
        import sys

        master, slave = pty.openpty()
        full = {k: v for k, v in os.environ.items() if not k.startswith(("AUGER_", "OPENAI_", "NO_COLOR"))}
        full.update({"AUGER_HOME": str(auger_home), "OPENAI_API_KEY": "sk-test", **env})
        proc = subprocess.run([sys.executable, "-m", "auger", "review", "--base-url", server.base_url, "-m", "m",
                               *FAST_ARGS], cwd=project, env=full, stdout=slave, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, timeout=60)
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        os.close(master)
        assert proc.returncode == 0, proc.stderr
        return b"".join(chunks).decode()

    server.add(Reply(text=review_json(finding())), Reply(text=review_json(finding())))
    coloured = on_tty({})
    assert "\x1b[2m2 │\x1b[0m" in coloured and "\x1b[31m[P1]\x1b[0m" in coloured
    plain = on_tty({"NO_COLOR": "1"})
    assert "2 │" in plain and "\x1b[" not in plain


def test_malformed_reply_is_repaired_once(project, server, auger_home):
    make_repo(project)
    (project / "notes.txt").write_text("changed\n")
    server.add(Reply(text='Here is my review: {"findings": []}'),
               Reply(text="```json\n" + review_json(finding(file="notes.txt", line_start=1, line_end=1),
                                                    verdict="correct") + "\n```"))
    result = review(server, project, auger_home, "--json")
    assert result.returncode == 0, result.stderr
    assert last_json(result.stdout)["verdict"] == "correct"
    assert len(server.chat_requests) == 2
    last_user = [m["content"] for m in server.chat_requests[1].messages if m["role"] == "user"][-1]
    assert "not a valid review" in last_user and "not JSON" in last_user


def test_a_sub_agents_turn_end_is_not_the_reviews(project, server, auger_home):
    """The reviewing model asks a sub-agent to look around: the review ends with its own turn, and its
    answer is the reviewer's, never the sub-agent's notes."""
    from tests.support.agents import first_user_text, spawn, tool_messages

    make_repo(project)
    (project / "notes.txt").write_text("changed\n")

    def step(body: dict) -> Reply:
        if first_user_text(body["messages"]) == "look around":
            return Reply(text="a sub-agent's notes, not a review", delay=0.3)
        if not tool_messages(body):
            return Reply(tool_calls=[spawn("look around", agent="explore")])
        return Reply(text=review_json(finding(file="notes.txt", line_start=1, line_end=1), verdict="correct"))

    server.add(*[step] * 3)
    result = review(server, project, auger_home, "--json")
    assert result.returncode == 0, result.stderr
    assert last_json(result.stdout)["verdict"] == "correct"
    assert len(server.chat_requests) == 3  # the reviewer, the sub-agent, the reviewer
    asked = [m["content"] for m in server.chat_requests[-1].messages if m["role"] == "user"]
    assert not [text for text in asked if "not a valid review" in str(text)], "the sub-agent's notes were taken " \
        "for the review"


def test_two_malformed_replies_fail_with_the_raw_reply(project, server, auger_home):
    make_repo(project)
    (project / "notes.txt").write_text("changed\n")
    server.add(Reply(text=json.dumps({"findings": [finding(priority=7)], "verdict": "correct", "summary": ""})),
               Reply(text=json.dumps({"findings": [], "verdict": "fine", "summary": "RAW-SECOND"})))
    result = review(server, project, auger_home)
    assert result.returncode == 1
    assert "not valid" in result.stderr and "$.verdict must be one of" in result.stderr
    assert "RAW-SECOND" in result.stderr and "at most 3, not 7" not in result.stderr.split("---")[0]
    repair = [m["content"] for m in server.chat_requests[1].messages if m["role"] == "user"][-1]
    assert "$.findings[0].priority must be at most 3, not 7" in repair
    as_json = review(server, project, auger_home, "--json")  # the script is exhausted: the turn errors
    assert as_json.returncode == 1 and "error" in last_json(as_json.stdout)


def test_base_and_commit_select_their_diffs(project, server, auger_home):
    make_repo(project)
    git(project, "checkout", "-qb", "feature")
    (project / "feature.txt").write_text("FEATURE ONE\n")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "feature one")
    first = git(project, "rev-parse", "HEAD").strip()
    (project / "feature.txt").write_text("FEATURE ONE\nFEATURE TWO\n")
    git(project, "commit", "-qam", "feature two")
    git(project, "checkout", "-q", "main")
    (project / "notes.txt").write_text("MAIN LATER\n")
    git(project, "commit", "-qam", "main later")
    git(project, "checkout", "-q", "feature")
    (project / "notes.txt").write_text("UNCOMMITTED\n")
    before = git_state(project)

    server.add(Reply(text=review_json()))
    result = review(server, project, auger_home, "--base", "main", "--json")
    assert result.returncode == 0, result.stderr
    prompt = first_prompt(server)
    assert "+FEATURE ONE" in prompt and "+FEATURE TWO" in prompt
    assert "MAIN LATER" not in prompt and "UNCOMMITTED" not in prompt
    assert "since it left main" in prompt

    server.add(Reply(text=review_json()))
    result = review(server, project, auger_home, "--commit", first[:10], "--json")
    assert result.returncode == 0, result.stderr
    prompt = first_prompt(server, 1)
    assert "+FEATURE ONE" in prompt and "FEATURE TWO" not in prompt and "UNCOMMITTED" not in prompt
    assert git_state(project) == before

    bad = review(server, project, auger_home, "--commit=--output=/tmp/x")
    assert bad.returncode == 2 and "not a branch or commit name" in bad.stderr
    unknown = review(server, project, auger_home, "--base", "no-such-branch")
    assert unknown.returncode == 2 and "names no commit" in unknown.stderr


def test_nothing_to_review_never_calls_the_model(project, server, auger_home):
    make_repo(project)
    result = review(server, project, auger_home)
    assert result.returncode == 0, result.stderr
    assert "nothing to review" in result.stdout
    assert not server.chat_requests


def test_not_a_git_repository_is_one_line(project, server, auger_home):
    (project / "a.txt").write_text("x\n")
    result = review(server, project, auger_home)
    assert result.returncode == 2 and "not in a git repository" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("reply, error", [
    ('{"findings": [], "verdict": "correct"}', "lacks the required field 'summary'"),
    ('{"findings": [{"title": "t"}], "verdict": "correct", "summary": ""}', "$.findings[0] lacks"),
    (json.dumps({"findings": [finding(priority=True)], "verdict": "correct", "summary": ""}),
     "priority must be integer, not boolean"),
    (json.dumps({"findings": [finding(confidence=1.5)], "verdict": "correct", "summary": ""}), "at most 1"),
    (json.dumps({"findings": [finding(line_start=5, line_end=2)], "verdict": "correct", "summary": ""}),
     "before line_start"),
    (json.dumps({"findings": [finding(file=None)], "verdict": "correct", "summary": ""}), "no file"),
    ("[" * 200, "not JSON"),
    ("", "empty"),
])
def test_invalid_reviews_say_where(reply, error):
    with pytest.raises(ReviewInvalid, match=None) as caught:
        parse_review(reply)
    assert error in str(caught.value)


def test_schema_accepts_a_general_finding():
    data = {"findings": [finding(file=None, line_start=None, line_end=None)], "verdict": "correct", "summary": "ok"}
    assert schema_error(data, REVIEW_SCHEMA) is None
    assert parse_review(json.dumps(data)).findings[0].file is None


def test_quoted_code_never_comes_from_outside_the_project(project):
    import asyncio

    from auger.changes.review_change import Change, ReviewTarget
    from auger.engine.agents.review import Finding, code_lines

    make_repo(project)
    (project.parent / "secret.txt").write_text("SECRET\n")
    os.symlink(project.parent / "secret.txt", project / "link.txt")
    head = git(project, "rev-parse", "HEAD").strip()
    for revision in (None, head):
        change = Change(ReviewTarget(), "", {}, revision)

        def quote(path: str, change=change) -> list:
            return asyncio.run(code_lines(project, change, Finding("t", "b", 1, 0.5, path, 1, 2)))

        assert quote("src/app.py") == [(1, "def total(items):"), (2, "    return sum(items)")]
        for hostile in ("../secret.txt", "link.txt", "/etc/passwd", "src/../../secret.txt", "HEAD:x"):
            assert quote(hostile) == [], (revision, hostile)


def test_json_prints_the_review_mode_events_in_order_and_the_review_runs_on_review_model(project, server,
                                                                                        auger_home):
    make_repo(project)
    (project / "notes.txt").write_text("changed\n")
    server.add(Reply(text=review_json(finding(), verdict="needs changes")))
    result = auger_cli("review", "--base-url", server.base_url, *FAST_ARGS, "-c", "model=writer-model",
                       "-c", "review_model=reviewer-model", "--json", home=auger_home, cwd=project)
    assert result.returncode == 0, result.stderr
    events = json_events(result.stdout)[:-1]  # (the last line is the result)
    types = [e["type"] for e in events]
    assert types[0] == "session_configured" and events[0]["model"] == "reviewer-model"
    entered, exited = types.index("entered_review_mode"), types.index("exited_review_mode")
    assert entered < types.index("turn_started") < types.index("turn_ended") < exited
    assert types[-1] == "shutdown_complete" and exited == len(types) - 2
    assert events[entered]["target"].startswith("uncommitted changes") and events[entered]["model"] == "reviewer-model"
    assert (events[exited]["verdict"], events[exited]["findings"], events[exited]["error"]) == ("needs changes", 1,
                                                                                                None)
    assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)
    assert {r.body["model"] for r in server.chat_requests} == {"reviewer-model"}
    assert last_json(result.stdout)["verdict"] == "needs changes"
    assert [e["purpose"] for e in events if e["type"] == "token_usage"] == ["review"]  # charged as a review
    listed = json.loads(auger_cli("sessions", "--cost", "--json", home=auger_home, cwd=project).stdout.splitlines()[0])
    assert [row["purpose"] for row in listed["by_purpose"]] == ["review"]

    server.add(Reply(text=review_json(verdict="correct")))
    default = auger_cli("review", "--base-url", server.base_url, *FAST_ARGS, "-c", "model=writer-model", "--json",
                        home=auger_home, cwd=project)
    assert default.returncode == 0, default.stderr
    assert server.chat_requests[-1].body["model"] == "writer-model"  # without review_model: the session's model


def test_a_failed_review_exits_review_mode_with_its_error(project, server, auger_home):
    make_repo(project)
    (project / "notes.txt").write_text("changed\n")
    server.add(Reply(text="not json"), Reply(text="still not json"))
    result = review(server, project, auger_home, "--json")
    assert result.returncode == 1
    exited = [e for e in json_events(result.stdout) if e.get("type") == "exited_review_mode"]
    assert len(exited) == 1 and exited[0]["verdict"] is None and "not valid" in exited[0]["error"]
    assert "error" in last_json(result.stdout)


def test_the_review_session_is_read_only(project, server, auger_home):
    from tests.support.mock_openai import ToolCall

    make_repo(project)
    (project / "notes.txt").write_text("changed\n")
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "echo x > made.txt"}),
                                 ToolCall("write_file", {"path": "written.txt", "content": "x\n"})]),
               Reply(text=review_json(verdict="correct")))
    result = review(server, project, auger_home, "--json")
    assert result.returncode == 0, result.stderr
    assert not (project / "made.txt").exists() and not (project / "written.txt").exists()
    context = [m["content"] for m in server.chat_requests[0].messages
               if m["role"] == "user" and "<environment_context>" in str(m["content"])]
    assert context and "plan" in context[0]


def test_a_long_diff_is_cut_at_a_file_boundary_and_names_what_it_left_out(project, monkeypatch):
    import asyncio

    import auger.changes.review_change as review_module
    from auger.changes.review_change import ReviewTarget, collect_change
    from auger.engine.agents.review import Finding, ReviewResult, flag_outside, review_prompt

    make_repo(project)
    (project / "notes.txt").write_text("".join(f"line {i}\n" for i in range(40)))
    (project / "src/app.py").write_text("changed\n")
    before = asyncio.run(collect_change(project, ReviewTarget()))
    monkeypatch.setattr(review_module, "MAX_DIFF_CHARS", before.text.index("diff --git a/src/app.py") + 10)
    change = asyncio.run(collect_change(project, ReviewTarget()))
    assert change.truncated and change.omitted == ["src/app.py"] and "src/app.py" not in change.text
    prompt = review_prompt(change)
    assert "was cut" in prompt and "not shown below" in prompt and "src/app.py" in prompt
    result = flag_outside(ReviewResult([Finding("t", "b", 1, 0.5, "src/app.py", 1, 1)], "correct", ""), change)
    assert result.findings[0].outside_diff is None  # named as changed; its lines are unknown, not outside
