"""A language server runs in the session's sandbox, read-only to the project and without any network, in
every mode — judged by effect: a server that tries to write into the project and to fetch a page through
the sandbox's egress proxy (which the session's own commands reach) leaves no file and no request at the
host, while the same program run as a command does both (the control)."""

from __future__ import annotations

import asyncio
import http.server
import shlex
import threading

import pytest

from auger.protocol import events as ev
from auger.protocol.ops import UserTurn
from tests.support.harness import Follow, open_session
from tests.support.lsp_servers import fake_command, lsp_table
from tests.support.mock_openai import Reply, ToolCall
from tests.support.redteam_sandbox import KINDS, require


@pytest.fixture
def counting_upstream():
    """A local HTTP server standing in for a remote host; yields (port, paths requested)."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_port, seen
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_language_server_cannot_write_the_project_nor_reach_the_network(project, server, counting_upstream,
                                                                          kind):
    require(kind)
    port, seen = counting_upstream
    host = f"mirror.test:{port}"
    (project / "app.py").write_text("x = 1\n")
    tables = lsp_table(basedpyright={"disabled": True}, pyright={"disabled": True}, ruff={"disabled": True},
                       escape={"command": fake_command("escape", str(project)),
                               "languages": ["python"]})
    control = f"{shlex.join(fake_command('escape', str(project)))} < /dev/null; cat escaped.txt"
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "echo ${HTTP_PROXY##*:}"})]), Reply(text="ready"),
               Reply(tool_calls=[ToolCall("edit_file", {"path": "app.py", "old_string": "1", "new_string": "2"})]),
               Reply(text="edited"),
               Reply(tool_calls=[ToolCall("shell", {"command": control})]), Reply(text="done"))

    async def main() -> list[ev.Event]:
        session, store = await open_session(project, server, project.parent / "s.db", f"sandbox={kind}",
                                            "mode=auto", "approve_all=true", "diagnostics=true", "diagnostics_wait=60",
                                            'egress_hosts={ "mirror.test" = "127.0.0.1" }',
                                            'egress_allow=["mirror.test"]', tables=tables)
        follow = Follow(session)
        try:
            session.submit(UserTurn("which proxy port?"))
            proxy = (await follow.until(ev.ToolCallEnded)).output.strip().splitlines()[-1]
            await follow.until(ev.TurnEnded)
            (project / ".proxy").write_text(f"{proxy} {host}\n")
            session.submit(UserTurn("edit"))  # starts the server: it tries to escape as it starts
            await follow.until(ev.TurnEnded)
            session.submit(UserTurn("the same as a command"))
            await follow.until(ev.TurnEnded)
            from auger.protocol.ops import Shutdown

            session.submit(Shutdown())
            await session.wait_closed()
        finally:
            await store.aclose()
        return follow.events

    events = asyncio.run(main())
    edit, command = [e for e in events if isinstance(e, ev.ToolCallEnded)][1:]
    told = next(d.message for d in edit.diagnostics if d.message.startswith("escape:"))
    assert "write refused" in told and "network refused" in told, told
    # the command (auto mode: writable, with the proxy) did both, which the server could not
    assert "written by a language server" in command.output
    assert seen == ["/from-the-server"], seen
