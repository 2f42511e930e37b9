"""Several processes sharing one session database: no collisions, no lost replies, one runner per session."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import time

from auger.store.factory import open_store
from auger.store.sqlite import SqliteStore
from tests.support.harness import auger_cli, cli_env, conversation, json_events
from tests.support.mock_openai import Reply


def test_four_concurrent_resumes_never_corrupt_the_session(project, server, auger_home, db_target):
    """On either backend (`--db FILE` or `--db postgresql://…`)."""
    def answer(body):
        last = conversation(body["messages"])[-1]["content"]
        return Reply(text=f"answer to {last}", delay=1.5)  # long enough for the runs to overlap

    server.add(Reply(text="first answer"), *([answer] * 4))
    db = ["--db", db_target]
    first = auger_cli("exec", "--json", *db, "--base-url", server.base_url, "-m", "m", "start", home=auger_home,
                      cwd=project)
    session_id = json_events(first.stdout)[0]["session_id"]

    procs = [subprocess.Popen([sys.executable, "-m", "auger", "resume", session_id, *db, "--base-url",
                               server.base_url, f"prompt {n}"], cwd=project, env=cli_env(auger_home),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for n in range(4)]
    results = [(n, *p.communicate(timeout=60), p.returncode) for n, p in enumerate(procs)]

    winners = []
    for n, out, err, code in results:
        assert "Traceback" not in err, err
        if code == 0:
            assert out.strip() == f"answer to prompt {n}"
            winners.append(n)
        else:
            assert code == 2, (code, err)
            assert f"session {session_id[:8]} is running in another auger process" in err, err
            assert len(err.strip().splitlines()) == 1, err
    assert winners, "no resume ran"
    assert len(winners) < 4, "the runs did not overlap; the test proves nothing"

    async def stored():
        store = open_store(db_target)
        try:
            rows = await store.load_items(session_id)
            return rows, await store.claim(session_id)
        finally:
            await store.aclose()

    rows, holder = asyncio.run(stored())
    assert [r.seq for r in rows] == list(range(1, len(rows) + 1))
    kinds = [r.item.TYPE for r in rows if r.item.TYPE in ("user_message", "assistant_message")]
    assert kinds == ["user_message", "assistant_message"] * (1 + len(winners))  # never two prompts in a row
    stored_text = " ".join(getattr(r.item, "text", "") for r in rows)
    for n in winners:
        assert f"answer to prompt {n}" in stored_text
    assert holder is None  # every run let go of its lease


def test_a_dead_processs_lease_is_taken_over_and_a_live_ones_is_not(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        async def main():
            store = SqliteStore(tmp_path / "s.db")
            try:
                assert await store.claim("s1") is None  # creates the schema too
                held = sqlite3.connect(tmp_path / "s.db")
                with held:
                    held.execute("UPDATE leases SET pid = ? WHERE session_id = 's1'", (dead.pid,))
                    held.execute("INSERT INTO leases (session_id, pid, host, heartbeat) VALUES ('s2', ?, ?, ?)",
                                 (alive.pid, os.uname().nodename, time.time()))
                assert await store.claim("s1") is None
                holder = await store.claim("s2")
                assert holder is not None and str(alive.pid) in holder
                await store.release("s2")  # not ours: left alone
                assert await store.claim("s2") is not None
            finally:
                await store.aclose()

        asyncio.run(main())
    finally:
        alive.kill()
        alive.wait()
