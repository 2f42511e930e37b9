"""The session store fills up mid-session: the turn ends with one clear line, nothing hangs, and the
session goes on once there is room.

The disk is made "full" without root or a special filesystem, in the two ways SQLite meets it: the
kernel refuses to grow the file (the running `auger` process's RLIMIT_FSIZE, which anyone may lower on
their own processes, set to what its write-ahead log holds at that moment), or the database may not
grow (`PRAGMA max_page_count`: SQLITE_FULL, what a full disk gives). The moment is picked by the test
(a fifo a tool reads) or by a `before_tool` hook, which runs just before a mutating tool's snapshot.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from auger.protocol import events as ev
from tests.support.harness import auger_cli, cli_env, drive, json_events, open_session
from tests.support.mock_openai import Reply, ToolCall

pytestmark = pytest.mark.skipif(not hasattr(resource, "prlimit"), reason="needs prlimit (Linux) to fill the disk")


def _fill_when_read(fifo: Path, pid: int, wal: Path) -> None:
    """Once the tool has opened the fifo (it runs), leave the process no room to write, then let the tool end."""
    with open(fifo, "w") as writer:  # returns when the tool's `cat` opened its end
        size = wal.stat().st_size
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (size, size))
        writer.write("tool output\n")


def test_a_store_that_fills_while_a_tool_runs_ends_the_run_with_one_clear_line(project, server, auger_home,
                                                                                tmp_path):
    """The tool changes a file, so the turn's end records what it changed: the write that used to be
    outside what guarantees turn_ended, and `auger exec` waited for it for ever."""
    fifo = project / "signal"
    os.mkfifo(fifo)
    (project / ".gitignore").write_text("signal\n")  # no snapshot of a fifo
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "cat signal > copy.txt"})]), Reply(text="back again"))
    db = tmp_path / "s.db"
    common = ["--json", "--db", str(db), "--base-url", server.base_url, "-m", "mock-model", "--mode", "auto"]
    proc = subprocess.Popen([sys.executable, "-m", "auger", "exec", *common, "copy the signal"], cwd=project,
                            env=cli_env(auger_home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    filler = threading.Thread(target=_fill_when_read, args=(fifo, proc.pid, Path(f"{db}-wal")), daemon=True)
    filler.start()
    try:
        out, err = proc.communicate(timeout=30)  # before the fix: never returned
    finally:
        proc.kill()
    filler.join(5)
    assert (project / "copy.txt").read_text() == "tool output\n"  # the tool ran to its end

    assert proc.returncode == 1, (proc.returncode, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err and "internal error" not in err, err
    assert lines[0].startswith(f"auger: error: cannot write the session store {db}: "), err
    printed = json_events(out)
    session_id = printed[0]["session_id"]
    assert "tool_call_started" in [line["type"] for line in printed]
    with sqlite3.connect(db) as conn:  # what was shown was stored; what could not be stored was not shown
        stored = {seq: json.loads(data) for seq, data in
                  conn.execute("SELECT seq, data FROM events WHERE session_id = ?", (session_id,))}
    assert all(stored.get(line["seq"]) == line for line in printed)
    assert len(server.chat_requests) == 1  # the turn stopped: the model was not asked with an unrecorded output

    again = auger_cli("resume", session_id, *common, "and now?", home=auger_home, cwd=project)
    assert again.returncode == 0, again.stderr
    resumed = json_events(again.stdout)
    assert resumed[0]["seq"] == max(stored) + 1 and resumed[-1]["type"] == "shutdown_complete"
    assert "back again" in [line.get("text") for line in resumed]


FILL_HOOK = """import json, os, resource, sys
json.load(sys.stdin)
pid = os.getppid()  # the shell running this hook; the auger process is the first ancestor running auger
while b"auger" not in open(f"/proc/{pid}/cmdline", "rb").read():
    pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
size = os.stat(sys.argv[1]).st_size
resource.prlimit(pid, resource.RLIMIT_FSIZE, (size, size))
"""


def test_a_store_that_fills_as_a_mutating_tool_starts_ends_the_run_with_one_clear_line(project, server, auger_home,
                                                                                       tmp_path):
    """The disk fills after the call was decided and before it runs: the snapshot the turn takes before its
    first change cannot be recorded. The tool does not run, and stderr is the one line that says why."""
    db = tmp_path / "s.db"
    hook = tmp_path / "fill.py"
    hook.write_text(FILL_HOOK)
    (auger_home / "config.toml").write_text(
        f'[[hooks.before_tool]]\ncommand = "{sys.executable} {hook} {db}-wal"\nmatcher = "shell"\n')
    (project / "notes.txt").write_text("notes\n")
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "echo changed > notes.txt"})]), Reply(text="never"))
    result = auger_cli("exec", "--db", str(db), "--base-url", server.base_url, "-m", "mock-model", "--mode", "auto",
                       "change the notes", home=auger_home, cwd=project)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"auger: error: cannot write the session store {db}: "), \
        result.stderr
    assert (project / "notes.txt").read_text() == "notes\n"  # no change without the snapshot that undoes it
    assert len(server.chat_requests) == 1


def test_a_tool_output_the_full_store_cannot_take_ends_the_turn_and_the_session_goes_on(project, server, tmp_path):
    """The output is refused (SQLITE_FULL) while small writes still fit: the turn ends as an error that says
    so, nothing else is lost, and the next prompt is answered."""
    (project / "big.txt").write_text("".join(f"{n:05} {'x' * 60}\n" for n in range(1500)))  # about 100 KB read
    server.add(Reply(tool_calls=[ToolCall("read_file", {"path": "big.txt"})]), Reply(text="second answer"))

    async def main():
        session, store = await open_session(project, server, tmp_path / "s.db")
        try:
            await store._write(lambda conn: conn.execute(  # room for small rows only: 16 pages (64 KB)
                f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0] + 16}"))
            return await drive(session, "read it", "again"), await store.load_events(session.id)
        finally:
            await store.aclose()

    run, stored = asyncio.run(asyncio.wait_for(main(), 60))
    first, second = run.of(ev.TurnEnded)
    assert first.reason == "error" and first.message == f"cannot write the session store {tmp_path / 's.db'}: " \
        "the disk is full", first
    assert not run.of(ev.ToolCallEnded)  # its output was never stored, so never announced
    assert second.reason == "complete" and run.of(ev.AgentMessage)[-1].text == "second answer"
    assert [e.event for e in stored] == run.events
