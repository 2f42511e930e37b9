"""Pruning undo snapshots: real sessions write files through the mock model, the snapshot repository
is real git, `auger gc` and the daily background run are the real command. An idle session keeps
only its latest turns, a recent one keeps everything, a deleted one's snapshots go, the freed objects
are really gone from disk, and undo of a pruned turn says so."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import time
from pathlib import Path

from auger.changes.snapshots import SnapshotStore, snapshot_dir
from auger.config import home_dirs
from auger.engine.session.snapshot_gc import STAMP, collect_garbage, gc_due
from auger.engine.turn.changes import changing_turns
from auger.store.sqlite import SqliteStore
from tests.support.harness import auger_cli, make_config, run_session
from tests.support.mock_openai import Reply, ToolCall

DAY = 86400


def writes(server, *contents: str) -> None:
    """One turn per content: the model writes f.txt with it."""
    for text in contents:
        server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "f.txt", "content": text})]), Reply(text="ok"))


def turns_of(db: Path, session_id: str) -> list:
    async def load():
        store = SqliteStore(db)
        try:
            return changing_turns([s.item for s in await store.load_items(session_id)])
        finally:
            await store.aclose()

    return asyncio.run(load())


def repo(project: Path) -> SnapshotStore:
    snapdir = snapshot_dir(home_dirs()["data"], project)
    return SnapshotStore(snapdir, snapdir)


def stored(project: Path, commit: str) -> bool:
    return asyncio.run(repo(project).exists(commit))


def blob_stored(project: Path, content: str) -> bool:
    oid = subprocess.run(["git", "hash-object", "--stdin"], input=content.encode(), capture_output=True,
                         check=True).stdout.decode().strip()
    snapdir = snapshot_dir(home_dirs()["data"], project)
    return subprocess.run(["git", "--git-dir", str(snapdir), "cat-file", "-e", oid]).returncode == 0


def idle(db: Path, session_id: str, days: float) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE sessions SET updated = ? WHERE id = ?", (time.time() - days * DAY, session_id))


def two_sessions(project: Path, server, db: Path) -> tuple[str, str]:
    """An old session with three changing turns (f.txt v1, v2, v3) and a recent one with two."""
    writes(server, "OLD v1\n", "OLD v2\n", "OLD v3\n")
    old = run_session(project, server, "one", "two", "three", db=db).session_id
    writes(server, "NEW v1\n", "NEW v2\n")
    new = run_session(project, server, "four", "five", db=db).session_id
    return old, new


def test_gc_frees_an_idle_sessions_old_turns_keeps_recent_ones_and_undo_says_pruned(project, server, isolated_home):
    db = project.parent / "sessions.db"
    old, new = two_sessions(project, server, db)
    old_turns, new_turns = turns_of(db, old), turns_of(db, new)
    assert len(old_turns) == 3 and len(new_turns) == 2
    idle(db, old, 40)
    assert blob_stored(project, "OLD v1\n")

    result = auger_cli("gc", "--db", str(db), "-c", "snapshot_keep_turns=1", home=isolated_home, cwd=project)
    assert result.returncode == 0, result.stderr
    kept = {old_turns[2].before, old_turns[2].after}  # turn 2's "after" is turn 3's "before" when nothing changed
    pruned = {c for t in old_turns[:2] for c in (t.before, t.after)} - kept
    assert f"removed {len(pruned)} snapshot(s)" in result.stdout and "freed" in result.stdout, result.stdout
    assert pruned and not any(stored(project, c) for c in pruned)
    assert stored(project, old_turns[2].before) and stored(project, old_turns[2].after)
    assert all(stored(project, c) for t in new_turns for c in (t.before, t.after))
    assert not blob_stored(project, "OLD v1\n")  # the objects are gone from disk, not only the refs
    assert blob_stored(project, "NEW v1\n")

    refused = auger_cli("undo", old, "--turn", "1", "--db", str(db), home=isolated_home, cwd=project)
    assert refused.returncode == 2
    assert "turn 1 can no longer be undone: its snapshots were pruned" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert (project / "f.txt").read_text() == "NEW v2\n"  # nothing changed
    again = auger_cli("gc", "--db", str(db), "-c", "snapshot_keep_turns=1", home=isolated_home, cwd=project)
    assert "removed 0 snapshot(s)" in again.stdout, again.stdout
    undone = auger_cli("undo", new, "--db", str(db), home=isolated_home, cwd=project)  # a kept turn still undoes
    assert undone.returncode == 0, undone.stderr
    assert (project / "f.txt").read_text() == "NEW v1\n"


def test_a_deleted_sessions_snapshots_go_once_past_the_grace_period(project, server):
    db = project.parent / "sessions.db"
    old, new = two_sessions(project, server, db)
    gone = turns_of(db, old)
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM items WHERE session_id = ?", (old,))
        conn.execute("DELETE FROM sessions WHERE id = ?", (old,))

    async def gc(now: float):
        store = SqliteStore(db)
        try:
            return await collect_garbage(store, home_dirs()["data"], make_config(), now=now)
        finally:
            await store.aclose()

    first = asyncio.run(gc(time.time()))  # within the grace period: they may be items on their way
    assert first[0].result.removed == 0 and stored(project, gone[0].before)
    later = asyncio.run(gc(time.time() + 2 * 3600))
    # the deleted session's snapshots (a turn's "before" is the previous turn's "after" when nothing changed
    # between them), and any unrecorded start-up snapshot
    assert later[0].result.removed >= len({c for t in gone for c in (t.before, t.after)}) >= 4
    assert not any(stored(project, c) for t in gone for c in (t.before, t.after))
    assert all(stored(project, c) for t in turns_of(db, new) for c in (t.before, t.after))


def test_background_gc_runs_at_most_once_a_day_after_a_session_ends(project, server, isolated_home):
    config = make_config()
    data = home_dirs()["data"]
    assert not gc_due(data, config)  # the first time only writes the stamp
    stamp = data / "snapshots" / STAMP
    assert stamp.exists() and not gc_due(data, config)
    assert gc_due(data, config, now=time.time() + DAY + 60)
    assert not gc_due(data, make_config("snapshot_gc_interval_hours=0"), now=time.time() + 9 * DAY)

    db = project.parent / "sessions.db"
    old, _ = two_sessions(project, server, db)
    old_turns = turns_of(db, old)
    idle(db, old, 40)
    (isolated_home / "config.toml").write_text("snapshot_keep_turns = 1\n")  # what the detached `auger gc` reads
    past = time.time() - 2 * DAY
    import os

    os.utime(stamp, (past, past))
    writes(server, "LATER\n")
    run_session(project, server, "six", db=db, overrides=(f"db_path={db}",))  # its shutdown starts the run
    assert stamp.stat().st_mtime > past + DAY
    deadline = time.monotonic() + 30
    while stored(project, old_turns[0].before) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not stored(project, old_turns[0].before), "the background gc did not prune within 30 s"
    assert stored(project, old_turns[2].after)
