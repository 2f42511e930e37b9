"""`auger acp` end to end: the real command as a subprocess, driven by the ACP SDK's client side over
its stdio, against the loopback mock model server. The test editor below answers fs/terminal
requests itself (keeping its own buffers, running terminals as real processes), so each test can
tell what went through the editor from what touched the disk."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

acp = pytest.importorskip("acp", reason="the agent-client-protocol SDK (the `acp` extra) is not installed")
from acp import RequestError, spawn_agent_process, text_block  # noqa: E402
from acp.schema import (  # noqa: E402
    AllowedOutcome, ClientCapabilities, CreateTerminalResponse, DeniedOutcome, FileSystemCapabilities,
    ReadTextFileResponse, RequestPermissionResponse, TerminalExitStatus, TerminalOutputResponse,
    WaitForTerminalExitResponse, WriteTextFileResponse,
)

from tests.support.harness import FAST  # noqa: E402
from tests.support.mock_openai import MockChatServer, Reply, ToolCall  # noqa: E402

TIMEOUT = 60


class Editor:
    """The client side: records every update and request, keeps buffers, runs terminals for real."""

    def __init__(self, answers: list[str] | None = None) -> None:
        self.updates: list[Any] = []
        self.permissions: list[tuple[Any, list[Any]]] = []
        self.answers = list(answers or [])  # option ids to choose, in order ("cancelled" cancels)
        self.buffers: dict[str, str] = {}  # path -> unsaved text
        self.reads: list[str] = []
        self.writes: list[tuple[str, str]] = []
        self.terminals: dict[str, tuple[asyncio.subprocess.Process, bytearray, asyncio.Task]] = {}
        self.commands: list[tuple[str, list[str], str | None]] = []

    def of(self, kind: str) -> list[Any]:
        return [u for u in self.updates if u.session_update == kind]

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any],
                                 **kwargs: Any) -> RequestPermissionResponse:
        self.permissions.append((tool_call, options))
        answer = self.answers.pop(0)
        if answer == "cancelled":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(option_id=answer, outcome="selected"))

    async def read_text_file(self, session_id: str, path: str, line: int | None = None, limit: int | None = None,
                             **kwargs: Any) -> ReadTextFileResponse:
        self.reads.append(path)
        return ReadTextFileResponse(content=self.buffers[path] if path in self.buffers else Path(path).read_text())

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> WriteTextFileResponse:
        self.writes.append((path, content))
        self.buffers[path] = content
        return WriteTextFileResponse()

    async def create_terminal(self, session_id: str, command: str, args: list[str] | None = None, env: Any = None,
                              cwd: str | None = None, output_byte_limit: int | None = None,
                              **kwargs: Any) -> CreateTerminalResponse:
        self.commands.append((command, list(args or []), cwd))
        proc = await asyncio.create_subprocess_exec(command, *(args or []), cwd=cwd, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.STDOUT, start_new_session=True)
        output = bytearray()

        async def pump() -> None:
            assert proc.stdout is not None
            while chunk := await proc.stdout.read(4096):
                output.extend(chunk)

        terminal_id = f"term-{len(self.terminals) + 1}"
        self.terminals[terminal_id] = (proc, output, asyncio.create_task(pump()))
        return CreateTerminalResponse(terminal_id=terminal_id)

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str, **kwargs: Any):
        proc, _, pump = self.terminals[terminal_id]
        await proc.wait()
        await pump
        return WaitForTerminalExitResponse(exit_code=proc.returncode)

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> TerminalOutputResponse:
        proc, output, _ = self.terminals[terminal_id]
        status = TerminalExitStatus(exit_code=proc.returncode) if proc.returncode is not None else None
        return TerminalOutputResponse(output=output.decode(), truncated=False, exit_status=status)

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> None:
        proc = self.terminals[terminal_id][0]
        if proc.returncode is None:
            os.killpg(proc.pid, 9)

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> None:
        await self.kill_terminal(session_id, terminal_id)


EDITOR_CAPS = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True)


@asynccontextmanager
async def auger_acp(project: Path, server: MockChatServer, editor: Editor, home: Path, *extra: str,
                    caps: ClientCapabilities | None = None):
    """`auger acp` as the editor starts it; yields the initialized connection and the initialize response."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUGER_", "OPENAI_"))}
    env.update({"AUGER_HOME": str(home), "OPENAI_API_KEY": "sk-test"})
    overrides = [arg for o in FAST for arg in ("-c", o)]
    async with spawn_agent_process(editor, sys.executable, "-m", "auger", "acp", "--base-url", server.base_url,
                                   "--model", "mock-model", *overrides, *extra, cwd=project, env=env) as (conn, proc):
        init = await asyncio.wait_for(conn.initialize(protocol_version=1, client_capabilities=caps), TIMEOUT)
        yield conn, init
    assert proc.returncode == 0  # the SDK closed its stdin: auger shut its sessions down and exited cleanly


def run(coro) -> Any:
    return asyncio.run(asyncio.wait_for(coro, TIMEOUT * 2))


def tool_messages(server: MockChatServer) -> list[str]:
    return [m["content"] for m in server.chat_requests[-1].messages if m["role"] == "tool"]


# -- initialize ---------------------------------------------------------------------------------------


def test_initialize_states_capabilities_and_negotiates_version(project, server, isolated_home):
    async def main():
        editor = Editor()
        started = time.monotonic()
        async with auger_acp(project, server, editor, isolated_home) as (conn, init):
            elapsed = time.monotonic() - started
            print(f"\nauger acp: spawn to initialize response {elapsed * 1000:.0f} ms")
            caps = init.agent_capabilities
            assert init.protocol_version == 1
            assert caps.load_session is True
            assert caps.prompt_capabilities.image and caps.prompt_capabilities.embedded_context
            assert not caps.prompt_capabilities.audio
            assert caps.mcp_capabilities.http and caps.mcp_capabilities.sse
            assert init.auth_methods == []
            assert init.agent_info.name == "auger"
        async with auger_acp(project, server, editor, isolated_home) as (conn, _):
            later = await conn.initialize(protocol_version=7)
            assert later.protocol_version == 1  # the version auger speaks; the client decides

    run(main())


def test_hostile_cwd_and_unknown_ids_are_refused(project, server, isolated_home):
    async def main():
        async with auger_acp(project, server, Editor(), isolated_home) as (conn, _):
            for cwd in ("relative/dir", str(project / "missing"), "/tmp/\x00x"):
                with pytest.raises(RequestError) as refused:
                    await conn.new_session(cwd=cwd, mcp_servers=[])
                assert "cwd" in str(refused.value.data)
            with pytest.raises(RequestError, match="Invalid params"):
                await conn.load_session(cwd=str(project), session_id="../../etc", mcp_servers=[])
            with pytest.raises(RequestError) as unknown:
                await conn.prompt(session_id="nope", prompt=[text_block("hi")])
            assert "no open session" in str(unknown.value.data)

    run(main())


# -- a prompt with tools through the editor ------------------------------------------------------------


def test_prompt_streams_tools_and_routes_files_and_terminal_through_the_editor(project, server, isolated_home,
                                                                               tmp_path):
    (project / "notes.txt").write_text("hello on disk\n")
    (tmp_path / "secret.txt").write_text("outside the project\n")
    notes = str(project / "notes.txt")
    server.add(
        Reply(reasoning="Let me look.", tool_calls=[ToolCall("read_file", {"path": "notes.txt"})]),
        Reply(tool_calls=[ToolCall("read_file", {"path": "../secret.txt"})]),
        Reply(tool_calls=[ToolCall("edit_file", {"path": "notes.txt", "old_string": "hello",
                                                 "new_string": "goodbye"})]),
        Reply(tool_calls=[ToolCall("shell", {"command": "echo ran > ran.txt && echo done-running"})]),
        Reply(tool_calls=[ToolCall("update_plan", {"plan": [{"step": "edit notes", "status": "completed"},
                                                            {"step": "ship", "status": "pending"}]})]),
        Reply(text="All done."),
    )
    editor = Editor(answers=["approve", "approve"])
    editor.buffers[notes] = "hello from the unsaved buffer\n"

    async def main():
        async with auger_acp(project, server, editor, isolated_home, caps=EDITOR_CAPS) as (conn, _):
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            assert session.modes.current_mode_id == "safe"
            assert {m.id for m in session.modes.available_modes} == {"plan", "safe", "auto"}
            return await conn.prompt(session_id=session.session_id, prompt=[text_block("tidy the notes")])

    response = run(main())
    assert response.stop_reason == "end_turn"
    # reads and writes went through the editor's buffer, never to the disk
    assert editor.reads == [notes, notes]
    assert editor.writes == [(notes, "goodbye from the unsaved buffer\n")]
    assert (project / "notes.txt").read_text() == "hello on disk\n"
    assert not any("secret" in path for path in editor.reads)
    first_read = server.chat_requests[1].messages[-1]["content"]
    assert "hello from the unsaved buffer" in first_read
    # the command ran in the editor's terminal, approved first
    assert len(editor.commands) == 1 and editor.commands[0][1][-1].startswith("echo ran")
    assert editor.commands[0][2] == str(project)
    assert (project / "ran.txt").read_text() == "ran\n"
    assert "done-running" in tool_messages(server)[-2]
    # the update stream
    assert "".join(u.content.text for u in editor.of("agent_thought_chunk")) == "Let me look."
    assert "".join(u.content.text for u in editor.of("agent_message_chunk")).strip() == "All done."
    starts = {u.tool_call_id: u for u in editor.of("tool_call")}
    kinds = [u.kind for u in starts.values()]
    assert kinds == ["read", "read", "edit", "execute", "think"]
    read_start = next(iter(starts.values()))
    assert read_start.locations[0].path == notes
    edit_start = [u for u in starts.values() if u.kind == "edit"][0]
    diff = edit_start.content[0]
    assert (diff.type, diff.path, diff.old_text, diff.new_text) == ("diff", notes, "hello", "goodbye")
    ends = {u.tool_call_id: u for u in editor.of("tool_call_update") if u.status in ("completed", "failed")}
    assert [ends[c].status for c in starts] == ["completed", "failed", "completed", "completed", "completed"]
    shell_id = [c for c, u in starts.items() if u.kind == "execute"][0]
    assert any(c.type == "terminal" and c.terminal_id == "term-1" for c in ends[shell_id].content)
    plan = editor.of("plan")[-1]
    assert [(e.content, e.status) for e in plan.entries] == [("edit notes", "completed"), ("ship", "pending")]
    assert editor.of("available_commands_update")
    # permission requests: the edit and the command, each with the tool call attached
    assert [call.tool_call_id for call, _ in editor.permissions] == [
        [c for c, u in starts.items() if u.kind == "edit"][0], shell_id]
    kinds_offered = {o.kind for o in editor.permissions[1][1]}
    assert kinds_offered == {"allow_once", "allow_always", "reject_once", "reject_always"}


def test_read_only_commands_stay_local_and_hostile_workdir_never_reaches_the_editor(project, server,
                                                                                   isolated_home):
    server.add(
        Reply(tool_calls=[ToolCall("shell", {"command": "ls"})]),
        Reply(tool_calls=[ToolCall("shell", {"command": "touch x", "workdir": "../.."})]),
        Reply(tool_calls=[ToolCall("write_file", {"path": "/etc/evil", "content": "x"})]),
        Reply(text="ok"),
    )
    editor = Editor(answers=["approve", "approve"])

    async def main():
        async with auger_acp(project, server, editor, isolated_home, "--mode", "auto", caps=EDITOR_CAPS) as (conn, _):
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            return await conn.prompt(session_id=session.session_id, prompt=[text_block("go")])

    assert run(main()).stop_reason == "end_turn"
    assert editor.commands == []  # `ls` ran locally (read-only sandbox); the escape was refused
    assert editor.writes == []
    outputs = tool_messages(server)
    assert "Exit code: 0" in outputs[0]
    assert "outside" in outputs[1] or "escape" in outputs[1].lower() or "not" in outputs[1]
    assert "Error" in outputs[2] or "Not run" in outputs[2] or "refused" in outputs[2].lower()


# -- permissions -------------------------------------------------------------------------------------


def test_reject_once_and_reject_always(project, server, isolated_home):
    server.add(
        Reply(tool_calls=[ToolCall("shell", {"command": "touch first"})]),
        Reply(tool_calls=[ToolCall("shell", {"command": "touch second"})]),
        Reply(tool_calls=[ToolCall("shell", {"command": "touch second"})]),
        Reply(text="gave up"),
    )
    editor = Editor(answers=["deny", "reject_always"])

    async def main():
        async with auger_acp(project, server, editor, isolated_home) as (conn, _):
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            return await conn.prompt(session_id=session.session_id, prompt=[text_block("touch files")])

    assert run(main()).stop_reason == "end_turn"
    assert not (project / "first").exists() and not (project / "second").exists()
    assert len(editor.permissions) == 2  # the repeated command was refused without asking again
    outputs = tool_messages(server)
    assert all("denied" in out for out in outputs)
    assert "rest of the session" in outputs[2]
    ends = [u for u in editor.of("tool_call_update") if u.status]
    assert [u.status for u in ends] == ["failed", "failed", "failed"]


def test_allow_for_the_session_is_not_asked_again(project, server, isolated_home):
    server.add(
        Reply(tool_calls=[ToolCall("shell", {"command": "touch made"})]),
        Reply(tool_calls=[ToolCall("shell", {"command": "touch made"})]),
        Reply(text="made"),
    )
    editor = Editor(answers=["approve_session"])

    async def main():
        async with auger_acp(project, server, editor, isolated_home) as (conn, _):
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            return await conn.prompt(session_id=session.session_id, prompt=[text_block("make it")])

    assert run(main()).stop_reason == "end_turn"
    assert len(editor.permissions) == 1
    assert (project / "made").exists()


# -- cancel, errors, modes ------------------------------------------------------------------------------


def test_cancel_mid_turn_ends_the_prompt_cancelled(project, server, isolated_home):
    server.add(Reply(text="far too slow", delay=30), Reply(text="after the cancel"))
    editor = Editor()

    async def main():
        async with auger_acp(project, server, editor, isolated_home) as (conn, _):
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            sid = session.session_id
            prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("slow one")]))
            while not server.chat_requests:  # the model call is under way (the window probe comes first)
                await asyncio.sleep(0.05)
            started = time.monotonic()
            await conn.cancel(session_id=sid)
            first = await prompt
            took = time.monotonic() - started
            second = await conn.prompt(session_id=sid, prompt=[text_block("again")])
            return first, took, second

    first, took, second = run(main())
    assert first.stop_reason == "cancelled"
    assert took < 10
    assert second.stop_reason == "end_turn"
    assert "after the cancel" in "".join(u.content.text for u in editor.of("agent_message_chunk"))


def test_cancel_stops_the_turn_but_not_background_agents_which_end_with_the_session(project, server,
                                                                                    isolated_home):
    from tests.support.agents import WAIT_FOR_FILE, Routes, pids_of, spawn
    from tests.support.harness import dies_soon, process_alive

    Routes({
        "start": [Reply(tool_calls=[spawn("run it", background=True)]),
                  Reply(tool_calls=[ToolCall("shell", {"command": WAIT_FOR_FILE.format("bg.pid")})]),
                  Reply(text="far too slow", delay=30), Reply(text="yes, still")],
        "run it": [Reply(tool_calls=[ToolCall("shell", {"command": "echo $$ > bg.pid; exec sleep 67.5"})])],
    }).install(server)

    async def main():
        async with auger_acp(project, server, Editor(), isolated_home, "--mode", "auto") as (conn, _):
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            sid = session.session_id
            prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("start")]))
            while len(server.chat_requests) < 4:  # the parent's slow reply is under way
                await asyncio.sleep(0.05)
            pids = pids_of("sleep 67.5")
            await conn.cancel(session_id=sid)  # mid-turn
            first = await prompt
            await conn.cancel(session_id=sid)  # with no prompt running
            second = await conn.prompt(session_id=sid, prompt=[text_block("still there?")])
            alive = [pid for pid in pids if process_alive(pid)]
            await conn.close_session(session_id=sid)
            return first, second, pids, alive

    first, second, pids, alive = run(main())
    assert first.stop_reason == "cancelled" and second.stop_reason == "end_turn"
    assert len(pids) == 1 and alive == pids, "session/cancel killed a background agent's command"
    assert dies_soon(pids[0]), "a background agent's command outlived its session"


def test_a_failed_turn_is_an_error_response_and_the_agent_keeps_serving(project, server, isolated_home):
    from tests.support.mock_openai import Fault

    server.add(Fault.status(401), Reply(text="fine now"))

    async def main():
        async with auger_acp(project, server, Editor(), isolated_home) as (conn, _):
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            with pytest.raises(RequestError) as failed:
                await conn.prompt(session_id=session.session_id, prompt=[text_block("one")])
            again = await conn.prompt(session_id=session.session_id, prompt=[text_block("two")])
            return failed.value, again

    error, again = run(main())
    assert error.code == -32603 and "401" in str(error.data) or "key" in str(error.data).lower()
    assert again.stop_reason == "end_turn"


def test_set_mode_switches_and_refuses_unknown_modes(project, server, isolated_home):
    (project / ".auger" / "prompts").mkdir(parents=True)
    (project / ".auger" / "prompts" / "review.md").write_text("---\ndescription: review a diff\n---\nReview $1\n")
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "new.txt", "content": "x"})]), Reply(text="ok"))
    editor = Editor()

    async def main():
        async with auger_acp(project, server, editor, isolated_home) as (conn, _):
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            sid = session.session_id
            with pytest.raises(RequestError):
                await conn.set_session_mode(session_id=sid, mode_id="root")
            await conn.set_session_mode(session_id=sid, mode_id="plan")
            return await conn.prompt(session_id=sid, prompt=[text_block("write a file")])

    assert run(main()).stop_reason == "end_turn"
    assert [u.current_mode_id for u in editor.of("current_mode_update")] == ["plan"]
    commands = editor.of("available_commands_update")[0].available_commands
    assert [(c.name, c.description) for c in commands] == [("review", "review a diff")]
    assert not (project / "new.txt").exists()
    assert editor.permissions == []  # plan mode refuses, it does not ask
    assert "plan" in tool_messages(server)[0]


# -- load ---------------------------------------------------------------------------------------------


def test_load_session_replays_the_stored_conversation(project, server, isolated_home):
    (project / "a.txt").write_text("alpha\n")
    server.add(
        Reply(tool_calls=[ToolCall("read_file", {"path": "a.txt"})]),
        Reply(text="It says alpha."),
        Reply(text="Still here."),
    )

    async def main():
        async with auger_acp(project, server, Editor(), isolated_home) as (conn, _):
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            await conn.prompt(session_id=session.session_id, prompt=[text_block("what is in a.txt?")])
        editor = Editor()
        async with auger_acp(project, server, editor, isolated_home) as (conn, _):
            with pytest.raises(RequestError):  # another project's cwd
                await conn.load_session(cwd=str(project.parent), session_id=session.session_id, mcp_servers=[])
            loaded = await conn.load_session(cwd=str(project), session_id=session.session_id, mcp_servers=[])
            replayed = list(editor.updates)
            more = await conn.prompt(session_id=session.session_id, prompt=[text_block("and now?")])
        return loaded, replayed, more

    loaded, replayed, more = run(main())
    assert loaded.modes.current_mode_id == "safe"
    kinds = [u.session_update for u in replayed]
    assert kinds[:4] == ["user_message_chunk", "tool_call", "tool_call_update", "agent_message_chunk"]
    assert replayed[0].content.text == "what is in a.txt?"
    assert replayed[1].kind == "read" and replayed[2].status == "completed"
    assert "alpha" in replayed[2].content[-1].content.text
    assert replayed[3].content.text == "It says alpha."
    assert more.stop_reason == "end_turn"
    history = [m["content"] for m in server.chat_requests[-1].messages if m["role"] in ("user", "assistant")]
    assert "what is in a.txt?" in history and "It says alpha." in history


# -- MCP servers from the editor, start-up cost ------------------------------------------------------------


def test_mcp_servers_from_the_editor_join_the_session(project, server, isolated_home):
    from acp.schema import EnvVariable, McpServerStdio

    # An editor's stdio server runs in the session sandbox, which shows the project and auger's interpreter,
    # not the rest of /tmp where this checkout may live: the server's code sits in the project.
    script = project / "tools_server.py"
    script.write_text((Path(__file__).resolve().parent / "support" / "mcp_server.py").read_text())
    server.add(Reply(tool_calls=[ToolCall("mcp__tools__echo", {"text": "hi"})]), Reply(text="echoed"))
    editor = Editor()
    servers = [McpServerStdio(name="tools", command=sys.executable, args=[str(script)],
                              env=[EnvVariable(name="MCP_TEST_SERVER_NAME", value="tools")]),
               McpServerStdio(name="../bad name", command="true", args=[], env=[])]

    async def main():
        async with auger_acp(project, server, editor, isolated_home) as (conn, _):
            session = await conn.new_session(cwd=str(project), mcp_servers=servers)
            return await conn.prompt(session_id=session.session_id, prompt=[text_block("echo hi")])

    assert run(main()).stop_reason == "end_turn"
    assert tool_messages(server) == ["echo: hi"]
    said = "".join(u.content.text for u in editor.of("agent_message_chunk"))
    assert "MCP server from the editor not added" in said and "bad name" in said


def test_exec_and_version_never_import_the_acp_sdk_nor_the_web_server(project, server, isolated_home):
    server.add(Reply(text="hi"))
    script = f"""
import sys
from auger.frontends.cli import main
code = main(["exec", "--base-url", {server.base_url!r}, "--model", "mock-model", "-c", "generate_titles=false", "hi"])
print(code, sorted(m for m in sys.modules if m.split(".")[0] in ("acp", "starlette", "uvicorn", "websockets")))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUGER_", "OPENAI_"))}
    env.update({"AUGER_HOME": str(isolated_home), "OPENAI_API_KEY": "sk-test"})
    import subprocess

    out = subprocess.run([sys.executable, "-c", script], cwd=project, env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "0 []"


# -- stop reasons ---------------------------------------------------------------------------------------


def _chunk(delta: dict, finish: str | None = None) -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "mock-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def test_stop_reasons_max_tokens_and_refusal(project, server, isolated_home):
    from tests.support.mock_openai import Raw

    server.add(
        Raw([_chunk({"role": "assistant", "content": "a reply cut sh"}), _chunk({}, "length")]),
        Raw([_chunk({"role": "assistant", "refusal": "I can't help with that."}), _chunk({}, "stop")]),
        Reply(text="plain"),
    )

    async def main():
        async with auger_acp(project, server, Editor(), isolated_home) as (conn, _):
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            sid = session.session_id
            return [(await conn.prompt(session_id=sid, prompt=[text_block(p)])).stop_reason
                    for p in ("long", "bad", "fine")]

    assert run(main()) == ["max_tokens", "refusal", "end_turn"]


def test_cancel_kills_a_command_running_in_the_editors_terminal(project, server, isolated_home):
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "sleep 30 && touch late"})]), Reply(text="next"))
    editor = Editor(answers=["approve"])

    async def main():
        async with auger_acp(project, server, editor, isolated_home, caps=EDITOR_CAPS) as (conn, _):
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            sid = session.session_id
            prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("wait")]))
            while not editor.terminals:
                await asyncio.sleep(0.05)
            started = time.monotonic()
            await conn.cancel(session_id=sid)
            first = await prompt
            proc = editor.terminals["term-1"][0]
            await asyncio.wait_for(proc.wait(), 5)
            return first, time.monotonic() - started, proc.returncode

    first, took, code = run(main())
    assert first.stop_reason == "cancelled"
    assert took < 10 and code is not None and code < 0  # killed, not finished
    assert not (project / "late").exists()


def test_editor_terminals_make_auto_ask_and_can_be_turned_off(project, server, isolated_home):
    """The editor's terminal is outside the sandbox that `auto` relies on: with it, auto asks before a
    change; with --no-editor-terminal, commands stay in auger's sandbox (and never reach the editor)."""
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "touch one"})]), Reply(text="ok"),
               Reply(tool_calls=[ToolCall("shell", {"command": "touch two"})]), Reply(text="ok"))
    with_terminal, without = Editor(answers=["approve"]), Editor(answers=["approve"])

    async def main():
        for editor, extra in ((with_terminal, ()), (without, ("--no-editor-terminal",))):
            async with auger_acp(project, server, editor, isolated_home, "--mode", "auto", *extra,
                                 caps=EDITOR_CAPS) as (conn, _):
                session = await conn.new_session(cwd=str(project), mcp_servers=[])
                await conn.prompt(session_id=session.session_id, prompt=[text_block("touch")])

    run(main())
    assert len(with_terminal.permissions) == 1 and len(with_terminal.commands) == 1
    assert (project / "one").exists()
    assert without.commands == []
    assert (project / "two").exists()


def test_a_permission_request_the_editor_cancels_ends_the_turn(project, server, isolated_home):
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "touch nope"})]), Reply(text="next turn"))
    editor = Editor(answers=["cancelled"])

    async def main():
        async with auger_acp(project, server, editor, isolated_home) as (conn, _):
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            first = await conn.prompt(session_id=session.session_id, prompt=[text_block("touch")])
            second = await conn.prompt(session_id=session.session_id, prompt=[text_block("again")])
            return first.stop_reason, second.stop_reason

    assert run(main()) == ("cancelled", "end_turn")
    assert not (project / "nope").exists()
    assert len(server.chat_requests) == 2  # no model call after the abort, then the next turn's


def test_the_model_is_a_session_config_option(project, server, isolated_home):
    (isolated_home / "config.toml").write_text("[providers.openai-compatible.models.mock-model]\n"
                                               "[providers.openai-compatible.models.mock-large]\n")
    server.add(Reply(text="small"), Reply(text="large"))

    async def main():
        async with auger_acp(project, server, Editor(), isolated_home) as (conn, _):
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            sid = session.session_id
            await conn.prompt(session_id=sid, prompt=[text_block("one")])
            for config_id, value in (("model", "gpt-nonexistent"), ("temperature", "1")):
                with pytest.raises(RequestError):
                    await conn.set_config_option(config_id=config_id, session_id=sid, value=value)
            switched = await conn.set_config_option(config_id="model", session_id=sid, value="mock-large")
            await conn.prompt(session_id=sid, prompt=[text_block("two")])
            return session.config_options, switched.config_options

    offered, switched = run(main())
    assert (offered[0].id, offered[0].category, offered[0].current_value) == ("model", "model", "mock-model")
    assert [o.value for o in offered[0].options] == ["mock-model", "mock-large"]
    assert switched[0].current_value == "mock-large"
    assert [r.body["model"] for r in server.chat_requests] == ["mock-model", "mock-large"]


def test_a_sub_agents_turn_does_not_end_the_editors_prompt(project, server, isolated_home):
    (project / "notes.md").write_text("the notes\n")
    server.add(Reply(tool_calls=[ToolCall("spawn_agent", {"prompt": "look at the notes", "agent": "explore"})]),
               Reply(tool_calls=[ToolCall("read_file", {"path": "notes.md"})]),
               Reply(text="CHILD-ANSWER"),
               Reply(text="the parent is done"))
    editor = Editor()

    async def main():
        async with auger_acp(project, server, editor, isolated_home) as (conn, _):
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            return await conn.prompt(session_id=session.session_id, prompt=[text_block("explore")])

    response = run(main())
    assert response.stop_reason == "end_turn"
    said = "".join(u.content.text for u in editor.of("agent_message_chunk"))
    assert "the parent is done" in said and "CHILD-ANSWER" not in said
    titles = [u.title for u in editor.of("tool_call")]
    assert any("notes.md" in t for t in titles) and any("spawn_agent" in t or "explore" in t for t in titles), titles


# -- session list, resume, fork and close --------------------------------------------------------------------


def test_list_pages_the_stored_sessions_and_refuses_a_forged_cursor(project, server, isolated_home, tmp_path):
    import sqlite3

    from auger.protocol.items import AssistantMessage
    from auger.store.base import SessionRecord
    from auger.store.sqlite import SqliteStore

    other = tmp_path / "other-project"
    other.mkdir()

    async def seed() -> None:  # 55 conversations here and 3 in another project, as earlier runs left them
        store = SqliteStore(isolated_home / "sessions.db")
        try:
            for n, where in enumerate([project] * 55 + [other] * 3):
                sid = f"{n:04d}-seeded"
                await store.create_session(SessionRecord(id=sid, created=1000.0 + n, updated=1000.0,
                                                         cwd=str(where.resolve()), provider="openai-compatible",
                                                         model="mock-model", mode="safe", title=f"task {n}"))
                await store.append(sid, "t1", AssistantMessage(text=f"answer {n}"))
        finally:
            await store.aclose()
        with sqlite3.connect(isolated_home / "sessions.db") as db:  # pairs of sessions updated at the same time
            db.execute("UPDATE sessions SET updated = 1000 + CAST(substr(id, 1, 4) AS INTEGER) / 2")

    async def main():
        await seed()
        async with auger_acp(project, server, Editor(), isolated_home) as (conn, init):
            first = await conn.list_sessions(cwd=str(project))
            second = await conn.list_sessions(cwd=str(project), cursor=first.next_cursor)
            everywhere = await conn.list_sessions()
            refused = []
            for cursor in ("not-a-cursor", "nan/x", "1e400/x", "12.5/"):
                with pytest.raises(RequestError) as info:
                    await conn.list_sessions(cursor=cursor)
                refused.append(str(info.value.data))
            with pytest.raises(RequestError):
                await conn.list_sessions(cwd="relative/dir")
            return init, first, second, everywhere, refused

    init, first, second, everywhere, refused = run(main())
    caps = init.agent_capabilities.session_capabilities
    assert caps.list is not None and caps.resume is not None and caps.fork is not None and caps.close is not None
    listed = [s.session_id for s in first.sessions + second.sessions]
    expected = sorted((f"{n:04d}-seeded" for n in range(55)), key=lambda s: (int(s[:4]) // 2, s), reverse=True)
    assert len(first.sessions) == 50 and first.next_cursor and second.next_cursor is None
    assert listed == expected  # newest first, ties by id, no session twice or missing across the pages
    assert all(s.cwd == str(project.resolve()) and s.title and s.updated_at.startswith("1970-01-01T00:")
               for s in first.sessions)
    assert len(everywhere.sessions) == 50 and any(s.cwd == str(other.resolve()) for s in everywhere.sessions)
    assert all("not one this agent gave" in r for r in refused)


def test_resume_fork_and_close_a_session(project, server, isolated_home):
    server.add(Reply(text="The word is heron."), Reply(text="resumed: heron"), Reply(text="forked: heron"),
               Reply(text="source goes on"))

    async def main():
        async with auger_acp(project, server, Editor(), isolated_home) as (conn, _):
            source = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.prompt(session_id=source, prompt=[text_block("remember a word")])
        editor = Editor()
        async with auger_acp(project, server, editor, isolated_home) as (conn, _):
            with pytest.raises(RequestError):
                await conn.resume_session(session_id=source, cwd=str(project.parent))
            resumed = await conn.resume_session(session_id=source, cwd=str(project), mcp_servers=[])
            shown_on_resume = [u.session_update for u in editor.updates]
            await conn.prompt(session_id=source, prompt=[text_block("which word?")])
            forked = await conn.fork_session(session_id=source, cwd=str(project), mcp_servers=[])
            await conn.prompt(session_id=forked.session_id, prompt=[text_block("which word in the fork?")])
            await conn.close_session(session_id=forked.session_id)
            with pytest.raises(RequestError) as closed:
                await conn.prompt(session_id=forked.session_id, prompt=[text_block("still there?")])
            await conn.prompt(session_id=source, prompt=[text_block("and the source?")])
            with pytest.raises(RequestError):
                await conn.fork_session(session_id="no-such-session", cwd=str(project))
            listed = await conn.list_sessions(cwd=str(project))
        return resumed, shown_on_resume, forked, str(closed.value.data), listed, source

    resumed, shown_on_resume, forked, closed, listed, source = run(main())
    assert resumed.modes.current_mode_id == "safe"
    assert "user_message_chunk" not in shown_on_resume and "agent_message_chunk" not in shown_on_resume  # no replay
    conversations = [[m["content"] for m in r.messages if m["role"] in ("user", "assistant")
                      and not m["content"].startswith("<environment_context>")] for r in server.chat_requests]
    assert conversations[1] == ["remember a word", "The word is heron.", "which word?"]
    assert conversations[2] == ["remember a word", "The word is heron.", "which word?", "resumed: heron",
                                "which word in the fork?"]
    assert conversations[3][-2:] == ["resumed: heron", "and the source?"]  # the fork's turn is not the source's
    assert forked.session_id != source and "create or load it first" in closed
    assert {s.session_id for s in listed.sessions} == {source, forked.session_id}


def test_closing_a_session_mid_prompt_ends_the_prompt_and_keeps_what_was_recorded(project, server, isolated_home):
    server.add(Reply(text="far too slow", delay=30), Reply(text="reloaded fine"))

    async def main():
        async with auger_acp(project, server, Editor(), isolated_home) as (conn, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("slow one")]))
            while not server.chat_requests:
                await asyncio.sleep(0.05)
            started = time.monotonic()
            await conn.close_session(session_id=sid)
            ended = await asyncio.wait_for(prompt, TIMEOUT)
            took = time.monotonic() - started
            await conn.load_session(cwd=str(project), session_id=sid, mcp_servers=[])  # closed, not lost
            again = await conn.prompt(session_id=sid, prompt=[text_block("again")])
        return ended, took, again

    ended, took, again = run(main())
    assert ended.stop_reason == "cancelled" and took < 10
    assert again.stop_reason == "end_turn"
    users = [m["content"] for m in server.chat_requests[-1].messages if m["role"] == "user"]
    assert "slow one" in users and "again" in users


def test_a_session_asked_for_twice_at_once_is_opened_once(project, server, isolated_home):
    server.add(Reply(text="first"), Reply(text="after the race"))

    async def main():
        async with auger_acp(project, server, Editor(), isolated_home) as (conn, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[text_block("one")])
            await conn.close_session(session_id=sid)
            outcomes = await asyncio.gather(
                conn.load_session(cwd=str(project), session_id=sid, mcp_servers=[]),
                conn.resume_session(cwd=str(project), session_id=sid, mcp_servers=[]),
                conn.load_session(cwd=str(project), session_id=sid, mcp_servers=[]), return_exceptions=True)
            after = await conn.prompt(session_id=sid, prompt=[text_block("two")])
        return outcomes, after

    outcomes, after = run(main())
    refused = [o for o in outcomes if isinstance(o, RequestError)]
    assert len(refused) == 2 and all("already open" in str(r.data) for r in refused), outcomes
    assert after.stop_reason == "end_turn"
    users = [m["content"] for m in server.chat_requests[-1].messages if m["role"] == "user"]
    assert users.count("one") == 1 and users[-1] == "two"  # one session went on, nothing doubled


# -- interactive processes ---------------------------------------------------------------------------


def test_an_interactive_process_streams_its_output_to_the_editor_as_it_comes(project, server, isolated_home):
    from tests.support.typist import exec_call, typist, write_call

    server.add(*typist([(exec_call("python3 -q -i", tty=True), ">>> "),
                        (write_call("print(6*7)\n"), "42"),
                        (write_call("exit()\n"), "Process exited with code 0")]))
    editor = Editor()

    async def main():
        async with auger_acp(project, server, editor, isolated_home, "--mode", "auto",
                             "-c", "exec_sessions=true") as (conn, _):
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            return await conn.prompt(session_id=session.session_id, prompt=[text_block("use python")])

    assert run(main()).stop_reason == "end_turn"
    starts = {u.tool_call_id: u for u in editor.of("tool_call")}
    assert {u.kind for u in starts.values()} == {"execute"}
    exec_id = next(c for c, u in starts.items() if u.title == "`python3 -q -i`")
    typed_id = next(c for c, u in starts.items() if u.title.startswith("Type into session 1: 'print(6*7)"))
    shown = {}
    for update in editor.of("tool_call_update"):
        if update.status == "in_progress":
            shown[update.tool_call_id] = update.content[0].content.text
    assert ">>>" in shown[exec_id]  # the prompt, while exec_command waited
    assert "42" in shown[typed_id]  # the answer, while write_stdin waited
