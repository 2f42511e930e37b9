"""A session's scratch directory (background logs without a sandbox; Landlock's TMPDIR): private to its
user, gone with the session, and — when auger was killed before it could remove it — removed by the next
session of that user instead of piling up in the temp dir."""

from __future__ import annotations

import stat
import subprocess
import tempfile

from tests.support.harness import run_session
from tests.support.mock_openai import MockChatServer, Reply, ToolCall


def _temp_dir(tmp_path, monkeypatch):
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    return temp


def test_a_sessions_scratch_dir_is_private_and_goes_with_the_session(project, tmp_path, monkeypatch):
    temp = _temp_dir(tmp_path, monkeypatch)
    seen = []
    command = 'echo made > "$TMPDIR/t" && cat "$TMPDIR/t"'  # the sandbox's temp dir is the scratch dir's, or its own
    with MockChatServer([Reply(tool_calls=[ToolCall("shell", {"command": command})]), Reply(text="done")]) as server:

        def look(_session, _event) -> None:
            seen.extend(p for p in temp.iterdir() if p.name.startswith("auger-scratch-"))

        run_session(project, server, "look", on_event=look)
    scratch = sorted(set(seen))
    assert len(scratch) == 1, scratch  # one, named so that its process can be told dead or alive
    assert not scratch[0].exists()  # removed when the session ended
    assert scratch[0].name.split("-")[2].isdigit()


def test_the_scratch_dir_is_made_owner_only(project, tmp_path, monkeypatch):
    temp = _temp_dir(tmp_path, monkeypatch)
    modes = []
    with MockChatServer([Reply(text="done")]) as server:

        def look(_session, _event) -> None:
            modes.extend(stat.S_IMODE(p.stat().st_mode) for p in temp.iterdir() if p.name.startswith("auger-scratch-"))

        run_session(project, server, "hi", on_event=look)
    assert modes and set(modes) == {0o700}


def test_a_scratch_dir_a_killed_auger_left_is_removed_by_the_next_session(project, tmp_path, monkeypatch):
    temp = _temp_dir(tmp_path, monkeypatch)
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that no longer runs
    left = temp / f"auger-scratch-{dead.pid}-abcd1234"
    (left / "tmp").mkdir(parents=True)
    (left / "tmp" / "build.o").write_bytes(b"x" * 100)
    alive = temp / "auger-scratch-1-keepme"  # pid 1 runs: another process's session
    alive.mkdir()
    with MockChatServer([Reply(text="done")]) as server:
        run_session(project, server, "hi")
    assert not left.exists()
    assert alive.exists()
