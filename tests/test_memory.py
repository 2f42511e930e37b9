"""Memory is files the user sees: the instruction files in force (listed for /memory), a line added to
one (the `#` of the terminal), and with `memory = true` the `remember` tool, whose notes go to
.auger/memory.md only with the user's approval and are read as instructions at the next user turn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from auger.config import Config
from auger.context.memory import MEMORY_PATH, NoteRefused, append_line, instruction_files
from auger.policy.types import Classification
from auger.protocol import events as ev
from tests.support.harness import run_session
from tests.support.mock_openai import Reply, ToolCall
from tests.test_approvals import answering

NOTE = "Integration tests need `make db` first (NOTE-55)."


def remember_then_answer(server):
    server.add(Reply(tool_calls=[ToolCall("remember", {"text": NOTE})]), Reply(text="noted"), Reply(text="next"))


def test_a_remembered_note_is_approved_written_and_read_at_the_next_turn(project, server):
    remember_then_answer(server)
    on_event, asked = answering("approve")
    run = run_session(project, server, "remember that", "and now?", overrides=("memory=true",), interactive=True,
                      on_event=on_event)
    (request,) = asked  # auto mode would allow a file change inside the project: a note still asks
    assert request.details.tool == "remember" and request.details.subject == MEMORY_PATH
    assert f"+- {NOTE}" in request.details.diff
    assert (project / MEMORY_PATH).read_text() == f"- {NOTE}\n"
    first, _, third = server.chat_requests
    assert "remember" in {t["function"]["name"] for t in first.body["tools"]}
    assert NOTE not in json.dumps(first.body["messages"][:-1])
    told = [m["content"] for m in third.body["messages"] if m["role"] == "user" and MEMORY_PATH in str(m["content"])]
    assert told and NOTE in told[-1]  # part of the instructions from the next user turn on
    assert run.ended.reason == "complete"


def test_a_note_asks_where_the_mode_would_allow_a_file_change_and_plan_refuses_it():
    from auger.policy.decision import decide_call
    from auger.policy.rules import RuleSet
    from auger.tools.memory import REMEMBER

    note = REMEMBER.classify({"text": "x"}, Path("/p"))
    plain = Classification(note.effect, note.subject)
    assert decide_call("remember", plain, RuleSet(), "auto", sandboxed=True).verdict == "allow"
    assert decide_call("remember", note, RuleSet(), "auto", sandboxed=True).verdict == "ask"
    assert decide_call("remember", note, RuleSet(), "plan", sandboxed=True).verdict == "deny"


def test_a_denied_or_headless_note_is_not_written(project, server):
    remember_then_answer(server)
    on_event, _ = answering("deny")
    run_session(project, server, "remember that", "and now?", overrides=("memory=true",), interactive=True,
                on_event=on_event)
    assert not (project / MEMORY_PATH).exists()
    server.add(Reply(tool_calls=[ToolCall("remember", {"text": NOTE})]), Reply(text="could not"))
    run = run_session(project, server, "remember that", overrides=("memory=true",))
    (ended,) = [e for e in run.of(ev.ToolCallEnded) if e.name == "remember"]
    assert ended.denied == "unapproved" and not (project / MEMORY_PATH).exists()


def test_without_memory_on_there_is_no_tool_and_the_file_is_not_read(project, server):
    (project / ".auger").mkdir()
    (project / MEMORY_PATH).write_text("OLD-NOTE-1\n")
    server.add(Reply(text="hi"), Reply(text="hi again"))
    run_session(project, server, "hello")
    body = json.dumps(server.chat_requests[0].body)
    assert "OLD-NOTE-1" not in body and '"remember"' not in body
    run_session(project, server, "hello", overrides=("memory=true",))
    assert "OLD-NOTE-1" in json.dumps(server.chat_requests[1].body)


def test_a_line_goes_through_a_link_inside_and_never_out(project, tmp_path):
    (project / "CLAUDE.md").write_text("# Rules\n- first")
    (project / "AGENTS.md").symlink_to("CLAUDE.md")
    diff = append_line(project, "AGENTS.md", "  second   rule ")
    assert (project / "AGENTS.md").is_symlink()
    assert (project / "CLAUDE.md").read_text() == "# Rules\n- first\nsecond rule\n"
    assert "+second rule" in diff and "-- first" in diff  # the changed last line and the new one
    append_line(project, ".auger/memory.md", "made with its directory")
    assert (project / ".auger" / "memory.md").read_text() == "made with its directory\n"
    (tmp_path / "outside.md").write_text("keep\n")
    (project / "OUT.md").symlink_to(tmp_path / "outside.md")
    for rel in ("OUT.md", "../outside.md"):
        with pytest.raises(NoteRefused):
            append_line(project, rel, "leak")
    assert (tmp_path / "outside.md").read_text() == "keep\n"
    with pytest.raises(NoteRefused, match="empty"):
        append_line(project, "AGENTS.md", "   ")


def test_the_files_in_force_are_listed(project, tmp_path):
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (project / ".git").mkdir()
    (project / "pkg").mkdir()
    (project / "CLAUDE.md").write_text("root rules\n@docs.md\n")
    (project / "docs.md").write_text("imported\n")
    (project / "pkg" / "AGENTS.override.md").write_text("pkg rules\n")
    config = Config(project_doc_fallback_filenames=["CLAUDE.md"], memory=True)
    found = instruction_files(project, config_dir, config, cwd=project / "pkg")
    assert [(f.kind, f.path, f.exists) for f in found] == [
        ("global", config_dir / "AGENTS.md", False),
        ("project", project / "CLAUDE.md", True),
        ("project", project / "pkg" / "AGENTS.override.md", True),
        ("imported", project / "docs.md", True),
        ("memory", project / MEMORY_PATH, False)]
    found = instruction_files(project, config_dir, Config())
    assert [(f.kind, f.path.name) for f in found] == [("global", "AGENTS.md"), ("project", "AGENTS.md")]
