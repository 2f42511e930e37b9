"""Notifications from the terminal UI, in the real program in tmux: the user's `notify` program hears the
approval request, each turn's end and the shutdown; the terminal gets a desktop-notification escape while
it reports being unfocused, and none while focused."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.support.mock_openai import Reply, ToolCall
from tests.test_notify import RECORDER, recorded
from tests.tui.conftest import both_ways

FOCUS_OUT, FOCUS_IN = ("1b", "5b", "4f"), ("1b", "5b", "49")  # what a terminal sends: CSI O, CSI I


@both_ways
def test_notify_program_and_desktop_notifications(term, server, project, auger_home, tmp_path, way):
    out, raw = tmp_path / "events.jsonl", tmp_path / "pane.raw"
    (auger_home / "config.toml").write_text(f"notify = {json.dumps([sys.executable, str(RECORDER), str(out)])}\n")
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "touch approved"})]), Reply(text="made it"),
               Reply(text="second answer"))
    t = term("--mode", "safe", width=120, env={"TERM_PROGRAM": "WezTerm"})
    t.ready()
    t._tmux("pipe-pane", "-t", "0", "-O", f"cat >> {raw}")  # every byte the program writes to the terminal
    t._tmux("send-keys", "-t", "0", "-H", *FOCUS_OUT)  # the user looks elsewhere
    t.submit("make it")
    t.wait_for("[y] yes, once")
    t.send("y")
    t.wait_for("made it")
    t.idle()
    t._tmux("send-keys", "-t", "0", "-H", *FOCUS_IN)  # ...and back: the next turn ends unannounced
    t.submit("again")
    t.wait_for("second answer")
    t.idle()
    t.send("C-d")
    t.wait_for("AUGER-EXITED:0", whole=True)

    # a server's session is told to the server's notify program (the same home here); leaving it leaves it running
    told = ["approval_request", "turn_ended", "turn_ended"] + (["shutdown_complete"] if way == "local" else [])
    events = recorded(out, len(told))
    assert [e["type"] for e in events] == told
    assert events[0]["details"]["subject"] == "touch approved"
    assert [e["last_agent_message"] for e in events[1:3]] == ["made it", "second answer"]
    assert (project / "approved").exists()

    written = Path(raw).read_bytes().decode("utf-8", "replace")
    # inside tmux the escape is wrapped for passthrough (every ESC doubled); the terminal's own is OSC 9
    wrapped = "\x1bPtmux;\x1b\x1b]9;auger: {}\x07\x1b\\"
    assert written.count(wrapped.format("approval needed: touch approved")) == 1
    assert written.count(wrapped.format("turn complete")) == 1  # the second turn ended while focused
    assert "[I" not in t.history() and "[O" not in t.history()  # focus reports are never typed into the prompt


def test_the_escape_follows_the_terminal():
    from auger.frontends.tui.notify import escape_for, notification_text

    assert escape_for({"TERM_PROGRAM": "iTerm.app"})("done") == "\x1b]9;auger: done\x07"
    assert escape_for({"TERM": "foot"})("done") == "\x1b]777;notify;auger;done\x07"
    assert escape_for({"TERM": "xterm-256color", "VTE_VERSION": "7600"})("done") == "\x1b]777;notify;auger;done\x07"
    assert escape_for({"TERM": "xterm-kitty"})("done") == "\x1b]99;;auger: done\x1b\\"
    assert escape_for({"TERM_PROGRAM": "Apple_Terminal"}) is None  # it shows neither: nothing is sent
    assert escape_for({"TERM_PROGRAM": "tmux", "TMUX": "/tmp/t,1,0", "LC_TERMINAL": "iTerm2"})("x") == \
        "\x1bPtmux;\x1b\x1b]9;auger: x\x07\x1b\\"
    assert notification_text("4;3;\x1b]0;evil\x07 title\nnext") == "4;3; ]0;evil  title next"
    # OSC 9 text that starts with digits would be a subcommand (progress, cwd): it always starts with "auger: "
    assert escape_for({})("4;3;50") == "\x1b]9;auger: 4;3;50\x07"
