"""A plain `pip install auger` (no extras): each feature that needs an extra says so in one line naming the
`pip install 'auger[…]'` to run, never a traceback, and whatever can go on without it goes on.

Every test runs the real `auger` in the `plain_python` venv (tests/support/plain_venv.py: auger and its
core dependencies only, none of the extras importable) against the mock model server. web_fetch's page
reading without the `web` extra is tested in test_web_fetch.py.
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support.harness import auger_cli, json_events
from tests.support.mock_openai import MockChatServer, Reply, ToolCall

ACP_AGENT = Path(__file__).parent / "support" / "acp_agent.py"


def _one_line(stderr: str, extra: str) -> str:
    """The command's stderr is the one line naming the extra to install."""
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and f"pip install 'auger[{extra}]'" in lines[0], stderr
    return lines[0]


def _exec(plain_python: Path, server: MockChatServer, project: Path, home: Path, *args: str, env=None):
    return auger_cli("exec", "--base-url", server.base_url, "-m", "mock-model", "-c", "generate_titles=false", *args,
                     home=home, cwd=project, env=env, python=plain_python)


def test_an_mcp_server_is_added_with_a_warning_and_a_session_runs_without_it(plain_python, project, auger_home):
    added = auger_cli("mcp", "add", "files", "--", sys.executable, "-m", "tests.support.mcp_server",
                      home=auger_home, python=plain_python)
    assert added.returncode == 0 and "added MCP server 'files'" in added.stdout
    assert _one_line(added.stderr, "mcp").startswith("auger: warning: ")
    assert tomllib.loads((auger_home / "config.toml").read_text())["mcp_servers"]["files"]["command"] == sys.executable

    with MockChatServer([Reply(text="done"), Reply(text="done again")]) as server:
        plain = _exec(plain_python, server, project, auger_home, "hi")
        as_json = _exec(plain_python, server, project, auger_home, "--json", "hi")
        offered = [{t["function"]["name"] for t in request.body["tools"]} for request in server.chat_requests]
    assert plain.returncode == 0 and plain.stdout == "done\n", plain.stderr
    assert "MCP server 'files' not started" in _one_line(plain.stderr, "mcp")
    assert as_json.returncode == 0 and as_json.stderr == "", as_json.stderr
    warnings = [e["message"] for e in json_events(as_json.stdout) if e["type"] == "warning"]
    assert len(warnings) == 1 and "pip install 'auger[mcp]'" in warnings[0]
    for names in offered:  # what needs the SDK is not offered: no server's tools, no resource tools
        assert "read_file" in names and not [n for n in names if n.startswith("mcp__") or "mcp_resource" in n]


def test_auger_mcp_server_needs_the_mcp_extra(plain_python, auger_home):
    result = auger_cli("mcp-server", home=auger_home, python=plain_python, input="")
    assert result.returncode == 2
    assert _one_line(result.stderr, "mcp") == \
        "auger: error: `auger mcp-server` needs the mcp extra, which is not installed: pip install 'auger[mcp]'"


def test_auger_acp_and_another_agent_as_backend_need_the_acp_extra(plain_python, project, auger_home):
    (auger_home / "config.toml").write_text(
        f'[backends.scripted]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(ACP_AGENT))}]\n')
    acp = auger_cli("acp", home=auger_home, cwd=project, python=plain_python, input="")
    assert acp.returncode == 2 and "`auger acp` needs the acp extra" in _one_line(acp.stderr, "acp")
    with MockChatServer([Reply(text="never asked")]) as server:
        backend = _exec(plain_python, server, project, auger_home, "--backend", "scripted", "hi")
        assert not server.chat_requests
    assert backend.returncode == 2
    assert "backend 'scripted' cannot run" in _one_line(backend.stderr, "acp")
    listing = auger_cli("backends", "--json", home=auger_home, cwd=project, python=plain_python)
    rows = {row["name"]: row for row in map(json.loads, listing.stdout.splitlines())}
    assert rows["scripted"]["status"] == "error" and "pip install 'auger[acp]'" in rows["scripted"]["detail"]


def test_auger_serve_needs_the_server_extra(plain_python, project, auger_home):
    result = auger_cli("serve", "--port", "0", home=auger_home, cwd=project, python=plain_python)
    assert result.returncode == 2 and "`auger serve` needs the server extra" in _one_line(result.stderr, "server")


@pytest.mark.parametrize("command", [
    ("exec", "hi"), ("sessions",), ("db", "migrate"), ("worker",), ("submit", "--repo", ".", "do it"),
    ("tasks", "list")])
def test_a_postgresql_database_and_the_fleet_need_the_postgres_extra(plain_python, project, auger_home, command):
    model = ["--base-url", "http://127.0.0.1:9/v1", "-m", "mock-model"] if command[0] == "exec" else []
    result = auger_cli(*command, "--db", "postgresql://auger@127.0.0.1:9/auger", *model, home=auger_home, cwd=project,
                       python=plain_python)
    assert result.returncode == 2
    assert "needs the postgres extra" in _one_line(result.stderr, "postgres")


def test_telemetry_configured_without_the_otel_extra_is_a_warning_and_the_session_runs(plain_python, project,
                                                                                         auger_home):
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    with MockChatServer([Reply(text="answered"), Reply(text="answered")]) as server:
        plain = _exec(plain_python, server, project, auger_home, "hi", env=env)
        as_json = _exec(plain_python, server, project, auger_home, "--json", "hi", env=env)
    assert plain.returncode == 0 and plain.stdout == "answered\n", plain.stderr
    assert "telemetry needs the otel extra" in _one_line(plain.stderr, "otel")
    events = json_events(as_json.stdout)
    assert [e["message"] for e in events if e["type"] == "warning" and "auger[otel]" in e["message"]]
    assert events[-1]["type"] == "shutdown_complete"


def test_every_optional_extra_is_known_and_absent_from_the_plain_install(plain_python):
    """auger/extras.py names each extra of pyproject.toml (bar `dev`), and the fixture's venv lacks each."""
    from auger.extras import EXTRAS
    from tests.support.plain_venv import PYPROJECT, modules_missing

    with PYPROJECT.open("rb") as f:
        optional = set(tomllib.load(f)["project"]["optional-dependencies"]) - {"dev"}
    assert optional == set(EXTRAS)
    modules = tuple({name for names in EXTRAS.values() for name in names})
    assert all(modules_missing(plain_python, modules).values())


def test_repo_map_and_code_nav_by_name_need_the_lsp_extra(plain_python, project, auger_home):
    """Without the lsp extra, repo_map and code_nav's tree-sitter answer say so in one line (a language
    server, a program of its own, needs no extra); the session goes on."""
    (project / "a.py").write_text("def f():\n    return 1\n")
    nav = {"op": "references", "symbol": "f", "path": "a.py"}
    config = "[lsp.ruff]\ndisabled = true\n[lsp.basedpyright]\ndisabled = true\n[lsp.pyright]\ndisabled = true\n"
    (auger_home / "config.toml").write_text(config)
    with MockChatServer([Reply(tool_calls=[ToolCall("repo_map", {}), ToolCall("code_nav", nav)]),
                         Reply(text="done")]) as server:
        result = _exec(plain_python, server, project, auger_home, "--json", "map it")
    assert result.returncode == 0, result.stderr
    outputs = [e["output"] for e in json_events(result.stdout) if e["type"] == "tool_call_ended"]
    assert len(outputs) == 2 and all("pip install 'auger[lsp]'" in output for output in outputs), outputs
    assert all("Traceback" not in output and len(output.splitlines()) == 1 for output in outputs), outputs
