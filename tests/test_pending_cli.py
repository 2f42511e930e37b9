"""`auger --pending` and `auger pending list|apply|discard|rewind` as the real command: the queue made by an
exec run is listed with kinds, line counts and proposers, applied in part (a conflicting file refused),
rewound, discarded; the apply is undoable with `auger undo` and the model is told at the next resume."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.harness import FAST, auger_cli, json_events
from tests.support.mock_openai import Reply, ToolCall

FAST_ARGS = [arg for item in FAST for arg in ("-c", item)]


def exec_pending(project: Path, server, home: Path, *extra: str) -> str:
    result = auger_cli("exec", "--json", "--pending", "--base-url", server.base_url, "-m", "m", *FAST_ARGS, *extra,
                       "edit", home=home, cwd=project)
    assert result.returncode == 0, result.stderr
    return json_events(result.stdout)[0]["session_id"]


def test_pending_commands_list_apply_rewind_discard(project, server, auger_home):
    (project / "a.txt").write_text("one\ntwo\n")
    (project / "b.txt").write_text("bee\n")
    (project / "gone.txt").write_text("x\n")
    server.add(Reply(tool_calls=[ToolCall("edit_file", {"path": "a.txt", "old_string": "two", "new_string": "2\n3"}),
                                 ToolCall("write_file", {"path": "b.txt", "content": "BEE\n"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": "rm gone.txt && echo new > c.txt"})]),
               Reply(text="done"))
    session_id = exec_pending(project, server, auger_home)
    assert (project / "a.txt").read_text() == "one\ntwo\n" and (project / "gone.txt").exists()
    assert not (project / "c.txt").exists()

    listed = auger_cli("pending", "list", home=auger_home, cwd=project)  # this project's latest session
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].startswith(f"session {session_id[:8]}") and "4 file(s)" in lines[0]
    assert any(line.startswith("M a.txt  +2 -1  by main/edit_file/") for line in lines), lines
    assert any(line.startswith("D gone.txt  +0 -1  by main/shell/") for line in lines), lines
    assert any(line.startswith("A c.txt  +1 -0") for line in lines), lines
    rows = [json.loads(line) for line in auger_cli("pending", "list", "--json", "-s", session_id[:8],
                                                    home=auger_home, cwd=project).stdout.splitlines()]
    seqs = {row["path"]: row["seqs"] for row in rows}

    (project / "b.txt").write_text("edited meanwhile\n")
    applied = auger_cli("pending", "apply", "a.txt", "b.txt", home=auger_home, cwd=project)
    assert applied.returncode == 1 and "applied a.txt" in applied.stdout
    assert "refused b.txt: changed on disk since the change was proposed" in applied.stderr, applied.stderr
    assert (project / "a.txt").read_text() == "one\n2\n3\n" and (project / "b.txt").read_text() == "edited meanwhile\n"

    rewound = auger_cli("pending", "rewind", str(min(seqs["gone.txt"] + seqs["c.txt"]) - 1), session_id[:8],
                        home=auger_home, cwd=project)
    assert rewound.returncode == 0 and "rewound gone.txt" in rewound.stdout and "rewound c.txt" in rewound.stdout
    outside = auger_cli("pending", "discard", "../b.txt", home=auger_home, cwd=project)
    assert outside.returncode == 1 and "nothing is pending for ../b.txt" in outside.stderr
    (project / "sub").mkdir()
    discarded = auger_cli("pending", "discard", "../b.txt", "-C", str(project), home=auger_home, cwd=project / "sub")
    assert discarded.returncode == 0 and "discarded b.txt" in discarded.stdout, discarded  # relative to where typed
    assert (project / "gone.txt").exists() and not (project / "c.txt").exists()
    none = auger_cli("pending", "list", "-s", session_id, home=auger_home, cwd=project)
    assert "nothing is pending" in none.stdout

    diff = auger_cli("diff", session_id[:8], home=auger_home, cwd=project)  # the apply, as a change of its own
    assert "+2\n+3" in diff.stdout and "b.txt" not in diff.stdout, diff.stdout
    undone = auger_cli("undo", session_id[:8], home=auger_home, cwd=project)
    assert undone.returncode == 0, undone.stderr
    assert (project / "a.txt").read_text() == "one\ntwo\n"

    # the model hears of it at the next turn
    server.add(Reply(text="noted"))
    resumed = auger_cli("resume", session_id, "--base-url", server.base_url, "-m", "m", *FAST_ARGS, "next",
                        home=auger_home, cwd=project)
    assert resumed.returncode == 0, resumed.stderr
    sent = json.dumps(server.chat_requests[-1].messages)
    assert "The user applied your queued changes to: a.txt" in sent and "The user rewound" in sent
    assert "The user discarded your queued changes to: b.txt" in sent


def test_pending_commands_say_when_there_is_nothing(project, auger_home):
    result = auger_cli("pending", "list", home=auger_home, cwd=project)
    assert result.returncode != 0 and "has pending changes" in result.stderr
    assert "Traceback" not in result.stderr
