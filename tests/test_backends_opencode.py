"""A third-party agent as a backend: opencode (`opencode acp`, npm package opencode-ai) pointed at the mock
model server through an OpenAI-compatible provider in a temp HOME, configured to ask before edits. Its
permission requests become auger approvals (with opencode's diff; a path outside the project named), and
its writes inside the project land through fs/write_text_file.

The package is installed once into a cache directory (.ci/run fetches it beforehand); the test is
skipped, saying why, only when npm is not installed."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from auger.protocol import events as ev
from auger.protocol import items as it
from tests.support.mock_openai import Reply, ToolCall
from tests.support.downloads import cached
from tests.test_backends import answering, open_with_backend, stored_items

OPENCODE = "opencode-ai@1.18.33"


def opencode_prefix() -> Path:
    return cached(OPENCODE.replace("@", "-"))


@pytest.fixture(scope="session")
def opencode() -> str:
    """The opencode binary, installed from npm on first use (about 30 s)."""
    if shutil.which("npm") is None:
        print("\nskipped: npm is not installed (scripts/install-system-deps installs it); opencode cannot be fetched")
        pytest.skip("npm is not installed, so the opencode agent cannot be fetched")
    prefix = opencode_prefix()
    binary = prefix / "node_modules" / ".bin" / "opencode"
    if not binary.exists():
        done = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(prefix), OPENCODE],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"installing {OPENCODE} failed: {done.stderr[-2000:]}"
    return str(binary)


def opencode_table(binary: str, home: Path, base_url: str) -> dict:
    config = {"provider": {"mock": {"npm": "@ai-sdk/openai-compatible", "name": "Mock",
                                    "options": {"baseURL": base_url, "apiKey": "sk-test"},
                                    "models": {"mock-model": {"name": "Mock"}}}},
              "model": "mock/mock-model", "permission": {"edit": "ask", "bash": "ask"},
              "autoupdate": False, "share": "disabled"}
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / "data"),
           "XDG_CACHE_HOME": str(home / ".cache"), "XDG_STATE_HOME": str(home / "state"),
           "OPENCODE_CONFIG_CONTENT": json.dumps(config)}
    return {"command": binary, "args": ["acp"], "env": env}


def test_opencode_edits_through_auger_approvals_and_path_guard(project, server, opencode, tmp_path):
    import asyncio

    outside = tmp_path / "outside.txt"
    inside = project / "note.txt"

    def step(body: dict) -> Reply:
        messages = body["messages"]
        if "title generator" in json.dumps(messages[0]):  # opencode names its session with a side request
            return Reply(text="Notes")
        done = sum(m["role"] == "tool" for m in messages)
        if done == 0:
            return Reply(tool_calls=[ToolCall("write", {"filePath": str(inside), "content": "from opencode\n"})])
        if done == 1:
            return Reply(tool_calls=[ToolCall("write", {"filePath": str(outside), "content": "escaped\n"})])
        return Reply(text="Stopped.")

    server.add(*[step] * 8)  # three answers and the title request; opencode may retry one
    home = tmp_path / "opencode-home"
    home.mkdir()
    on_event, asked = answering("approve", "deny")  # the note inside; the file outside the project

    async def main():
        from tests.support.harness import drive

        session, store = await open_with_backend(project, server, project.parent / "sessions.db",
                                                 project.parent / "agent.log", "mode=safe", backend=None,
                                                 interactive=True)
        session.workspace.config.tables["backends"]["opencode"] = opencode_table(opencode, home, server.base_url)
        await session.set_backend("opencode")
        try:
            return await asyncio.wait_for(drive(session, "write a note", on_event=on_event), 240)
        finally:
            await store.aclose()

    run = asyncio.run(main())
    assert run.ended.reason == "complete", run.ended.message
    assert inside.read_text() == "from opencode\n"
    assert not outside.exists(), "the user denied the write outside the project"
    assert asked[0].details.tool == "agent_edit" and "+from opencode" in (asked[0].details.diff or "")
    assert asked[1].details.outside_paths[0] == str(outside), "the path outside the project is named first"
    ended = run.of(ev.ToolCallEnded)
    assert len(ended) == 2 and ended[0].ok and ended[0].output == "Wrote file successfully."
    assert not ended[1].ok and "rejected" in ended[1].output
    items = stored_items(project, run.session_id)
    assert [i.name for i in items if isinstance(i, it.ToolCall)] == ["agent_edit", "agent_edit"]
    outputs = [i for i in items if isinstance(i, it.ToolOutput)]
    assert [o.ok for o in outputs] == [True, False]
    created = [i.path for i in items if isinstance(i, it.CreatedFile)]
    assert created == ["note.txt"], "the note came through fs/write_text_file: auger recorded creating it"
