"""`auger mcp add|list|get|remove` edit the user config safely; `auger mcp-server` serves auger over MCP,
driven here by the `mcp` SDK's own client against the mock model."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import tomllib
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tests.support.harness import auger_cli
from tests.support.mock_openai import Reply, ToolCall

ROOT = Path(__file__).resolve().parent.parent


def test_add_list_get_remove_keep_the_rest_of_the_file(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    config = home / "config.toml"
    config.write_text('# my settings\nmodel = "m"\n\n[mcp_servers.old]\ncommand = "old-server"\n\n'
                      '[providers.p]\nbase_url = "http://localhost:1/v1"  # keep me\n')
    out = auger_cli("mcp", "add", "files", "--env", "A=1", "--", "npx", "-y", "pkg", "--flag", home=home)
    assert out.returncode == 0, out.stderr
    out = auger_cli("mcp", "add", "web", "--url", "https://mcp.example.com/mcp", "--header", "X-A=1",
                    "--bearer-token-env", "TOKEN", home=home)
    assert out.returncode == 0, out.stderr
    assert auger_cli("mcp", "remove", "old", home=home).returncode == 0
    text = config.read_text()
    assert text.startswith('# my settings\nmodel = "m"\n') and "# keep me" in text
    data = tomllib.loads(text)
    assert data["mcp_servers"] == {
        "files": {"command": "npx", "args": ["-y", "pkg", "--flag"], "env": {"A": "1"}},
        "web": {"url": "https://mcp.example.com/mcp", "headers": {"X-A": "1"}, "bearer_token_env": "TOKEN"}}
    assert data["providers"]["p"]["base_url"] == "http://localhost:1/v1"
    listing = auger_cli("mcp", "list", home=home, cwd=tmp_path).stdout
    assert "files" in listing and "npx -y pkg --flag" in listing and "web" in listing and "old" not in listing
    assert '"bearer_token_env": "TOKEN"' in auger_cli("mcp", "get", "web", home=home).stdout
    missing = auger_cli("mcp", "remove", "nope", home=home)
    assert missing.returncode == 2 and "no MCP server named 'nope'" in missing.stderr
    bad = auger_cli("mcp", "add", "bad.name", "--", "x", home=home)
    assert bad.returncode == 2 and "letters, digits" in bad.stderr and "Traceback" not in bad.stderr
    assert [p.name for p in home.iterdir()] == ["config.toml"]  # no temp file left behind


def test_a_broken_config_file_is_not_touched(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("model = \n")
    out = auger_cli("mcp", "add", "x", "--", "cmd", home=home)
    assert out.returncode == 2 and "not valid TOML" in out.stderr
    assert (home / "config.toml").read_text() == "model = \n"


def test_project_servers_are_listed_but_not_started_without_trust(tmp_path):
    home, project = tmp_path / "home", tmp_path / "project"
    (project / ".auger").mkdir(parents=True)
    home.mkdir()
    (project / ".auger" / "config.toml").write_text('[mcp_servers.evil]\ncommand = "curl"\n')
    listing = auger_cli("mcp", "list", home=home, cwd=project).stdout
    assert "evil" in listing and "project" in listing and "trust_project_mcp" in listing
    from auger.config import load_config
    from auger.tools.mcp_config import configured_servers

    config = load_config(env={}, config_file=home / "config.toml", project_dir=project)
    servers, warnings = configured_servers(config.tables, trust_project=False)
    assert servers == [] and "was not started" in warnings[0]
    servers, _ = configured_servers(config.tables, trust_project=True)
    assert [s.name for s in servers] == ["evil"] and servers[0].source == "project"


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUGER_", "OPENAI_"))}
    env.update({"AUGER_HOME": str(home), "OPENAI_API_KEY": "sk-test"})
    return env


def _model_flags(server) -> list[str]:
    return ["-c", "provider=openai-compatible", "-c", f"base_url={server.base_url}", "-c", "model=mock-model",
            "-c", "generate_titles=false", "-c", "sandbox=off"]


async def _drive(client, project: Path):
    progress: list[str] = []

    async def on_progress(done, total, message):
        progress.append(message)

    tools = {t.name for t in (await client.list_tools()).tools}
    assert {"auger_run", "auger_continue"} <= tools
    result = await client.call_tool("auger_run", {"prompt": "list files", "cwd": str(project)},
                                    progress_callback=on_progress)
    assert not result.is_error, result
    first = result.structured_content
    assert first["answer"] == "there is one file" and first["reason"] == "complete"
    assert "shell: ok" in progress and "there is one file" in progress
    again = await client.call_tool("auger_continue", {"session_id": first["session_id"], "prompt": "and now?"})
    assert again.structured_content["answer"] == "still one" and again.structured_content["session_id"] == \
        first["session_id"]
    bad = await client.call_tool("auger_run", {"prompt": "x", "cwd": "relative/dir"})
    assert bad.is_error and "absolute path" in bad.content[0].text


def _script(server):
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "ls"})]), Reply(text="there is one file"),
               Reply(text="still one"))


def test_mcp_server_over_stdio_runs_a_task_to_completion(tmp_path, project, server):
    from mcp import Client, StdioServerParameters

    (project / "a.txt").write_text("x")
    _script(server)
    params = StdioServerParameters(command=sys.executable, args=["-m", "auger", "mcp-server", *_model_flags(server)],
                                   env=_env(tmp_path / "home"), cwd=str(project))  # the directory it serves

    async def main():
        async with Client(params, mode="legacy", read_timeout_seconds=60) as client:
            await _drive(client, project)

    asyncio.run(asyncio.wait_for(main(), 90))


def test_mcp_server_over_streamable_http_on_loopback(tmp_path, project, server):
    (project / "a.txt").write_text("x")
    _script(server)
    home = tmp_path / "home"
    with auger_http(home, *_model_flags(server), "--root", str(project)) as url:
        token = (home / "server-token").read_text().strip()
        assert (home / "server-token").stat().st_mode & 0o777 == 0o600

        async def main():
            async with http_client(url, token) as client:
                await _drive(client, project)

        asyncio.run(asyncio.wait_for(main(), 90))


def test_a_run_that_did_not_complete_is_a_tool_error(tmp_path, project):
    """An unreachable model ends the turn with `error`: the caller gets `isError` and the reason, with the
    session id to continue it."""
    from mcp import Client, StdioServerParameters

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        dead = sock.getsockname()[1]
    flags = ["-c", "provider=openai-compatible", "-c", f"base_url=http://127.0.0.1:{dead}/v1", "-c", "model=m",
             "-c", "generate_titles=false", "-c", "sandbox=off", "-c", "model_max_attempts=1"]
    params = StdioServerParameters(command=sys.executable, args=["-m", "auger", "mcp-server", *flags],
                                   env=_env(tmp_path / "home"), cwd=str(project))

    async def main():
        async with Client(params, mode="legacy", read_timeout_seconds=60) as client:
            return await client.call_tool("auger_run", {"prompt": "hi", "cwd": str(project)})

    result = asyncio.run(asyncio.wait_for(main(), 90))
    assert result.is_error
    assert result.content[0].text.startswith("the run did not complete (error): ")
    assert result.structured_content["reason"] == "error" and result.structured_content["session_id"]


@contextmanager
def auger_http(home: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """`auger mcp-server --http 0 ARGS…` in a subprocess; yields its URL, read from the line it prints at start."""
    import select
    import time

    proc = subprocess.Popen([sys.executable, "-m", "auger", "mcp-server", "--http", "0", *args],
                            env={**_env(home), **(env or {})}, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    assert proc.stderr is not None
    try:
        said, deadline = b"", time.monotonic() + 30
        while b"\n" not in said and time.monotonic() < deadline:
            if select.select([proc.stderr], [], [], max(0.0, deadline - time.monotonic()))[0]:
                chunk = os.read(proc.stderr.fileno(), 4096)
                if not chunk:
                    break
                said += chunk
        found = re.search(r"serving (http://\S+/mcp);", said.decode(errors="replace"))
        assert found, f"the server said no address within 30 s: {said!r}"
        yield found.group(1)
    finally:
        proc.terminate()
        proc.wait(10)
        proc.stderr.close()


def http_client(url: str, token: str | None):
    """The SDK's client for an `auger mcp-server --http`, sending `token` as its bearer token."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return Client(streamable_http_client(url, http_client=create_mcp_http_client(headers=headers)), mode="legacy")
