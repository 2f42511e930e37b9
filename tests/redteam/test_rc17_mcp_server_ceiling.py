"""`auger mcp-server` never gives a caller more than it was started with, and no sandboxed command can
reach it: a hostile caller (the `mcp` SDK's own client) asks for a wider mode, continues a session
recorded in a wider one, names a directory outside the server's, or calls over HTTP without the token;
a command in a session's sandbox tries to connect to the server's port. Judged by effect: a file
written or not, a status the server answered, a connection made or not."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys

import httpx
import pytest

from auger.policy.listening import DEV_PORTS
from tests.support.harness import auger_cli
from tests.support.mock_openai import Reply, ToolCall
from tests.support.redteam_sandbox import KINDS, shell
from tests.support.sockets import free_dev_port, wait_for_port
from tests.test_mcp_cli import _env, _model_flags, auger_http, http_client

WRITE = ToolCall("write_file", {"path": "owned.txt", "content": "pwned\n"})


def _stdio(home, project, *flags: str):
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "auger", "mcp-server", *flags],
                                   env=_env(home), cwd=str(project))
    return Client(params, mode="legacy", read_timeout_seconds=60)


def _call(home, project, flags, tool: str, arguments: dict):
    async def main():
        async with _stdio(home, project, *flags) as client:
            return await client.call_tool(tool, arguments)

    return asyncio.run(asyncio.wait_for(main(), 90))


def test_a_plan_mode_server_does_not_write_when_the_caller_asks_for_auto(tmp_path, project, server):
    server.add(Reply(tool_calls=[WRITE]), Reply(text="done"))
    flags = [*_model_flags(server), "--approve-all", "-c", "mode=plan"]
    result = _call(tmp_path / "home", project, flags, "auger_run", {"prompt": "write", "cwd": str(project),
                                                                     "mode": "auto"})
    assert not (project / "owned.txt").exists()
    assert result.structured_content["mode"] == "plan"
    tool_output = [m["content"] for m in server.chat_requests[-1].body["messages"] if m["role"] == "tool"]
    assert "plan mode" in tool_output[0], tool_output

    # control: the same request to a server started in auto writes
    server.add(Reply(tool_calls=[WRITE]), Reply(text="done"))
    _call(tmp_path / "home", project, [*_model_flags(server), "--approve-all"], "auger_run",
          {"prompt": "write", "cwd": str(project), "mode": "auto"})
    assert (project / "owned.txt").read_text() == "pwned\n"


def test_continue_runs_a_stored_auto_session_within_a_plan_mode_server(tmp_path, project, server):
    home = tmp_path / "home"
    server.add(Reply(text="hello"))
    first = _call(home, project, [*_model_flags(server), "--approve-all"], "auger_run",
                  {"prompt": "hi", "cwd": str(project), "mode": "auto"})
    server.add(Reply(tool_calls=[WRITE]), Reply(text="done"))
    again = _call(home, project, [*_model_flags(server), "--approve-all", "-c", "mode=plan"], "auger_continue",
                  {"session_id": first.structured_content["session_id"], "prompt": "now write"})
    assert not (project / "owned.txt").exists()
    assert again.structured_content["mode"] == "plan"


def test_a_session_outside_the_servers_directories_is_refused(tmp_path, project, server):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "owned.txt", "content": "x"})]), Reply(text="d"))
    result = _call(tmp_path / "home", project, [*_model_flags(server), "--approve-all"], "auger_run",
                   {"prompt": "write", "cwd": str(elsewhere)})
    assert result.is_error and "outside the directories this server serves" in result.content[0].text
    assert not (elsewhere / "owned.txt").exists() and server.chat_requests == []
    # a symlink in the served directory that leads out of it leads nowhere
    (project / "out").symlink_to(elsewhere)
    result = _call(tmp_path / "home", project, [*_model_flags(server), "--approve-all"], "auger_run",
                   {"prompt": "write", "cwd": str(project / "out")})
    assert result.is_error and not (elsewhere / "owned.txt").exists()


def test_http_answers_only_requests_with_the_token_its_host_and_no_foreign_origin(tmp_path, project, server):
    server.add(Reply(text="hello"))
    home = tmp_path / "home"
    with auger_http(home, *_model_flags(server), "--root", str(project)) as url:
        token = (home / "server-token").read_text().strip()
        assert (home / "server-token").stat().st_mode & 0o777 == 0o600
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "x", "version": "1"}}}
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

        def status(url: str = url, **extra: str) -> int:
            return httpx.post(url, json=body, headers={**headers, **extra}, timeout=10).status_code

        assert status() == 401
        assert status(Authorization="Bearer wrong") == 401
        assert status(url + f"?token={token}") == 401  # never taken from the query string
        assert status(url + f"?access_token={token}") == 401
        assert status(Authorization=f"Bearer {token}", Host=f"evil.example:{port}") == 403  # DNS rebinding
        assert status(Authorization=f"Bearer {token}", Origin="http://evil.example") == 403
        assert status(Authorization=f"Bearer {token}", **{"Sec-Fetch-Site": "cross-site"}) == 403
        assert status(Authorization=f"Bearer {token}") == 200

        async def main():
            async with http_client(url, token) as client:
                return await client.call_tool("auger_run", {"prompt": "hi", "cwd": str(project)})

        assert asyncio.run(asyncio.wait_for(main(), 90)).structured_content["answer"] == "hello"

    # a token from the environment replaces the kept one
    from_env = "from-the-environment-0123"
    with auger_http(home, *_model_flags(server), "--root", str(project), env={"AUGER_SERVER_TOKEN": from_env}) as url:
        assert httpx.post(url, json=body, headers={**headers, "Authorization": f"Bearer {from_env}"},
                          timeout=10).status_code == 200


def test_http_refuses_a_token_file_others_may_read_and_a_short_token(tmp_path, project, server):
    """A token file another user could have read (or written) is no secret: the server does not start
    on it, and says how to fix it, rather than quietly tightening its mode and trusting it; a token
    from the environment shorter than 16 characters is refused too."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "server-token").write_text("a-token-someone-else-may-have-read\n")
    (home / "server-token").chmod(0o644)
    loose = auger_cli("mcp-server", "--http", "0", *_model_flags(server), home=home, cwd=project, timeout=30)
    short = auger_cli("mcp-server", "--http", "0", *_model_flags(server), home=tmp_path / "other", cwd=project,
                      env={"AUGER_SERVER_TOKEN": "short"}, timeout=30)
    assert loose.returncode == 2 and "chmod 600" in loose.stderr, loose.stderr
    assert (home / "server-token").stat().st_mode & 0o777 == 0o644  # left as it was, for the user to look at
    assert short.returncode == 2 and "at least 16 characters" in short.stderr, short.stderr


@pytest.mark.xdist_group("dev-port-8000")  # it looks for a free dev port, then binds it: one test at a time
def test_http_refuses_a_dev_port_a_landlock_sandbox_could_reach(tmp_path, project, server):
    """Before: `--http 8000` listened where Landlock lets every sandboxed command connect; the command
    reached the server. Now the server refuses the port, and the command finds nothing there."""
    port = free_dev_port()
    if port is None:
        pytest.fail(f"every dev port {DEV_PORTS} is taken on this machine; the test needs one free")
    proc = subprocess.Popen([sys.executable, "-m", "auger", "mcp-server", "--http", str(port), *_model_flags(server)],
                            env=_env(tmp_path / "home"), cwd=project, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        code = proc.wait(30) if not wait_for_port(port, 10) else None
        outs = shell(project, server, "landlock", f"curl -s -o /dev/null -w 'status=%{{http_code}}' "
                                                  f"http://127.0.0.1:{port}/mcp; echo ' exit='$?")
    finally:
        proc.kill()
        proc.wait(10)
        stderr = proc.stderr.read() if proc.stderr else ""
    assert "status=000" in outs[0] and "exit=0" not in outs[0], outs[0]  # no connection at all
    assert code == 2 and "dev port" in stderr, stderr


@pytest.mark.parametrize("kind", KINDS)
def test_the_egress_proxy_never_connects_a_command_to_the_server(tmp_path, project, server, upstream, kind):
    """Even when the user lets commands reach loopback through the proxy, the server's port is refused;
    another loopback server (the control) is reached."""
    home = tmp_path / "home"
    with auger_http(home, *_model_flags(server), "--root", str(project)) as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        fetch = "curl -s --noproxy '' -x \"$HTTP_PROXY\" -w ' status=%{{http_code}}' http://127.0.0.1:{port}/; echo"
        outs = shell(project, server, kind, fetch.format(port=port), fetch.format(port=upstream),
                     overrides=('egress_allow=["127.0.0.1"]',))
    assert "status=403" in outs[0] and "auger's own servers" in outs[0], outs[0]  # the command is told why
    assert "status=200" in outs[1] and "hello from upstream" in outs[1], outs[1]


def test_bad_http_options_are_clear_errors(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    out = auger_cli("mcp-server", "--http", "8080", home=home, cwd=tmp_path)
    assert out.returncode == 2 and "dev port" in out.stderr and "Traceback" not in out.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        out = auger_cli("mcp-server", "--http", str(taken.getsockname()[1]), home=home, cwd=tmp_path)
    assert out.returncode == 2 and "cannot listen" in out.stderr and "Traceback" not in out.stderr
    out = auger_cli("mcp-server", "--root", str(tmp_path / "missing"), home=home, cwd=tmp_path)
    assert out.returncode == 2 and "not a directory" in out.stderr


@pytest.mark.parametrize("kind", KINDS)
def test_the_egress_proxy_never_connects_a_command_to_auger_serve(tmp_path, project, server, upstream, kind):
    """`auger serve` is one of auger's own servers too: a sandboxed command that may reach loopback through
    the proxy is refused its port (a command there could drive sessions rooted anywhere it serves)."""
    from tests.support.serve import start_process as start, stop_process as stop

    proc, url, _ = start(project, tmp_path / "home", server, tmp_path / "serve.db")
    try:
        port = int(url.rsplit(":", 1)[1])
        fetch = "curl -s --noproxy '' -x \"$HTTP_PROXY\" -w ' status=%{{http_code}}' http://127.0.0.1:{port}/; echo"
        outs = shell(project, server, kind, fetch.format(port=port), fetch.format(port=upstream),
                     overrides=('egress_allow=["127.0.0.1"]',))
    finally:
        stop(proc)
    assert "status=403" in outs[0] and "auger's own servers" in outs[0], outs[0]
    assert "status=200" in outs[1] and "hello from upstream" in outs[1], outs[1]


def test_serve_refuses_a_dev_port(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    out = auger_cli("serve", "--port", "8000", home=home, cwd=tmp_path, env={"AUGER_SERVER_TOKEN": "t" * 32})
    assert out.returncode != 0 and "dev port" in out.stderr and "Traceback" not in out.stderr, out.stderr
