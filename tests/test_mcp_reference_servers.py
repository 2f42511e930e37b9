"""The reference MCP servers from the npm registry, run with `npx -y` as users configure them:
@modelcontextprotocol/server-filesystem and @modelcontextprotocol/server-everything."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from auger.protocol import events as ev
from tests.support.mock_openai import Reply, ToolCall
from tests.support.downloads import cached
from tests.test_mcp_client import _names, _system, run_mcp

PACKAGES = ("@modelcontextprotocol/server-filesystem", "@modelcontextprotocol/server-everything")


@pytest.fixture(scope="session")
def npm_cache():
    """An npm cache holding both servers, kept across runs (`.ci/run` fills it; later `npx -y` starts from it)."""
    if shutil.which("npx") is None or shutil.which("npm") is None:
        pytest.skip("npm/npx are not installed (.ci/run installs them); the reference servers cannot run")
    cache = cached("npm-mcp-reference")
    for package in PACKAGES:
        done = subprocess.run(["npx", "-y", f"--package={package}", "--", "true"], capture_output=True, text=True,
                              timeout=300, env={**_base_env(), "npm_config_cache": str(cache)})
        assert done.returncode == 0, f"installing {package} failed: {done.stderr[-2000:]}"
    return str(cache)


def _base_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}


def _npx(cache: str, *args: str) -> dict:
    return {"command": "npx", "args": ["-y", *args], "env": {"npm_config_cache": cache}, "trusted": True,
            "startup_timeout": 60}


def test_filesystem_server_reads_the_project(project, server, npm_cache):
    (project / "notes.txt").write_text("remember the milk\n")
    server.add(Reply(tool_calls=[ToolCall("mcp__fs__list_directory", {"path": str(project)}),
                                 ToolCall("mcp__fs__read_text_file", {"path": str(project / "notes.txt")})]),
               Reply(tool_calls=[ToolCall("mcp__fs__read_text_file", {"path": "/etc/passwd"})]),
               Reply(text="done"))
    run, _ = run_mcp(project, server, "look around", servers={"fs": _npx(npm_cache, PACKAGES[0], str(project))},
                     overrides=())
    listing, reading, outside = sorted(run.of(ev.ToolCallEnded), key=lambda e: e.call_id)
    assert listing.ok and "notes.txt" in listing.output
    assert reading.ok and "remember the milk" in reading.output
    assert not outside.ok and "denied" in outside.output.lower()  # the server's own isError
    assert "mcp__fs__write_file" in _names(server.chat_requests[0])


def test_everything_server_tools_resources_instructions_and_elicitation(project, server, npm_cache):
    server.add(Reply(tool_calls=[ToolCall("mcp__everything__echo", {"message": "hi"}),
                                 ToolCall("mcp__everything__get-sum", {"a": 2, "b": 40}),
                                 ToolCall("list_mcp_resources", {"server": "everything"})]),
               Reply(tool_calls=[ToolCall("mcp__everything__trigger-elicitation-request", {})]),
               Reply(text="done"))
    run, _ = run_mcp(project, server, "try it", servers={"everything": _npx(npm_cache, PACKAGES[1], "stdio")})
    ended = {e.name.removeprefix("mcp__everything__"): e for e in run.of(ev.ToolCallEnded)}  # parallel: any order
    echo, total, resources = ended["echo"], ended["get-sum"], ended["list_mcp_resources"]
    elicited = ended["trigger-elicitation-request"]
    assert echo.ok and "hi" in echo.output
    assert total.ok and "42" in total.output
    assert resources.ok and "://" in resources.output
    assert "decline" in elicited.output.lower()  # headless: nobody to ask
    assert "Everything Server" in _system(server.chat_requests[0])  # its instructions, in the system prompt
