"""Mistakes a user can make on the command line get one clear, true line, never a traceback or a wait."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from auger.store.base import SessionRecord
from auger.store.sqlite import SqliteStore
from tests.support.harness import auger_cli, json_events
from tests.support.mock_openai import Reply


def _one_line_error(result: subprocess.CompletedProcess, code: int = 2) -> str:
    assert result.returncode == code, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize("command", ["resume", "fork"])
def test_continuing_a_session_whose_directory_was_deleted(tmp_path, server, auger_home, command):
    gone = tmp_path / "gone"
    gone.mkdir()
    server.add(Reply(text="hi"))
    first = auger_cli("exec", "--json", "--base-url", server.base_url, "-m", "m", "hello", home=auger_home, cwd=gone)
    session_id = json_events(first.stdout)[0]["session_id"]
    shutil.rmtree(gone)
    result = auger_cli(command, session_id[:8], "--base-url", server.base_url, "again", home=auger_home, cwd=tmp_path)
    line = _one_line_error(result)
    assert f"session {session_id[:8]} was recorded in {gone}, which does not exist any more" in line
    assert "-C DIR" in line


def test_a_base_url_without_a_scheme_is_refused_at_once(project, auger_home):
    started = time.monotonic()
    result = auger_cli("exec", "--base-url", "localhost:11434/v1", "-m", "m", "hi", home=auger_home, cwd=project)
    assert time.monotonic() - started < 5  # no retries: it can never work
    line = _one_line_error(result)
    assert "--base-url 'localhost:11434/v1' is not an http:// or https:// URL" in line
    assert auger_cli("sessions", "--json", home=auger_home).stdout == ""


def test_a_project_directory_that_is_a_file(tmp_path, auger_home):
    a_file = tmp_path / "plain-file"
    a_file.write_text("x")
    line = _one_line_error(auger_cli("exec", "-C", str(a_file), "hi", home=auger_home, cwd=tmp_path))
    assert line == f"auger: error: project directory {a_file} is not a directory"
    line = _one_line_error(auger_cli("exec", "-C", str(tmp_path / "missing"), "hi", home=auger_home, cwd=tmp_path))
    assert line == f"auger: error: project directory {tmp_path / 'missing'} does not exist"


def test_an_ambiguous_id_prefix_lists_the_candidates(project, auger_home):
    async def make():
        store = SqliteStore(auger_home / "sessions.db")
        for n, title in (("1", "first task"), ("2", "second task")):
            await store.create_session(SessionRecord(f"abcd{n * 4}-0000-4000-8000-000000000000", time.time(),
                                                     time.time(), str(project), "openai", "m", "auto", title))
        await store.aclose()

    asyncio.run(make())
    line = _one_line_error(auger_cli("resume", "abcd", "hi", home=auger_home, cwd=project))
    assert "session id prefix 'abcd' is ambiguous" in line
    assert "abcd1111-000 (first task)" in line and "abcd2222-000 (second task)" in line
    line = _one_line_error(auger_cli("fork", "abcd", "hi", home=auger_home, cwd=project))
    assert "is ambiguous" in line
    line = _one_line_error(auger_cli("resume", "abcd9", "hi", home=auger_home, cwd=project))
    assert "no stored session matches 'abcd9'" in line


def test_sigterm_is_reported_as_sigterm_with_exit_143(project, server, auger_home):
    server.add(Reply(text="too late", delay=30))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUGER_", "OPENAI_"))}
    env.update({"AUGER_HOME": str(auger_home), "OPENAI_API_KEY": "sk-test"})
    proc = subprocess.Popen([sys.executable, "-m", "auger", "exec", "--base-url", server.base_url, "-m", "m", "hi"],
                            cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while not server.chat_requests and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.chat_requests, "the model was never called"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 143, err
    assert re.fullmatch(r"auger: terminated by SIGTERM \(session [0-9a-f]{8}\)\n", err), err
    # the recorded turn says so too, so a resumed model is not told the user interrupted it
    session_id = re.search(r"session ([0-9a-f]{8})", err).group(1)
    server.add(Reply(text="resumed"))
    resumed = auger_cli("resume", session_id, "--base-url", server.base_url, "what happened?",
                        home=auger_home, cwd=project)
    assert resumed.returncode == 0, resumed.stderr
    sent = json.dumps(server.chat_requests[-1].body["messages"])
    assert "terminated by SIGTERM" in sent and "interrupted by the user" not in sent
