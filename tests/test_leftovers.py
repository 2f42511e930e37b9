"""What a run leaves behind: nothing once it exits, and what a killed run left is swept by the next one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from auger.policy.egress import make_socket_dir
from tests.support.harness import auger_cli, dies_soon, json_events
from tests.support.mock_openai import Reply


def test_socket_dirs_of_dead_processes_are_swept_and_live_ones_kept(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        stale = tmp_path / f"auger-egress-{dead.pid}-abc123"
        live = tmp_path / f"auger-egress-{alive.pid}-def456"
        other = tmp_path / "auger-egress-notapid"
        for d in (stale, live, other):
            d.mkdir()
            (d / "http.sock").write_text("")
        made = make_socket_dir(tmp_path)
        assert made.name.startswith(f"auger-egress-{os.getpid()}-") and made.is_dir()
        assert not stale.exists() and live.exists() and other.exists()
    finally:
        alive.kill()
        alive.wait()


def _env(home, tmp) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUGER_", "OPENAI_"))}
    env.update({"AUGER_HOME": str(home), "OPENAI_API_KEY": "sk-test", "TMPDIR": str(tmp)})
    return env


def test_a_killed_runs_egress_dir_is_removed_by_the_next_run(project, server, auger_home, tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    server.add(Reply(text="slow", delay=30), Reply(text="done"))
    proc = subprocess.Popen([sys.executable, "-m", "auger", "exec", "--json", "--base-url", server.base_url, "-m", "m",
                             "hi"], cwd=project, env=_env(auger_home, tmp), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    configured = json.loads(proc.stdout.readline())
    if configured["sandbox"] == "none":
        proc.kill()
        proc.wait()
        pytest.skip("no sandbox works here, so no egress proxy runs")
    deadline = time.monotonic() + 20
    while not server.chat_requests and time.monotonic() < deadline:
        time.sleep(0.02)
    left = [p.name for p in tmp.iterdir() if p.name.startswith("auger-egress-")]
    assert left == [p for p in left if p.startswith(f"auger-egress-{proc.pid}-")] and left
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert dies_soon(proc.pid)

    again = subprocess.run([sys.executable, "-m", "auger", "exec", "--base-url", server.base_url, "-m", "m", "again"],
                           cwd=project, env=_env(auger_home, tmp), capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    assert [p.name for p in tmp.iterdir() if p.name.startswith("auger-egress-")] == []


def test_a_session_replayed_from_the_store_leaves_no_temp_cassette(project, server, auger_home, tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    server.add(Reply(text="recorded answer"))
    first = subprocess.run([sys.executable, "-m", "auger", "exec", "--json", "--base-url", server.base_url, "-m", "m",
                            "hi"], cwd=project, env=_env(auger_home, tmp), capture_output=True, text=True, timeout=60)
    session_id = json_events(first.stdout)[0]["session_id"]
    replay = subprocess.run([sys.executable, "-m", "auger", "exec", "--provider", "replay", "--cassette",
                             f"session:{session_id}", "hi"], cwd=project, env=_env(auger_home, tmp),
                            capture_output=True, text=True, timeout=60)
    assert replay.returncode == 0, replay.stderr
    assert replay.stdout.strip() == "recorded answer"
    assert [p.name for p in tmp.iterdir() if p.name.startswith("auger-cassette-")] == []


def test_runs_that_never_got_a_reply_are_not_listed(project, server, auger_home):
    missing_image = auger_cli("exec", "--base-url", server.base_url, "-m", "m", "-i", "nope.png", "look",
                              home=auger_home, cwd=project)
    assert missing_image.returncode == 2 and "nope.png: cannot read image" in missing_image.stderr  # read first
    unknown_skill = auger_cli("exec", "--base-url", server.base_url, "-m", "m", "--skill", "nope", "x",
                              home=auger_home, cwd=project)
    assert unknown_skill.returncode == 1
    unreachable = auger_cli("exec", "--base-url", "http://127.0.0.1:9/v1", "-m", "m", "-c", "model_max_attempts=1",
                            "hi", home=auger_home, cwd=project)
    assert unreachable.returncode == 1
    assert auger_cli("sessions", "--json", home=auger_home).stdout == ""
    server.add(Reply(text="an answer"))
    auger_cli("exec", "--base-url", server.base_url, "-m", "m", "real one", home=auger_home, cwd=project)
    listed = json_events(auger_cli("sessions", "--json", home=auger_home).stdout)
    assert [s["title"] for s in listed] == ["real one"]
