"""`kill -9` at any printed line: what a client saw is stored under the number it saw, and the next run
numbers on after it.

One session is run again and again by the real `auger` command, each run (`exec`, then `resume`)
killed with SIGKILL the moment the test has read its Nth `--json` line, N = 1, 2, 3… — so every line
of a run is, once, the last thing a client saw. After each kill, every line printed so far must be in
the store with the same seq and content, the store must number 1..M without a gap, and the next run
must start at M + 1.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tests.support.harness import cli_env, json_events
from tests.support.mock_openai import Reply, ToolCall

LINES_PER_RUN = 25  # session_configured … shutdown_complete of one run with the replies below


def _reply(body: dict) -> Reply:
    """A tool call for a new prompt, then a chatty answer once the call has its output."""
    if body["messages"][-1]["role"] == "tool":
        return Reply(text="the directory holds nothing yet", chunk_chars=4)
    return Reply(text="let me look", tool_calls=[ToolCall("list_dir", {})], chunk_chars=4)


def _run_killed_after(args: list[str], *, home: Path, cwd: Path, line: int | None) -> tuple[list[dict], int]:
    """Run `auger ARGS`, SIGKILL it as soon as its `line`-th stdout line is read (None: let it end); every
    complete line it printed, and its exit status."""
    proc = subprocess.Popen([sys.executable, "-m", "auger", *args], cwd=cwd, env=cli_env(home),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    assert proc.stdout is not None
    out = b""
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 1)
            if not ready:
                continue
            chunk = os.read(proc.stdout.fileno(), 1 << 16)
            if not chunk:
                break
            out += chunk
            if line is not None and out.count(b"\n") >= line:
                os.kill(proc.pid, signal.SIGKILL)
                line = None  # what is still in the pipe was printed too: read it to the end
        else:
            raise AssertionError(f"auger {' '.join(args[:2])} did not end")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # anything it left behind
        except ProcessLookupError:
            pass
        code = proc.wait()
        proc.stdout.close()
    complete = out[:out.rfind(b"\n") + 1].decode()
    return json_events(complete), code


def _stored(db: Path, session_id: str) -> dict[int, dict]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT seq, data FROM events WHERE session_id = ? ORDER BY seq", (session_id,))
        return {seq: json.loads(data) for seq, data in rows}


def test_every_printed_event_survives_kill_9_and_the_next_run_numbers_after_it(project, server, auger_home,
                                                                               tmp_path):
    server.add(*([_reply] * (3 * LINES_PER_RUN)))
    db = tmp_path / "s.db"
    common = ["--json", "--db", str(db), "--base-url", server.base_url, "-m", "mock-model"]
    session_id = ""
    printed: dict[int, dict] = {}  # every line any run printed, by seq
    last_stored = 0
    killed_early = 0
    for point in [*range(1, LINES_PER_RUN + 1), None]:
        prompt = f"look around {point}"
        args = ["resume", session_id, *common, prompt] if session_id else ["exec", *common, prompt]
        lines, code = _run_killed_after(args, home=auger_home, cwd=project, line=point)
        assert lines, f"run killed after line {point} printed nothing"
        session_id = lines[0]["session_id"]
        assert lines[0]["type"] == "session_configured" and lines[0]["resumed"] == (point != 1)
        assert lines[0]["seq"] == last_stored + 1, f"run {point} reused or skipped numbers after {last_stored}"
        for line in lines:
            assert line["seq"] not in printed, f"seq {line['seq']} printed twice: {printed[line['seq']]} and {line}"
            printed[line["seq"]] = line
        stored = _stored(db, session_id)
        assert sorted(stored) == list(range(1, len(stored) + 1)), f"a gap in the stored numbers after run {point}"
        lost = [seq for seq in printed if stored.get(seq) != printed[seq]]
        assert not lost, f"killed after line {point}: printed events {lost} are missing from the store or differ"
        last_stored = len(stored)
        killed_early += point is not None and code == -signal.SIGKILL and lines[-1]["type"] != "shutdown_complete"
    assert lines[-1]["type"] == "shutdown_complete" and code == 0  # the last run was left to finish
    assert len(lines) == LINES_PER_RUN, [line["type"] for line in lines]  # so every line of a run was a kill point
    assert killed_early >= LINES_PER_RUN - 2, "the kills did not land inside the runs; the test proves nothing"
