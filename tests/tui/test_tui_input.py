"""Input features in the real program in tmux: @path attachments, !cmd, /init, hostile model text."""

from __future__ import annotations

from tests.support.mock_openai import Reply
from tests.tui.conftest import both_ways


@both_ways
def test_at_mention_attaches_a_project_file_but_nothing_outside(term, server, project, tmp_path, way):
    (project / "notes.txt").write_text("the secret sauce is basil\n")
    (tmp_path / "outside.txt").write_text("not for the model\n")
    server.add(Reply(text="got it"))
    t = term()
    t.ready()
    t.submit("summarise @notes.txt and @../outside.txt")
    t.wait_for("attached notes.txt")
    t.wait_for("got it")
    sent = [m["content"] for m in server.chat_requests[-1].messages if m["role"] == "user"][-1]
    assert '<file path="notes.txt">\nthe secret sauce is basil' in sent
    assert "not for the model" not in sent


@both_ways
def test_bang_runs_a_shell_command_and_the_model_sees_it(term, server, project, way):
    server.add(Reply(text="I see the output"))
    t = term()
    t.ready()
    t.submit("!echo from-the-user > made.txt; cat made.txt")
    t.wait_for("✓ shell")
    assert (project / "made.txt").read_text() == "from-the-user\n"
    t.submit("what did I run?")
    t.wait_for("I see the output")
    users = [m["content"] for m in server.chat_requests[-1].messages if m["role"] == "user"]
    assert any("I ran this shell command myself" in u and "from-the-user" in u for u in users)


@both_ways
def test_control_sequences_from_the_model_are_not_passed_to_the_terminal(term, server, way):
    server.add(Reply(text="before \x1b[2J\x1b[H\x1b]0;pwned\x07after"))
    t = term()
    t.ready()
    t.submit("hi")
    shown = t.wait_until(lambda s: "before after" in s and "› hi" in s, "the answer, its escapes removed")
    assert "auger · new session" in shown and "pwned" not in shown and "[2J" not in shown
    assert "\x1b" not in t.screen(ansi=True).replace("\x1b[", "").replace("\x1b(B", "")  # no OSC/other escapes


def test_ctrl_g_edits_the_prompt_in_editor(term, server, tmp_path):
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\nprintf "written in the editor" > "$1"\n')
    editor.chmod(0o755)
    server.add(Reply(text="editor text received"))
    t = term(env={"EDITOR": str(editor), "VISUAL": str(editor)})
    t.ready()
    t.type("draft")
    t.send("C-g")
    t.wait_for("› written in the editor")
    t.send("Enter")
    t.wait_for("editor text received")
    assert server.chat_requests[-1].messages[-1]["content"] == "written in the editor"


def test_history_is_kept_across_runs_and_searchable(term, server):
    server.add(Reply(text="one"))
    t = term()
    t.ready()
    t.submit("a memorable pelican prompt")
    t.wait_for("one")
    t.send("C-d")
    t.wait_for("AUGER-EXITED:0", whole=True)
    t2 = term()
    t2.ready()
    t2.send("C-r")
    t2.type("pelican")
    t2.wait_for("a memorable pelican prompt")


def test_shift_enter_and_alt_enter_write_a_multi_line_prompt(term, server):
    server.add(Reply(text="got three lines"))
    t = term()
    t.ready()
    t.type("first line")
    t.type("\x1b[13;2u")  # Shift-Enter as the kitty keyboard protocol reports it
    t.type("second line")
    t.send("M-Enter")  # Alt-Enter
    t.type("third line")
    t.wait_for("third line")
    assert not server.chat_requests, "a new-line key must not send the prompt"
    t.send("Enter")
    t.wait_for("got three lines")
    users = [m["content"] for m in server.chat_requests[-1].messages if m["role"] == "user"]
    assert "first line\nsecond line\nthird line" in users
