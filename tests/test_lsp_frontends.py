"""Where the diagnostics of a change show: typed on `tool_call_ended` in `auger exec --json`, as tool call
content with locations for an ACP editor, under the call in the terminal UI and in the web UI. The server is
tests/support/fake_lsp.py's (every line containing "BROKEN" is an error), so no real one is needed here."""

from __future__ import annotations

import re
import json

import pytest

from auger.protocol import events as ev
from auger.protocol.vocab import Severity
from tests.support.harness import auger_cli, json_events
from tests.support.lsp_servers import fake_command
from tests.support.mock_openai import MockChatServer, Reply, ToolCall

CONFIG = (f'[lsp.fake]\ncommand = {json.dumps(fake_command("pull"))}\nlanguages = ["python"]\n'
          "[lsp.ruff]\ndisabled = true\n[lsp.basedpyright]\ndisabled = true\n[lsp.pyright]\ndisabled = true\n")
BREAK = ToolCall("edit_file", {"path": "app.py", "old_string": "x = 1", "new_string": "x = 1  # BROKEN"})
FOUND = ev.Diagnostic("app.py", 1, 1, Severity.ERROR, "this line is BROKEN", "fake")


def test_auger_exec_json_prints_them_typed(project, auger_home):
    (auger_home / "config.toml").write_text(CONFIG)
    (project / "app.py").write_text("x = 1\n")
    with MockChatServer([Reply(tool_calls=[BREAK]), Reply(text="done")]) as server:
        result = auger_cli("exec", "--json", "--base-url", server.base_url, "-m", "mock-model", "-c",
                           "approve_all=true", "break it", home=auger_home, cwd=project)
    assert result.returncode == 0, result.stderr
    (ended,) = [e for e in json_events(result.stdout) if e["type"] == "tool_call_ended"]
    assert ended["diagnostics"] == [{"path": "app.py", "line": 1, "column": 1, "severity": "error",
                                     "message": "this line is BROKEN", "source": "fake", "code": ""}]
    assert ended["output"].endswith("Diagnostics: this change introduced 1 error:\n"
                                    "app.py:1:1: error: this line is BROKEN (fake)")


def ended_with_problems(output: str = "Edited app.py: 1 replacement.") -> ev.ToolCallEnded:
    text = f"{output}\n\nDiagnostics: this change introduced 1 error:\napp.py:1:1: error: this line is BROKEN (fake)"
    return ev.ToolCallEnded("t", "c1", "edit_file", True, text, 5, diagnostics=[FOUND])


def test_an_editor_gets_them_as_tool_call_content_with_locations(tmp_path):
    pytest.importorskip("acp", reason="the agent-client-protocol SDK (the `acp` extra) is not installed")
    from auger.frontends.acp.updates import UpdateMapper

    mapper = UpdateMapper(tmp_path)
    mapper.updates(ev.ToolCallStarted("t", "c1", "edit_file", BREAK.arguments))
    (update,) = mapper.updates(ended_with_problems())
    texts = [block.content.text for block in update.content if getattr(block, "type", "") == "content"]
    assert texts == ["Edited app.py: 1 replacement.",
                     "Problems this change introduced:\napp.py:1:1: error: this line is BROKEN (fake)"]
    assert [(loc.path, loc.line) for loc in update.locations] == [(str(tmp_path / "app.py"), 1)]


def test_the_terminal_shows_them_under_the_call():
    from auger.frontends.tui.render import Renderer

    renderer = Renderer(100)
    renderer.handle(ev.ToolCallStarted("t", "c1", "edit_file", BREAK.arguments))
    shown = re.sub(r"\x1b\[[0-9;]*m", "", renderer.handle(ended_with_problems()))
    assert "⚠ app.py:1:1 this line is BROKEN (fake)" in shown
    assert "Diagnostics:" not in shown  # told once, as the list


def test_the_web_ui_shows_them_under_the_call(project, server, isolated_home, tmp_path):
    pytest.importorskip("starlette", reason="`auger serve` needs the server extra")
    from tests.support import browser as chromium_support
    from tests.test_webui import Served, open_page, send
    from tests.support.serve import pairing_link, start_process, stop_process

    (isolated_home / "config.toml").write_text(CONFIG)
    (project / "app.py").write_text("x = 1\n")
    server.add(Reply(tool_calls=[BREAK]), Reply(text="done"))
    proc, url, printed = start_process(project, isolated_home, server, tmp_path / "s.db", "--mode", "auto",
                                       "-c", "diagnostics=true")
    served = Served(url, pairing_link(printed), proc)
    try:
        with chromium_support.for_tests() as browser:
            errors: list[str] = []
            page, _ = open_page(browser, served.pair, errors)
            send(page, "break it")
            problem = page.locator(".tool-call .diagnostics li")
            problem.wait_for(timeout=30_000)
            assert problem.locator(".where").inner_text() == "app.py:1:1"
            assert problem.locator(".message").inner_text() == "this line is BROKEN"
            assert errors == []
    finally:
        served.api.close()
        code, stderr = stop_process(served.proc)
        assert code == 0, stderr
