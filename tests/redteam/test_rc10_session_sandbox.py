"""One sandbox per session: a background server is reached and stopped from later calls, and
nothing a session started outlives it (judged by host processes, from /proc)."""

from __future__ import annotations

import re
import uuid

import pytest

from tests.support.harness import run_session
from tests.support.mock_openai import Reply, ToolCall
from tests.support.redteam_sandbox import KINDS, kill_all, none_alive, processes_with, shell

PORT = 8000  # one of the dev ports Landlock lets a session bind and connect to


@pytest.mark.xdist_group("dev-port-8000")  # under Landlock the server binds the host's port: one test at a time
@pytest.mark.parametrize("kind", KINDS)
def test_background_server_is_reached_and_killed_by_pid_from_later_calls(project, server, kind):
    marker = f"rc10-{uuid.uuid4().hex[:8]}"
    (project / marker).mkdir()
    (project / marker / "index.html").write_text(f"{marker}\n")
    server.add(*_script(marker))
    run_session(project, server, "go", overrides=(f"sandbox={kind}", "mode=auto", "approve_all=true"))
    outs = [m["content"] for m in server.chat_requests[-1].body["messages"] if m["role"] == "tool"]
    assert marker in outs[1], outs[1]  # reached from a later call
    assert "curl=7" in outs[2], outs[2]  # killed by `kill PID` from a later call: connection refused
    assert none_alive(marker)


def _script(marker: str):
    """Start the server, reach it, then kill it by the pid the start reported (read from the
    request the model would read it from)."""

    def kill_reported(body):
        started = [m["content"] for m in body["messages"] if m["role"] == "tool"][0]
        pid = re.search(r"pid (\d+)", started).group(1)
        return Reply(tool_calls=[ToolCall("shell", {
            "command": f"kill {pid}; sleep 0.3; curl -s -o /dev/null http://127.0.0.1:{PORT}/; echo curl=$?"})])

    return (Reply(tool_calls=[
        ToolCall("shell", {"command": f"exec python3 -m http.server {PORT} --bind 127.0.0.1 --directory {marker}",
                           "background": True}),
        ToolCall("shell", {"command": f"for i in $(seq 50); do curl -s http://127.0.0.1:{PORT}/index.html && break; "
                                      "sleep 0.1; done"})]),
            kill_reported, Reply(text="done"))


@pytest.mark.parametrize("kind", KINDS)
def test_nothing_outlives_the_session(project, server, kind):
    marker = f"rc10d-{uuid.uuid4().hex[:8]}"
    outs = shell(project, server, kind, {"command": _daemon(marker, "c"), "background": True},
                 f"({_daemon(marker, 'a', 'setsid ')} &); {_daemon(marker, 'b', 'nohup ')} & "
                 "for i in $(seq 50); do [ -e started-a ] && [ -e started-b ] && [ -e started-c ] && break; sleep 0.1; "
                 "done; echo spawned")
    assert "spawned" in outs[1]
    assert all((project / f"started-{n}").exists() for n in "abc"), "the payload did not start its daemons"
    assert none_alive(marker), f"processes outlived the session: {processes_with(marker)}"


def test_control_unconfined_daemons_do_outlive_the_session(project, server):
    marker = f"rc10u-{uuid.uuid4().hex[:8]}"
    try:
        outs = shell(project, server, "off", f"({_daemon(marker, 'a', 'setsid ')} &); "
                                             "for i in $(seq 50); do [ -e started-a ] && break; sleep 0.1; done")
        assert (project / "started-a").exists() and processes_with(marker), outs
    finally:
        kill_all(marker)


def _daemon(marker: str, name: str, prefix: str = "") -> str:
    """A long-lived process carrying `marker` in its command line, that says when it started."""
    return f"{prefix}bash -c 'touch started-{name}; sleep 300; :' {marker}-{name} >/dev/null 2>&1"


@pytest.mark.parametrize("kind", KINDS)
def test_a_foreground_commands_children_end_with_it(project, server, kind):
    tag = uuid.uuid4().hex[:8]
    # The marker is spelled whole only in the child's command line, never in the checking command's.
    outs = shell(project, server, kind,
                 f"bash -c 'touch started; sleep 300; :' rc10f-{tag} >/dev/null 2>&1 & sleep 0.3; echo left",
                 f"t={tag}; n=0; for c in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $c 2>/dev/null | "
                 f"grep -q \"rc10f-$t\" && n=$((n+1)); done; echo alive=$n")
    assert (project / "started").exists() and "left" in outs[0]
    assert "alive=0" in outs[1], outs[1]


@pytest.mark.parametrize("kind", KINDS)
def test_nothing_outlives_auger_killed_mid_session(tmp_path, project, server, kind):
    """auger killed with SIGKILL (no shutdown at all): the session's processes still end."""
    import os
    import signal
    import subprocess
    import sys
    import time

    marker = f"rc10k-{uuid.uuid4().hex[:8]}"
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": _daemon(marker, "a"), "background": True}),
                                 ToolCall("shell", {"command": f"({_daemon(marker, 'b', 'setsid ')} &); sleep 0.5"})]),
               Reply(text="never sent", delay=60))
    home = tmp_path / "auger-home"
    env = {**os.environ, "AUGER_HOME": str(home), "OPENAI_API_KEY": "sk-test"}
    proc = subprocess.Popen([sys.executable, "-m", "auger", "exec", "--base-url", server.base_url, "-m", "mock",
                             "-c", f"sandbox={kind}", "-c", "approve_all=true", "go"],
                            cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not ((project / "started-a").exists() and (project / "started-b").exists()):
            assert time.monotonic() < deadline and proc.poll() is None, "the daemons did not start"
            time.sleep(0.05)
        assert processes_with(marker)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert none_alive(marker), f"processes outlived auger: {processes_with(marker)}"
