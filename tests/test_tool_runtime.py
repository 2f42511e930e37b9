"""The tool runtime's one sequence, tested in-process against a fake host: typed outcomes, hooks
around mutations only, and the same decision `auger policy check` prints."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re

import pytest

from auger.engine.turn.tool_runtime import Aborted, Denied, Failed, PlannedCall, Ran
from auger.frontends.cli import main as cli_main
from auger.policy.sandbox import detect
from auger.config import load_config, home_dirs
from auger.protocol import events as ev
from auger.protocol.items import ToolCall
from auger.tools.base import READ_ONLY, LOCAL_MUTATION, ToolResult, ToolSpec
from auger.tools.shell import SHELL
from tests.support.fake_host import FakeHost, fake_runtime


def run_in(runtime, call: ToolCall, host: FakeHost, mode: str):
    """Run one call with the session in `mode`."""
    async def main():
        await runtime.shared.mode.change(mode)
        return await runtime.run(call, host, turn_id="t")

    return asyncio.run(main())


def _call(name: str, args: dict | str, call_id: str = "c1") -> ToolCall:
    return ToolCall(call_id, name, args if isinstance(args, str) else json.dumps(args))


def _recording_shell(ran: list[str]) -> ToolSpec:
    """The real shell tool's schema and classifier; its handler only notes the command, so a decision
    table can be checked without running `rm -rf` or `git push`."""
    async def handler(args, ctx):
        ran.append(args["command"])
        return ToolResult("ran")

    return dataclasses.replace(SHELL, handler=handler)


COMMANDS = ["ls -la", "cat README.md", "touch new.txt", "rm -rf build", "git push origin main",
            "curl https://example.com", "echo hi > ../outside.txt", "git status", "make test"]


@pytest.mark.parametrize("mode", ["plan", "safe", "auto"])
def test_policy_check_and_the_runtime_decide_alike(project, isolated_home, capsys, mode):
    (isolated_home / "rules.toml").write_text('[[rules]]\nprefix = "make"\ndecision = "allow"\n'
                                              '[[rules]]\nprefix = "curl"\ndecision = "forbidden"\n')
    from auger.policy.rules import load_rules

    rules, problems = load_rules(home_dirs()["config"] / "rules.toml", None)
    assert not problems
    sandboxed = detect(load_config([], env={}, config_file=isolated_home / "none.toml").sandbox)[0] is not None
    ran: list[str] = []
    runtime = fake_runtime(project, [_recording_shell(ran)], rules=rules, sandboxed=sandboxed)
    table = {}
    for command in COMMANDS:
        assert cli_main(["policy", "check", "--mode", mode, "-C", str(project), "--", command]) == 0
        printed = re.search(r"^decision: (\w+) ", capsys.readouterr().out, re.M)
        host = FakeHost()
        outcome = run_in(runtime, _call("shell", {"command": command}), host, mode)
        if isinstance(outcome, Ran):
            actual = "allow"
        elif host.asked:
            actual = "ask"
        else:
            assert isinstance(outcome, Denied), outcome
            actual = "deny"
        table[command] = (printed.group(1), actual)
    assert all(cli == runtime_verdict for cli, runtime_verdict in table.values()), table
    verdicts = {command: verdict for command, (verdict, _) in table.items()}
    assert verdicts["ls -la"] == "allow" and verdicts["curl https://example.com"] == "deny"
    assert verdicts["rm -rf build"] == ("deny" if mode == "plan" else "ask")  # the table is not trivially flat


def _tool(name: str, effect: str, log: list[str]) -> ToolSpec:
    async def handler(args, ctx):
        log.append(f"run {name}")
        return ToolResult(f"{name} done")

    return ToolSpec(name, f"the {name} tool", {"type": "object", "properties": {}}, handler, effect=effect)


def _hooked_runtime(project, log: list[str], **options):
    runtime = fake_runtime(project, [_tool("look", READ_ONLY, log), _tool("change", LOCAL_MUTATION, log)],
                           **options)

    async def before(call: PlannedCall) -> None:
        log.append(f"before {call.tool} {call.classification.effect}")

    async def after(call: PlannedCall) -> None:
        log.append(f"after {call.tool}")

    runtime.before_mutation.append(before)
    runtime.after_mutation.append(after)
    return runtime


def test_mutation_hooks_wrap_only_calls_that_may_change_something(project):
    log: list[str] = []
    runtime = _hooked_runtime(project, log)
    host = FakeHost(answer=lambda request: "approve")
    for name in ("look", "change"):
        outcome = run_in(runtime, _call(name, {}), host, "safe")
        assert isinstance(outcome, Ran) and outcome.result.output == f"{name} done"
    assert log == ["run look", "before change local_mutation", "run change", "after change"]
    assert [e.name for e in host.of(ev.ToolCallStarted)] == ["look", "change"]


def test_a_refused_call_runs_no_hook_and_says_why(project):
    log: list[str] = []
    runtime = _hooked_runtime(project, log)
    denied = run_in(runtime, _call("change", {}), FakeHost(), "safe")
    assert isinstance(denied, Denied) and "The user denied this change call" in denied.message
    planned = run_in(runtime, _call("change", {}), FakeHost(), "plan")
    assert isinstance(planned, Denied) and "plan mode allows read-only actions only" in planned.message
    aborted = run_in(runtime, _call("change", {}), FakeHost(answer=lambda r: "abort"), "safe")
    assert isinstance(aborted, Aborted)
    assert log == []


def test_calls_that_cannot_run_fail_with_a_message_for_the_model(project):
    runtime = _hooked_runtime(project, [])
    unknown = run_in(runtime, _call("nope", {}), FakeHost(), "auto")
    assert isinstance(unknown, Failed) and "no tool named 'nope'" in unknown.message and "look, change" in unknown.message
    bad = run_in(runtime, _call("look", "{not json"), FakeHost(), "auto")
    assert isinstance(bad, Failed) and "are not valid JSON" in bad.message
    extra = run_in(runtime, _call("look", {"x": 1}), FakeHost(), "auto")
    assert isinstance(extra, Failed) and "unknown argument(s): x" in extra.message


def test_a_session_grant_covers_the_same_call_without_asking_again(project):
    log: list[str] = []
    runtime = _hooked_runtime(project, log)
    host = FakeHost(answer=lambda request: "approve_session")
    for _ in range(2):
        assert isinstance(run_in(runtime, _call("change", {}), host, "safe"), Ran)
    assert len(host.asked) == 1 and log.count("run change") == 2


def _buggy_tools() -> list[ToolSpec]:
    """Handlers with bugs: StopIteration on the loop and on a handler thread, and a SystemExit."""
    from auger.tools.threads import in_thread

    async def stops(args, ctx):
        raise StopIteration

    async def stops_on_thread(args, ctx):
        return await in_thread(next, iter(()))

    async def exits(args, ctx):
        raise SystemExit(3)

    return [ToolSpec(name, f"the {name} tool", {"type": "object", "properties": {}}, handler, effect=READ_ONLY)
            for name, handler in (("stops", stops), ("stops_on_thread", stops_on_thread), ("exits", exits))]


def test_a_handler_that_raises_anything_fails_its_call_and_the_turn_goes_on(project, server):
    from auger.tools.toolset import Combined, StaticToolset, builtin_toolset
    from tests.support.harness import run_session
    from tests.support.mock_openai import Reply
    from tests.support.mock_openai import ToolCall as Call

    tools = Combined([builtin_toolset(), StaticToolset(_buggy_tools())])
    server.add(Reply(tool_calls=[Call("stops", {}), Call("stops_on_thread", {}), Call("exits", {})]),
               Reply(text="done"))
    run = run_session(project, server, "go", tools=tools)
    assert run.ended.reason == "complete"
    outputs = [e.output for e in run.of(ev.ToolCallEnded)]
    assert outputs == ["Error: internal error in tool stops: RuntimeError: coroutine raised StopIteration",
                       "Error: internal error in tool stops_on_thread: RuntimeError: next raised StopIteration",
                       "Error: internal error in tool exits: SystemExit: 3"]
    assert [m["content"] for m in server.chat_requests[1].messages if m["role"] == "tool"] == outputs
