"""MCP servers as tool sources, against real servers: tests/support/mcp_server.py (the `mcp` SDK, over
stdio and streamable HTTP) driven through the real model loop with the scripted mock model."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from auger.engine.session.sessions import SessionManager
from auger.engine.workspace import Workspace
from auger.models.registry import client_for
from auger.protocol import events as ev
from auger.protocol.ops import AddMcpServer, ApprovalDecision, RemoveMcpServer
from auger.store.sqlite import SqliteStore
from auger.tools.mcp import effect_of, tool_name
from tests.support.harness import drive, make_config
from tests.support.mock_openai import Reply, ToolCall
from tests.support.sockets import wait_for_port

ROOT = Path(__file__).resolve().parent.parent
STDIO = {"command": sys.executable, "args": ["-m", "tests.support.mcp_server"], "cwd": str(ROOT), "trusted": True}


def _names(request) -> list[str]:
    return [t["function"]["name"] for t in request.body.get("tools", [])]


def _system(request) -> str:
    return request.body["messages"][0]["content"]


def run_mcp(project, server, *prompts, servers: dict | None = None, ops=(), overrides=("approve_all=true",),
            interactive=False,
            on_event=None, turns=None):
    """One session with `servers` configured ([mcp_servers] tables); `ops` are submitted before the first
    prompt. Returns (run, session)."""

    async def main():
        config = make_config("provider=openai-compatible", f"base_url={server.base_url}", "model=mock-model",
                             "sandbox=off", *overrides)
        if servers:
            config.tables["mcp_servers"] = servers
        client = client_for(config, env={"OPENAI_API_KEY": "sk-test"})
        store = SqliteStore(project.parent / "sessions.db")
        try:
            session = await SessionManager(Workspace.open(project, config), store).create(client,
                                                                                        interactive=interactive)
            for op in ops:
                session.submit(op)
            run = await asyncio.wait_for(drive(session, *prompts, on_event=on_event, turns=turns), 90)
            return run, session
        finally:
            await store.aclose()

    return asyncio.run(main())


def test_names_are_sanitised_and_long_ones_shortened_stably():
    assert tool_name("my.srv", "read file") == "mcp__my_srv__read_file"
    long = tool_name("s", "x" * 100)
    assert len(long) == 64 and long == tool_name("s", "x" * 100) and long != tool_name("s", "x" * 99 + "y")


def test_annotations_map_to_effects():
    from mcp.types import ToolAnnotations

    assert effect_of(None) == "local_mutation"
    assert effect_of(ToolAnnotations(readOnlyHint=True)) == "read_only"
    assert effect_of(ToolAnnotations(destructiveHint=True)) == "destructive"
    assert effect_of(ToolAnnotations(readOnlyHint=False, openWorldHint=True)) == "remote_action"
    # a server not believed: a hint can only make a call stricter
    assert effect_of(ToolAnnotations(readOnlyHint=True), believed=False) == "local_mutation"
    assert effect_of(ToolAnnotations(readOnlyHint=True, destructiveHint=True), believed=False) == "destructive"
    assert effect_of(ToolAnnotations(readOnlyHint=True, openWorldHint=True), believed=False) == "remote_action"


def test_a_tool_call_end_to_end_through_the_model_loop(project, server):
    server.add(Reply(tool_calls=[ToolCall("mcp__t__echo", {"text": "hi"}), ToolCall("mcp__t__add", {"a": 2, "b": 3})]),
               Reply(tool_calls=[ToolCall("mcp__t__fail", {"reason": "nope"})]),
               Reply(tool_calls=[ToolCall("mcp__t__picture", {}),
                                 ToolCall("read_mcp_resource", {"server": "t", "uri": "note://hello"}),
                                 ToolCall("list_mcp_resources", {})]),
               Reply(text="done"), Reply(text="again"))
    run, _ = run_mcp(project, server, "use the server", "once more", servers={"t": STDIO})
    assert run.ended.reason == "complete"
    outputs = {e.name: e for e in run.of(ev.ToolCallEnded)}
    assert outputs["mcp__t__echo"].output == "echo: hi" and outputs["mcp__t__echo"].ok
    assert json.loads(outputs["mcp__t__add"].output) == {"sum": 5}
    assert not outputs["mcp__t__fail"].ok and "Error executing tool fail" in outputs["mcp__t__fail"].output
    assert "a picture" in outputs["mcp__t__picture"].output and "[image image/png" in outputs["mcp__t__picture"].output
    assert outputs["read_mcp_resource"].output == "hello from a resource"
    assert outputs["list_mcp_resources"].output.startswith("# t\nnote://hello\thello_note")
    first = server.chat_requests[0]
    assert {"mcp__t__echo", "mcp__t__wipe", "list_mcp_resources", "read_mcp_resource",
            "shell"} <= set(_names(first))
    assert "MCP-INSTRUCTIONS-MARKER" in _system(first)  # the server's instructions, tied to its tools
    # the prompt prefix (system prompt + tool schemas) is byte-identical on every request
    prefixes = {json.dumps([r.body["messages"][0], r.body["tools"]]) for r in server.chat_requests}
    assert len(prefixes) == 1


def test_resource_templates_are_listed_and_a_filled_in_uri_is_read(project, server):
    server.add(Reply(tool_calls=[ToolCall("list_mcp_resource_templates", {}),
                                 ToolCall("list_mcp_resource_templates", {"server": "u"}),
                                 ToolCall("list_mcp_resource_templates", {"server": "nope"})]),
               Reply(tool_calls=[ToolCall("read_mcp_resource", {"server": "t", "uri": "note://by-name/todo"})]),
               Reply(text="done"))
    run, _ = run_mcp(project, server, "templates", servers={"t": STDIO, "u": {**STDIO, "env": {
        "MCP_TEST_SERVER_NAME": "other"}}})
    assert run.ended.reason == "complete"
    assert "list_mcp_resource_templates" in _names(server.chat_requests[0])
    ended = sorted(run.of(ev.ToolCallEnded), key=lambda e: [c.call_id for c in run.of(ev.ToolCallStarted)].index(
        e.call_id))  # read-only calls run at once: in the order they were made
    row = "note://by-name/{name}\tnamed_note\ttext/plain\tA note named in its uri."
    assert ended[0].ok and ended[0].output == f"# t\n{row}\n\n# u\n{row}"
    assert ended[1].ok and ended[1].output == f"# u\n{row}"
    assert not ended[2].ok and "no MCP server named 'nope'" in ended[2].output
    assert ended[3].ok and ended[3].output == "the note named todo"


def test_trust_modes_see_the_effects_the_annotations_declare(project, server):
    server.add(Reply(tool_calls=[ToolCall("mcp__t__echo", {"text": "ok"}), ToolCall("mcp__t__add", {"a": 1, "b": 1}),
                                 ToolCall("mcp__t__wipe", {"target": "all"})]), Reply(text="done"))
    run, _ = run_mcp(project, server, "go", servers={"t": STDIO}, overrides=())
    echo, add, wipe = run.of(ev.ToolCallEnded)
    assert echo.ok  # read-only: runs headless
    assert not add.ok and "local mutation needs the user's approval" in add.output
    assert not wipe.ok and "Not run" in wipe.output


def test_catalog_is_not_rebuilt_across_turns_and_once_after_a_runtime_add(project, server):
    counts = []

    def note(session, event):
        if isinstance(event, ev.TurnEnded):
            counts.append(session.runtime.router.rebuilds)
            if len(counts) == 2:
                session.submit(AddMcpServer("late", STDIO))

    server.add(Reply(text="one"), Reply(text="two"), Reply(tool_calls=[ToolCall("mcp__late__echo", {"text": "x"})]),
               Reply(text="three"))
    run, _ = run_mcp(project, server, "a", "b", "c", on_event=note)
    assert counts[0] == counts[1], "nothing changed between turns, yet the catalog was rendered again"
    assert counts[2] == counts[1] + 1, "a runtime add renders the catalog exactly once"
    assert "mcp__late__echo" not in _names(server.chat_requests[1])
    assert "mcp__late__echo" in _names(server.chat_requests[2])
    assert [e.output for e in run.of(ev.ToolCallEnded)] == ["echo: x"]


def test_a_session_without_mcp_servers_never_imports_the_sdk(project, server, tmp_path):
    script = f"""
import asyncio, sys
sys.path.insert(0, {str(ROOT)!r})
from tests.support.harness import make_config, run_session
from tests.support.mock_openai import MockChatServer, Reply
from pathlib import Path
with MockChatServer() as srv:
    srv.add(Reply(text="hi"))
    run = run_session(Path({str(project)!r}), srv, "hello")
    assert run.ended.reason == "complete"
print(sorted(m for m in sys.modules if m == "mcp" or m.startswith(("mcp.", "mcp_types"))))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         env={"AUGER_HOME": str(tmp_path / "h"), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_a_server_crash_mid_session_is_reported_and_the_next_call_restarts_it(project, server):
    server.add(Reply(tool_calls=[ToolCall("mcp__t__crash", {})]),
               Reply(tool_calls=[ToolCall("read_file", {"path": "nothing.txt"}), ToolCall("mcp__t__echo", {"text": "back"})]),
               Reply(text="done"))
    run, _ = run_mcp(project, server, "crash it", servers={"t": STDIO})
    crash, other, echo = run.of(ev.ToolCallEnded)
    assert not crash.ok and "failed during crash" in crash.output and "started again" in crash.output
    assert any("failed during crash" in w.message for w in run.of(ev.WarningEvent))
    assert other.name == "read_file"  # every other tool keeps working
    assert echo.ok and echo.output == "echo: back"
    assert run.ended.reason == "complete"


def test_a_slow_call_past_the_timeout_is_an_error_and_the_server_answers_again(project, server):
    slow = {**STDIO, "tool_timeout": 1}
    server.add(Reply(tool_calls=[ToolCall("mcp__t__slow", {"seconds": 30})]),
               Reply(tool_calls=[ToolCall("mcp__t__echo", {"text": "alive"})]), Reply(text="done"))
    started = time.monotonic()
    run, _ = run_mcp(project, server, "be slow", servers={"t": slow})
    assert time.monotonic() - started < 25
    late, echo = run.of(ev.ToolCallEnded)
    assert not late.ok and "did not answer slow within 1 s" in late.output
    assert echo.ok and echo.output == "echo: alive"


def test_a_server_that_fails_to_start_is_a_warning_and_the_session_works(project, server):
    broken = {"command": sys.executable, "args": ["-c", "import sys; print('boom', file=sys.stderr); sys.exit(1)"]}
    server.add(Reply(text="fine"))
    run, _ = run_mcp(project, server, "hi", servers={"bad": broken, "t": STDIO})
    assert run.ended.reason == "complete"
    warnings = [w.message for w in run.of(ev.WarningEvent)]
    assert any("'bad'" in w and "could not be started" in w and "boom" in w for w in warnings), warnings
    assert "mcp__t__echo" in _names(server.chat_requests[0])
    server.add(Reply(text="fine"))
    run_mcp(project, server, "hi", servers={"bad": broken})
    assert "list_mcp_resources" not in _names(server.chat_requests[-1])  # no server with resources: not offered


def test_list_changed_refreshes_the_catalog_at_the_next_model_call(project, server):
    server.add(Reply(tool_calls=[ToolCall("mcp__t__grow", {})]),
               Reply(tool_calls=[ToolCall("mcp__t__extra", {})]), Reply(text="done"))
    run, session = run_mcp(project, server, "grow", servers={"t": STDIO})
    assert "mcp__t__extra" not in _names(server.chat_requests[0])
    assert "mcp__t__extra" in _names(server.chat_requests[1])
    assert [e.output for e in run.of(ev.ToolCallEnded)] == ["grown", "extra ran"]


def test_an_elicitation_is_declined_headless_and_asked_interactively(project, server):
    server.add(Reply(tool_calls=[ToolCall("mcp__t__confirm", {})]), Reply(text="done"))
    run, _ = run_mcp(project, server, "confirm", servers={"t": STDIO})
    assert run.of(ev.ToolCallEnded)[0].output == "elicitation: decline"

    asked = []

    def answer(session, event):
        if isinstance(event, ev.ApprovalRequest):
            asked.append(event.kind)
            if event.kind == "elicitation":
                assert "Really do it?" in event.message and event.form.server == "t"
            session.submit(ApprovalDecision(event.request_id, "cancel" if event.kind == "elicitation" else "approve"))

    server.add(Reply(tool_calls=[ToolCall("mcp__t__confirm", {})]), Reply(text="done"))
    run, _ = run_mcp(project, server, "confirm", servers={"t": STDIO}, interactive=True, on_event=answer)
    assert run.of(ev.ToolCallEnded)[0].output == "elicitation: cancel"
    assert "elicitation" in asked

    def accept(session, event):
        if isinstance(event, ev.ApprovalRequest):
            if event.kind == "elicitation":
                assert event.form.schema["properties"]["ok"]["type"] == "boolean"
                session.submit(ApprovalDecision(event.request_id, "accept", feedback='{"ok": true}'))
            else:
                session.submit(ApprovalDecision(event.request_id, "approve"))

    server.add(Reply(tool_calls=[ToolCall("mcp__t__confirm", {})]), Reply(text="done"))
    run, _ = run_mcp(project, server, "confirm", servers={"t": STDIO}, interactive=True, on_event=accept)
    assert run.of(ev.ToolCallEnded)[0].output == "elicitation: accept ok=True"


def test_remove_takes_the_tools_and_instructions_away(project, server):
    def note(session, event):
        if isinstance(event, ev.TurnEnded):
            session.submit(RemoveMcpServer("t"))

    server.add(Reply(text="one"), Reply(text="two"))
    run_mcp(project, server, "a", "b", servers={"t": STDIO}, on_event=note)
    first, second = server.chat_requests
    assert "mcp__t__echo" in _names(first) and "MCP-INSTRUCTIONS-MARKER" in _system(first)
    assert "mcp__t__echo" not in _names(second) and "MCP-INSTRUCTIONS-MARKER" not in _system(second)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def http_server():
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.mcp_server", "--http", str(port)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port, 20)
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    proc.wait(10)


def test_a_streamable_http_server(project, server, http_server, monkeypatch):
    monkeypatch.setenv("TEST_MCP_TOKEN", "secret")
    server.add(Reply(tool_calls=[ToolCall("mcp__web__echo", {"text": "over http"})]), Reply(text="done"))
    run, _ = run_mcp(project, server, "hi", servers={"web": {"url": http_server, "bearer_token_env": "TEST_MCP_TOKEN",
                                                             "headers": {"X-Test": "1"}}})
    assert [e.output for e in run.of(ev.ToolCallEnded)] == ["echo: over http"]


def test_an_untrusted_stdio_server_runs_in_the_session_sandbox(project, server, tmp_path):
    """The server is spawned the way shell commands are (policy/confinement.py): it can read, but cannot
    write outside the project and the scratch dir."""
    outside = tmp_path / "outside.txt"
    # The server's code sits in the project: the sandbox shows the project and auger's interpreter, not
    # the rest of the machine's /tmp, where this checkout may live.
    script = project / "box_server.py"
    script.write_text((ROOT / "tests" / "support" / "mcp_server.py").read_text())
    probe = ("import sys, pathlib\n"
             "try:\n"
             f"    pathlib.Path({str(outside)!r}).write_text('x')\n"
             "    print('WROTE', file=sys.stderr)\n"
             "except OSError as exc:\n"
             "    print('BLOCKED', exc, file=sys.stderr)\n"
             f"import runpy; runpy.run_path({str(script)!r}, run_name='__main__')\n")
    untrusted = {"command": sys.executable, "args": ["-c", probe], "cwd": str(project)}
    server.add(Reply(tool_calls=[ToolCall("mcp__box__echo", {"text": "inside"})]), Reply(text="done"))
    run, session = run_mcp(project, server, "hi", servers={"box": untrusted}, overrides=("approve_all=true",
                                                                                        "sandbox=auto"))
    configured = run.of(ev.SessionConfigured)[0]
    if configured.sandbox == "none":
        pytest.skip(f"no sandbox works on this machine: {[w.message for w in run.of(ev.WarningEvent)]}")
    assert [e.output for e in run.of(ev.ToolCallEnded)] == ["echo: inside"]
    assert not outside.exists()
    # the same server marked trusted runs outside the sandbox, and its write lands
    server.add(Reply(tool_calls=[ToolCall("mcp__box__echo", {"text": "free"})]), Reply(text="done"))
    run, _ = run_mcp(project, server, "hi", servers={"box": {**untrusted, "trusted": True}},
                     overrides=("approve_all=true", "sandbox=auto"))
    assert [e.output for e in run.of(ev.ToolCallEnded)] == ["echo: free"]
    assert outside.read_text() == "x"


def test_an_interrupt_during_a_call_ends_the_turn_and_the_server_serves_the_next_one(project, server):
    from auger.protocol.ops import Interrupt

    def interrupt(session, event):
        if isinstance(event, ev.ToolCallStarted) and event.name == "mcp__t__slow":
            session.submit(Interrupt())

    server.add(Reply(tool_calls=[ToolCall("mcp__t__slow", {"seconds": 30})]),
               Reply(tool_calls=[ToolCall("mcp__t__echo", {"text": "next"})]), Reply(text="done"))
    started = time.monotonic()
    run, _ = run_mcp(project, server, "slow", "again", servers={"t": STDIO}, on_event=interrupt)
    assert time.monotonic() - started < 20
    first, second = run.of(ev.TurnEnded)
    assert first.reason == "cancelled" and second.reason == "complete"
    assert [e.output for e in run.of(ev.ToolCallEnded) if e.name == "mcp__t__echo"] == ["echo: next"]


def test_a_server_that_hangs_at_start_up_is_given_up_after_its_timeout(project, server):
    hung = {"command": sys.executable, "args": ["-c", "import sys, time; print('thinking', file=sys.stderr, "
                                                      "flush=True); time.sleep(60)"], "startup_timeout": 1}
    server.add(Reply(tool_calls=[ToolCall("mcp__hung__anything", {})]), Reply(text="fine"))
    started = time.monotonic()
    run, _ = run_mcp(project, server, "hi", servers={"hung": hung})
    assert time.monotonic() - started < 8
    warnings = [w.message for w in run.of(ev.WarningEvent)]
    assert any("'hung' did not start within 1 s" in w and "thinking" in w for w in warnings), warnings
    assert "there is no tool named" in run.of(ev.ToolCallEnded)[0].output  # it never listed any
    assert run.ended.reason == "complete"


def test_what_a_server_says_is_capped_before_it_reaches_the_prompt():
    from types import SimpleNamespace

    from auger.tools.mcp import MAX_DESCRIPTION, _describe

    tool = SimpleNamespace(name="t", title=None, description="x" * (MAX_DESCRIPTION + 500))
    text = _describe("srv", tool)
    assert len(text) < MAX_DESCRIPTION + 100 and "[cut: 500 more characters]" in text
    assert _describe("srv", SimpleNamespace(name="t", title=None, description="short")) == \
        "short\n(from MCP server 'srv')"
