"""`auger init`: a plan-mode session drafts AGENTS.md (improving an existing one) and the draft is queued as
a pending change; the project's tree is untouched until `auger pending apply` writes it."""

from __future__ import annotations

import json
import re

from auger.engine.session.init_doc import document_of
from tests.support.harness import auger_cli
from tests.support.mock_openai import Reply, ToolCall

DRAFT = "# Repository guide\n\n## Commands\n\n- `make test` runs the tests.\n"


def init(project, server, home, *extra: str):
    return auger_cli("init", "--base-url", server.base_url, "-m", "mock-model", *extra, home=home, cwd=project)


def session_of(stderr: str) -> str:
    found = re.search(r"pending in session (\w+)", stderr)
    assert found, stderr
    return found.group(1)


def test_init_queues_a_new_agents_md_and_apply_writes_it(project, server, isolated_home):
    (project / "Makefile").write_text("test:\n\tpytest\n")
    server.add(Reply(tool_calls=[ToolCall("read_file", {"path": "Makefile"})]),
               Reply(tool_calls=[ToolCall("write_file", {"path": "AGENTS.md", "content": "sneaky"})]),
               Reply(text=DRAFT))
    done = init(project, server, isolated_home)
    assert done.returncode == 0, done.stderr
    assert not (project / "AGENTS.md").exists()  # untouched until applied; the plan-mode write was refused
    assert "+# Repository guide" in done.stdout and "+- `make test` runs the tests." in done.stdout
    first = server.chat_requests[0].body["messages"][-1]["content"]
    assert first.startswith("Write the AGENTS.md file for this repository")
    refused = [m["content"] for m in server.chat_requests[2].body["messages"] if m["role"] == "tool"][-1]
    assert "plan mode" in refused
    session = session_of(done.stderr)
    listed = auger_cli("pending", "list", "--json", "-s", session, home=isolated_home, cwd=project)
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["path"], r["kind"]) for r in rows] == [("AGENTS.md", "add")]
    applied = auger_cli("pending", "apply", "-s", session, home=isolated_home, cwd=project)
    assert applied.returncode == 0, applied.stderr
    assert (project / "AGENTS.md").read_text() == DRAFT


def test_init_improves_an_existing_agents_md_as_a_diff(project, server, isolated_home):
    (project / "AGENTS.md").write_text("# Old guide\n\n- Use tabs (OLD-RULE).\n")
    improved = "# Old guide\n\n- Use tabs (OLD-RULE).\n- Run `make test` before committing.\n"
    server.add(Reply(text=f"```markdown\n{improved}```"))
    done = init(project, server, isolated_home)
    assert done.returncode == 0, done.stderr
    assert "OLD-RULE" in server.chat_requests[0].body["messages"][-1]["content"]  # given to improve
    assert "+- Run `make test` before committing." in done.stdout and "-# Old guide" not in done.stdout
    assert "an improved AGENTS.md" in done.stderr
    assert (project / "AGENTS.md").read_text() == "# Old guide\n\n- Use tabs (OLD-RULE).\n"
    applied = auger_cli("pending", "apply", "-s", session_of(done.stderr), home=isolated_home, cwd=project)
    assert applied.returncode == 0 and (project / "AGENTS.md").read_text() == improved


def test_init_without_an_answer_queues_nothing(project, server, isolated_home):
    server.add(Reply(text="   "))
    done = init(project, server, isolated_home)
    assert done.returncode == 1 and "the model's answer was empty" in done.stderr
    assert not (project / "AGENTS.md").exists()


def test_a_fence_around_the_whole_answer_is_taken_off():
    assert document_of("~~~md\n# T\n```sh\nmake\n```\n~~~") == "# T\n```sh\nmake\n```\n"
    assert document_of("# T\n```sh\nmake\n```") == "# T\n```sh\nmake\n```\n"
    assert document_of("") == ""
