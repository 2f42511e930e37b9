"""Root cause 14: the user's `before_tool`/`after_tool` hooks must hold whoever makes the call.

A guard hook that blocks `rm`, or a redaction hook that hides a secret from the model, is the user's
rule for the session; a model that delegates the same action to a sub-agent (or has that sub-agent
delegate it again) must not get around it. Each case runs a real session against the scripted mock
model with shell hooks from the config; the effect judged: the file the blocked command would remove
is still there, the hook's marker file names the sub-agent's call (so it ran for that call), and the
secret appears in none of the requests the mock model received.
"""

from __future__ import annotations

import json

import pytest

from tests.support.agents import Routes, run_parent, spawn, tool_messages
from tests.support.harness import hook_command
from tests.support.mock_openai import Reply, ToolCall

SECRET = "hunter2-e3b0c44298fc1c14"
SETTINGS = ("sandbox=off", "mode=auto", "approve_all=true")


def guard(tmp_path, marker) -> dict:
    """[[hooks.before_tool]]: note every call it sees in `marker`; block any `rm` (exit status 2)."""
    return {"command": hook_command(tmp_path, "guard", (
        f"open({str(marker)!r}, 'a').write(json.dumps([event['call_id'], event['args'].get('command')]) + '\\n')\n"
        "if 'rm ' in event['args'].get('command', ''):\n"
        "    print('removing files is not allowed here', file=sys.stderr); sys.exit(2)\n")),
        "matcher": "shell"}


def redact(tmp_path) -> dict:
    """[[hooks.after_tool]]: the secret never reaches the model."""
    return {"command": hook_command(tmp_path, "redact", (
        f"print(json.dumps({{'output': event['output'].replace({SECRET!r}, '[redacted]')}}))\n"))}


def seen_by_guard(marker) -> dict[str, str]:
    return dict(json.loads(line) for line in marker.read_text().splitlines()) if marker.exists() else {}


@pytest.mark.parametrize("depth", [1, 2], ids=["child", "grandchild"])
def test_a_before_tool_guard_blocks_a_sub_agents_command(project, server, tmp_path, depth):
    (project / "keep.txt").write_text("precious\n")
    marker = tmp_path / "guard.log"
    remove = ToolCall("shell", {"command": "rm -f keep.txt"}, id="call_rm")
    routes = Routes({
        "start": [Reply(tool_calls=[spawn("level one")]), Reply(text="done")],
        "level one": ([Reply(tool_calls=[remove]), Reply(text="tried")] if depth == 1 else
                      [Reply(tool_calls=[spawn("level two")]), Reply(text="delegated")]),
        "level two": [Reply(tool_calls=[remove]), Reply(text="tried")],
    }).install(server)
    run = run_parent(project, server, "start", overrides=SETTINGS,
                     tables={"hooks": {"before_tool": [guard(tmp_path, marker)]}})
    assert run.ended.reason == "complete", run.ended.message
    assert (project / "keep.txt").read_text() == "precious\n", "a sub-agent's rm went around the guard hook"
    assert seen_by_guard(marker).get("call_rm") == "rm -f keep.txt", "the hook did not run for the sub-agent's call"
    told = tool_messages(routes.bodies("level one" if depth == 1 else "level two")[-1])[0]
    assert told == "Not run: a hook blocked this shell call: removing files is not allowed here"


@pytest.mark.parametrize("depth", [1, 2], ids=["child", "grandchild"])
def test_an_after_tool_redaction_hides_a_secret_from_a_sub_agents_model(project, server, tmp_path, depth):
    (project / "config.env").write_text(f"API_TOKEN={SECRET}\n")
    routes = Routes({
        "start": [Reply(tool_calls=[spawn("level one")]), Reply(text="done")],
        "level one": ([Reply(tool_calls=[ToolCall("read_file", {"path": "config.env"}),
                                         ToolCall("shell", {"command": "cat config.env"})]),
                       Reply(text="read it")] if depth == 1 else
                      [Reply(tool_calls=[spawn("level two")]), Reply(text="delegated")]),
        "level two": [Reply(tool_calls=[ToolCall("read_file", {"path": "config.env"}),
                                        ToolCall("shell", {"command": "cat config.env"})]),
                      Reply(text="read it")],
    }).install(server)
    run = run_parent(project, server, "start", overrides=SETTINGS,
                     tables={"hooks": {"after_tool": [redact(tmp_path)]}})
    assert run.ended.reason == "complete", run.ended.message
    reader = routes.bodies("level one" if depth == 1 else "level two")[-1]
    outputs = tool_messages(reader)
    assert len(outputs) == 2 and all("API_TOKEN=[redacted]" in output for output in outputs), outputs
    sent = [json.dumps(request.body) for request in server.chat_requests]
    assert not [body for body in sent if SECRET in body], "the secret reached the model in a sub-agent's request"
