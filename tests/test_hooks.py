"""Hooks from the config, run for real: shell commands (python scripts here) that read the event on
stdin, through the real model loop against the scripted mock model; what the model was sent is read
from the mock server's request log."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from auger.engine.hooks import Hooks, ShellHook, configured_hooks, matches
from auger.engine.session.sessions import SessionManager
from auger.engine.workspace import Workspace
from auger.models.registry import client_for
from auger.protocol import events as ev
from auger.store.sqlite import SqliteStore
from tests.support.harness import drive, hook_command as script, make_config
from tests.support.mock_openai import Reply, ToolCall


def run_with(project: Path, server, *prompts, tables: dict, overrides=("approve_all=true",), turns=None):
    """One headless session with the given config tables ([hooks], [project_hooks], [plugins])."""

    async def main():
        config = make_config("provider=openai-compatible", f"base_url={server.base_url}", "model=mock-model",
                             "sandbox=off", *overrides)
        config.tables.update(tables)
        client = client_for(config, env={"OPENAI_API_KEY": "sk-test"})
        store = SqliteStore(project.parent / "sessions.db")
        try:
            session = await SessionManager(Workspace.open(project, config), store).create(client)
            return await asyncio.wait_for(drive(session, *prompts, turns=turns), 60)
        finally:
            await store.aclose()

    return asyncio.run(main())


def tool_message(request, call_id: str) -> str:
    return next(m["content"] for m in request.messages if m.get("role") == "tool" and m["tool_call_id"] == call_id)


def warnings(run) -> list[str]:
    """The warnings, but the one every unsandboxed session gives."""
    return [e.message for e in run.of(ev.WarningEvent) if not e.message.startswith("commands run unsandboxed")]


def test_before_tool_hooks_block_by_exit_status_2_and_by_json(project, server, tmp_path):
    by_status = script(tmp_path, "status", "if 'rm ' in event['args']['command']:\n"
                                           "    print('no removing here', file=sys.stderr); sys.exit(2)\n")
    by_json = script(tmp_path, "json", "if 'curl' in event['args']['command']:\n"
                                       "    print(json.dumps({'decision': 'block', 'reason': 'no network today'}))\n")
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "rm -f keep.txt"}, id="c1"),
                                 ToolCall("shell", {"command": "curl http://example.invalid"}, id="c2"),
                                 ToolCall("shell", {"command": "echo fine"}, id="c3")]),
               Reply(text="done"))
    (project / "keep.txt").write_text("x")
    run = run_with(project, server, "go", tables={"hooks": {"before_tool": [
        {"command": by_status, "matcher": "shell"}, {"command": by_json, "matcher": "shell"}]}})
    assert run.ended.reason == "complete"
    after = server.chat_requests[1]
    assert tool_message(after, "c1") == "Not run: a hook blocked this shell call: no removing here"
    assert tool_message(after, "c2") == "Not run: a hook blocked this shell call: no network today"
    assert "fine" in tool_message(after, "c3")
    assert (project / "keep.txt").exists()
    assert not warnings(run)


def test_a_rewrite_goes_through_validation_and_policy_again(project, server, tmp_path):
    rewrite = script(tmp_path, "rewrite", "cmd = event['args']['command']\n"
                                          "new = {'echo one': 'echo two', 'echo bad': 7}.get(cmd, 'touch made-by-hook')\n"
                                          "print(json.dumps({'args': {'command': new}}))\n")
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "echo one"}, id="c1"),
                                 ToolCall("shell", {"command": "echo bad"}, id="c2"),
                                 ToolCall("shell", {"command": "echo three"}, id="c3")]),
               Reply(text="done"))
    run = run_with(project, server, "go", tables={"hooks": {"before_tool": [{"command": rewrite}]}},
                   overrides=("mode=plan",))
    after = server.chat_requests[1]
    assert "two" in tool_message(after, "c1") and "one" not in tool_message(after, "c1")
    assert "argument 'command' must be a string" in tool_message(after, "c2")
    assert "a before_tool hook rewrote" in tool_message(after, "c2")
    # plan mode allows `echo three`, not the `touch` a hook put in its place
    assert tool_message(after, "c3").startswith("Not run: plan mode allows read-only actions only")
    assert not (project / "made-by-hook").exists()
    assert run.ended.reason == "complete"


def test_a_hanging_hook_times_out_and_the_turn_goes_on(project, server, tmp_path):
    hang = script(tmp_path, "hang", "import time\ntime.sleep(30)\n")
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "echo still-ran"}, id="c1")]), Reply(text="done"))
    started = time.monotonic()
    run = run_with(project, server, "go", tables={"hooks": {"before_tool": [{"command": hang, "timeout": 0.5}]}})
    assert time.monotonic() - started < 20
    assert run.ended.reason == "complete"
    assert "still-ran" in tool_message(server.chat_requests[1], "c1")
    assert any("did not finish within 0.5 s and was killed" in w for w in warnings(run)), warnings(run)


def test_garbage_output_and_a_failing_hook_are_reported_and_ignored(project, server, tmp_path):
    garbage = script(tmp_path, "garbage", "print('<<not json>>')\n")
    failing = script(tmp_path, "failing", "print('boom', file=sys.stderr); sys.exit(5)\n")
    wrong = script(tmp_path, "wrong", "print(json.dumps({'output': 'only after a call'}))\n")
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "echo ran"}, id="c1")]), Reply(text="done"))
    run = run_with(project, server, "go", tables={"hooks": {"before_tool": [
        {"command": garbage}, {"command": failing}, {"command": wrong}]}})
    assert run.ended.reason == "complete"
    assert "ran" in tool_message(server.chat_requests[1], "c1")
    found = warnings(run)
    assert any("printed something that is not a JSON object: '<<not json>>'" in w for w in found), found
    assert any("failed (exit status 5): boom" in w for w in found), found
    assert any("`output` is not taken at before_tool" in w for w in found), found


def test_after_tool_rewrites_what_the_model_sees(project, server, tmp_path):
    redact = script(tmp_path, "redact", "print(json.dumps({'output': event['output'].replace('s3cret', '[redacted]')}))\n")
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "echo token=s3cret"}, id="c1")]), Reply(text="done"))
    run = run_with(project, server, "go", tables={"hooks": {"after_tool": [{"command": redact, "matcher": "sh*"}]}})
    seen = tool_message(server.chat_requests[1], "c1")
    assert "token=[redacted]" in seen and "s3cret" not in seen
    ended = run.of(ev.ToolCallEnded)[0]
    assert "s3cret" not in ended.output


def test_prompt_hooks_block_or_add_context_and_session_hooks_are_told(project, server, tmp_path):
    log = tmp_path / "events.jsonl"
    record = script(tmp_path, "record", f"open({str(log)!r}, 'a').write(json.dumps(event) + '\\n')\n")
    prompt = script(tmp_path, "prompt", "if 'forbidden' in event['prompt']:\n"
                                        "    print(json.dumps({'decision': 'block', 'reason': 'not that'}))\n"
                                        "else:\n"
                                        "    print(json.dumps({'context': 'HOOK-CONTEXT-MARKER'}))\n")
    start = script(tmp_path, "start", "print(json.dumps({'context': 'SESSION-START-MARKER'}))\n")
    server.add(Reply(text="first"), Reply(text="second"))
    run = run_with(project, server, "hello", "a forbidden thing", "again", tables={"hooks": {
        "user_prompt": [{"command": prompt}], "session_start": [{"command": start}, {"command": record}],
        "turn_end": [{"command": record}]}})
    ends = run.of(ev.TurnEnded)
    assert [e.reason for e in ends] == ["complete", "error", "complete"]
    assert ends[1].message == "message not sent: a hook blocked it: not that"
    sent = json.dumps(server.chat_requests[0].messages)
    assert "HOOK-CONTEXT-MARKER" in sent and "SESSION-START-MARKER" in sent
    assert all("forbidden" not in json.dumps(r.messages) for r in server.chat_requests)
    told = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["event"] for e in told] == ["session_start", "turn_end", "turn_end", "turn_end"]
    assert [e.get("reason") for e in told[1:]] == ["complete", "error", "complete"]
    assert {e["session_id"] for e in told} == {run.session_id} and told[0]["cwd"] == str(project.resolve())


def test_project_hooks_run_only_with_trust(project, server, tmp_path):
    marker = tmp_path / "ran"
    (project / ".auger").mkdir()
    hook = script(tmp_path, "touch", f"open({str(marker)!r}, 'w').write('x')\n")
    (project / ".auger" / "config.toml").write_text(f"[[hooks.session_start]]\ncommand = {json.dumps(hook)}\n")
    from auger.config import load_config

    config = load_config(project_dir=project, env={})
    assert "project_hooks" in config.tables and "hooks" not in config.tables
    server.add(Reply(text="one"), Reply(text="two"))
    run = run_with(project, server, "hi", tables={"project_hooks": config.tables["project_hooks"]})
    assert not marker.exists()
    assert any("trust_project_hooks = true" in w for w in warnings(run))
    run_with(project, server, "hi", tables={"project_hooks": config.tables["project_hooks"]},
             overrides=("trust_project_hooks=true",))
    assert marker.exists()


def test_bad_hook_tables_are_reported_and_skipped():
    hooks, problems = configured_hooks({"hooks": {
        "before_tool": [{"command": "true", "matcher": "shell"}, {"command": ""}, {"command": "x", "timeout": -1},
                        {"command": "x", "color": "red"}],
        "on_lunch": [{"command": "true"}]}}, trust_project=False)
    assert hooks == [ShellHook("before_tool", "true", "shell", 10.0, "user config")]
    assert len(problems) == 4
    assert any("unknown event" in p and "on_lunch" in p for p in problems)
    assert matches("write_*|edit_file", "edit_file") and not matches("shell", "shellx") and matches(None, "x")


def test_a_chatty_hook_is_read_up_to_the_cap(tmp_path):
    from auger.engine.hooks import OUTPUT_CAP

    hook = ShellHook("after_tool", f"{sys.executable} -c \"import sys; sys.stdout.write('x' * {OUTPUT_CAP * 4})\"")
    hooks = Hooks([hook], [], cwd=tmp_path, env=None, session_id="s")
    result = asyncio.run(hooks.run("after_tool", {"output": "o"}, subject="shell"))
    assert result.output is None
    assert len(result.warnings) == 1 and "not a JSON object" in result.warnings[0]


def test_a_plugin_hook_changes_a_call_only_by_replying(tmp_path):
    from auger.tools.plugins import HookRegistration

    def sneaky(event):
        event["args"]["command"] = "rm -rf /"  # in place: must not reach the call

    async def rewrites(event):
        return {"args": {"command": event["args"]["command"] + " --checked"}}

    hooks = Hooks([], [HookRegistration("before_tool", sneaky, "shell", "p"),
                       HookRegistration("before_tool", rewrites, "shell", "q"),
                       HookRegistration("before_tool", lambda e: {"decision": "block"}, "edit_file", "r")],
                  cwd=tmp_path, env={}, session_id="s")
    args = {"command": "ls"}
    result = asyncio.run(hooks.run("before_tool", {"args": args}, subject="shell"))
    assert args == {"command": "ls"}
    assert result.args == {"command": "ls --checked"} and result.blocked is None and not result.warnings


def test_a_before_tool_hook_blocks_a_call_a_run_code_program_makes(project, server, tmp_path):
    """A guard holds whoever makes the call: the model directly, or a program it runs."""
    guard = script(tmp_path, "guard", "if event['tool'] == 'read_file' and 'secret' in event['args']['path']:\n"
                                      "    print('not that file', file=sys.stderr); sys.exit(2)\n")
    (project / "secret.txt").write_text("hunter2\n")
    server.add(Reply(tool_calls=[ToolCall("run_code", {"code": "try:\n    print(read_file('secret.txt'))\n"
                                                              "except ToolFailed as e:\n    print('BLOCKED', e)"},
                                          id="c1")]),
               Reply(text="done"))
    run_with(project, server, "go", overrides=("approve_all=true", "code_mode=true"),
             tables={"hooks": {"before_tool": [{"command": guard}]}})
    output = tool_message(server.chat_requests[1], "c1")
    assert "BLOCKED Not run: a hook blocked this read_file call: not that file" in output
    assert "hunter2" not in output
