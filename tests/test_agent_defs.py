"""Agent definitions: built-ins, user and project files (auger's and Claude's format), narrowing of a
project agent's mode, bad files as warnings; `auger agents` and `auger sessions --tree`."""

from __future__ import annotations

import json
import os
from pathlib import Path

from auger.context.agents import discover_agents
from tests.support.harness import auger_cli, run_session
from tests.support.mock_openai import Reply, ToolCall


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_builtins_are_always_there(project, isolated_home):
    index = discover_agents(project, isolated_home)
    assert list(index.agents) == ["explore", "plan", "task", "verify"]
    assert index.get("explore").mode == "plan" and "shell" not in index.get("explore").tools
    assert "shell" in index.get("verify").tools and "write_file" not in index.get("verify").tools
    assert index.get("task").tools is None and index.get("task").max_model_calls == 30
    assert not index.warnings


def test_user_and_project_agents_with_front_matter(project, isolated_home):
    write(isolated_home / "agents" / "docs.md",
          "---\nname: docs\ndescription: Writes docs\nmodel: small-model\nprovider: openai\n"
          "max_model_calls: 5\n---\nWrite documentation.\n")
    write(project / ".auger" / "agents" / "reviewer.md",
          "---\nname: reviewer\ndescription: >\n  Reviews a diff\n  for bugs\ntools: read_file, grep\nmode: plan\n"
          "---\nReview carefully.\n")
    write(project / ".claude" / "agents" / "claude-helper.md",
          "---\nname: claude-helper\ndescription: From Claude\ntools: Read, Grep, Glob, Bash, Edit, Write\n"
          "model: inherit\n---\nHelp.\n")
    index = discover_agents(project, isolated_home)
    docs, reviewer, helper = index.get("docs"), index.get("reviewer"), index.get("claude-helper")
    assert (docs.source, docs.model, docs.provider, docs.max_model_calls, docs.instructions) == \
        ("user", "small-model", "openai", 5, "Write documentation.")
    assert (reviewer.source, reviewer.description, reviewer.tools, reviewer.mode) == \
        ("project", "Reviews a diff for bugs", ("read_file", "grep"), "plan")
    assert helper.tools == ("read_file", "grep", "glob", "shell", "edit_file", "apply_patch", "write_file")
    assert helper.model is None
    assert "- reviewer: Reviews a diff for bugs" in index.describe()
    assert not index.warnings


def test_a_project_agent_cannot_widen_trust(project, isolated_home):
    write(project / ".auger" / "agents" / "yolo.md", "---\nname: yolo\ndescription: d\nmode: auto\n---\nGo.\n")
    write(isolated_home / "agents" / "mine.md", "---\nname: mine\ndescription: d\nmode: auto\n---\nGo.\n")
    index = discover_agents(project, isolated_home, base_mode="safe")
    assert index.get("yolo").mode == "safe"
    assert index.get("mine").mode == "auto"  # the user's own file is trusted (the child still never exceeds its parent)
    assert any("yolo.md" in w and "cannot widen trust" in w for w in index.warnings)


def test_bad_files_are_warnings_naming_the_file(project, isolated_home, tmp_path):
    base = project / ".auger" / "agents"
    write(base / "nofront.md", "just text\n")
    write(base / "nodesc.md", "---\nname: nodesc\n---\nx\n")
    write(base / "badmode.md", "---\nname: badmode\ndescription: d\nmode: root\n---\nx\n")
    write(base / "badcalls.md", "---\nname: badcalls\ndescription: d\nmax_model_calls: many\n---\nx\n")
    write(base / "badname.md", "---\nname: ../../etc\ndescription: d\n---\nx\n")
    write(base / "binary.md", "")
    (base / "binary.md").write_bytes(b"\xff\xfe\x00---")
    outside = write(tmp_path / "secret.md", "---\nname: leak\ndescription: d\n---\nsecret\n")
    os.symlink(outside, base / "link.md")
    write(base / "scoped.md", "---\nname: scoped\ndescription: d\ntools: Bash(git:*), Read\n---\nx\n")
    index = discover_agents(project, isolated_home)
    assert set(index.agents) == {"explore", "plan", "task", "verify", "scoped"}
    assert index.get("scoped").tools == ("read_file",)
    text = "\n".join(index.warnings)
    for name in ("nofront.md", "nodesc.md", "badmode.md", "badcalls.md", "badname.md", "binary.md", "link.md",
                 "scoped.md"):
        assert name in text, name
    assert "symlink out of the project" in text and "secret" not in text.replace("secret.md", "")


def test_auger_agents_lists_them_with_their_source(project, isolated_home):
    write(project / ".auger" / "agents" / "reviewer.md", "---\nname: reviewer\ndescription: Reviews\n---\nx\n")
    write(project / ".auger" / "agents" / "broken.md", "no front matter\n")
    result = auger_cli("agents", home=isolated_home, cwd=project)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["explore", "plan", "task", "verify", "reviewer"]
    assert "(built-in)" in lines[0] and f"(project: {project / '.auger' / 'agents' / 'reviewer.md'})" in lines[4]
    assert "broken.md" in result.stderr and "agent ignored" in result.stderr
    rows = [json.loads(line) for line in auger_cli("agents", "--json", home=isolated_home, cwd=project)
            .stdout.splitlines()]
    assert rows[4]["name"] == "reviewer" and rows[4]["source"] == "project"


def test_sessions_tree_shows_children_under_their_parent(project, server, isolated_home):
    server.add(Reply(tool_calls=[ToolCall("spawn_agent", {"prompt": "look around", "agent": "explore"})]),
               Reply(text="seen it"), Reply(text="done"))
    db = project.parent / "tree.db"
    run_session(project, server, "go", db=db)
    flat = auger_cli("sessions", "--db", str(db), home=isolated_home)
    assert len(flat.stdout.splitlines()) == 2, flat.stdout  # header + the parent: a child is not a top-level session
    tree = auger_cli("sessions", "--tree", "--db", str(db), home=isolated_home)
    lines = tree.stdout.splitlines()
    assert len(lines) == 3 and lines[2].lstrip().startswith("└") and "explore" in lines[2] \
        and "completed" in lines[2] and "look around" in lines[2]
    rows = [json.loads(line) for line in auger_cli("sessions", "--tree", "--json", "--db", str(db),
                                                     home=isolated_home).stdout.splitlines()]
    assert len(rows) == 1 and rows[0]["children"][0]["agent"] == "explore"
