"""`auger exec --worktree` and `auger worktree apply|discard|diff|list`: the real command, real git."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from tests.support.harness import auger_cli, json_events
from tests.support.mock_openai import Reply, ToolCall
from tests.test_worktree import sh

FAST = ["-c", "model_retry_base_delay=0.01", "-c", "model_retry_max_delay=0.02"]


def run_in_worktree(server, project: Path, home: Path, *extra: str) -> tuple[str, Path, list[dict]]:
    """One `exec --worktree` session that adds a file and appends to a.txt; (session id, worktree, events)."""
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "src/new.py", "content": "print('new')\n"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": "echo agent >> a.txt"})]),
               Reply(text="done"))
    result = auger_cli("exec", "--json", "--base-url", server.base_url, "-m", "m", *FAST, *extra, "work",
                       home=home, cwd=project)
    assert result.returncode == 0, result.stderr
    events = json_events(result.stdout)
    worktree = Path(events[0]["cwd"])
    assert f"working in a worktree of {project}" in result.stderr
    return events[0]["session_id"], worktree, events


def test_exec_in_a_worktree_leaves_the_project_alone_until_applied(project, server, auger_home):
    sh(project, "git init -q -b main; printf 'one\\n' > a.txt; git add -A; git commit -qm c; echo mine >> a.txt")
    status = sh(project, "git status --porcelain")
    session, worktree, events = run_in_worktree(server, project, auger_home, "--worktree")
    assert auger_home / "worktrees" in worktree.parents
    # inside auger's protected data dir, yet writable in the sandbox (the shell command appended to a.txt)
    assert events[0]["sandbox"] == ("bwrap" if shutil.which("bwrap") else "landlock")
    assert not (project / "src").exists() and (project / "a.txt").read_text() == "one\nmine\n"
    assert sh(project, "git status --porcelain") == status
    assert (worktree / "a.txt").read_text() == "one\nmine\nagent\n"  # started from the uncommitted state
    report = [e["message"] for e in events if e["type"] == "warning"][-1]
    assert "changed 2 file(s)" in report and "A src/new.py" in report
    assert f"auger worktree apply {session[:8]}" in report
    db = sqlite3.connect(auger_home / "sessions.db")
    stored = [json.loads(d) for (d,) in db.execute("SELECT data FROM items WHERE type = 'worktree_changes'")]
    db.close()
    assert [f["path"] for f in stored[0]["files"]] == ["a.txt", "src/new.py"] and "+agent" in stored[0]["diff"]

    listed = auger_cli("worktree", "list", home=auger_home)
    assert str(worktree) in listed.stdout and str(project) in listed.stdout
    diff = auger_cli("worktree", "diff", session[:8], home=auger_home)
    assert diff.returncode == 0 and "+print('new')" in diff.stdout and "+agent" in diff.stdout
    applied = auger_cli("worktree", "apply", session[:8], home=auger_home)
    assert applied.returncode == 0, applied.stderr
    assert "applied 2 file(s)" in applied.stdout
    assert (project / "src" / "new.py").read_text() == "print('new')\n"
    assert (project / "a.txt").read_text() == "one\nmine\nagent\n"
    assert not worktree.exists()
    again = auger_cli("worktree", "apply", session[:8], home=auger_home)
    assert again.returncode == 2 and "did not work in a worktree" in again.stderr


def test_conflicts_are_kept_and_discard_removes_the_worktree(project, server, auger_home):
    (project / "a.txt").write_text("one\n")  # not a git repository: the worktree starts from a snapshot
    session, worktree, _ = run_in_worktree(server, project, auger_home, "-c", "worktree=true")
    (project / "a.txt").write_text("the user's\n")
    applied = auger_cli("worktree", "apply", session[:8], home=auger_home)
    assert applied.returncode == 1
    assert "conflict: a.txt" in applied.stderr and "the worktree is kept" in applied.stderr
    assert (project / "a.txt").read_text() == "the user's\n"
    assert (project / "src" / "new.py").exists() and worktree.exists()
    discarded = auger_cli("worktree", "discard", session[:8], home=auger_home)
    assert discarded.returncode == 0 and not worktree.exists()
    assert not (project / ".git").exists()


def test_a_session_without_a_worktree_is_refused(project, server, auger_home):
    server.add(Reply(text="hi"))
    result = auger_cli("exec", "--json", "--base-url", server.base_url, "-m", "m", "hello", home=auger_home,
                       cwd=project)
    session = json_events(result.stdout)[0]["session_id"]
    refused = auger_cli("worktree", "discard", session, home=auger_home)
    assert refused.returncode == 2 and "did not work in a worktree" in refused.stderr
    assert not [e for e in json_events(result.stdout) if e["type"] == "warning"]


def test_worktree_is_refused_for_a_resumed_session_rather_than_ignored(project, server, auger_home):
    server.add(Reply(text="hi"))
    first = auger_cli("exec", "--json", "--base-url", server.base_url, "-m", "m", "hello", home=auger_home,
                      cwd=project)
    session = json_events(first.stdout)[0]["session_id"]
    again = auger_cli("resume", "--worktree", "--base-url", server.base_url, "-m", "m", session, "more",
                      home=auger_home, cwd=project)
    assert again.returncode == 2 and "--worktree starts a new session" in again.stderr
    assert not (auger_home / "worktrees").exists()
