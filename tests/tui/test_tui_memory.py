"""Memory, per-turn settings, /init and the rate limits in the real program in tmux: `#` adds a line to a
file the user picks and the next request carries it, /memory lists the instruction files and opens one in
$EDITOR, /effort shows in the status line, /init shows the drafted AGENTS.md's diff and writes it only on
yes, and the provider's rate limits appear in the status line."""

from __future__ import annotations

import sys

from tests.support.mock_openai import Reply
from tests.tui.terminal import status_line

ROOMY = {"x-ratelimit-limit-requests": "100", "x-ratelimit-remaining-requests": "98",
         "x-ratelimit-reset-requests": "1s", "x-ratelimit-limit-tokens": "40000",
         "x-ratelimit-remaining-tokens": "38500", "x-ratelimit-reset-tokens": "20ms"}


def sent(server) -> str:
    return str(server.chat_requests[-1].body["messages"])


def test_a_hash_note_goes_to_the_file_picked_and_the_next_request_carries_it(term, server, project, auger_home):
    (project / "AGENTS.md").write_text("# Rules\n")
    server.add(Reply(text="first"), Reply(text="second"), Reply(text="third"))
    t = term()
    t.ready()
    t.submit("hello")
    t.wait_for("first")
    t.idle()
    t.submit("#Always run make lint (NOTE-88)")
    t.wait_for("add it to: [p] project AGENTS.md  [g] global AGENTS.md")
    t.send("p")
    t.wait_for("+Always run make lint (NOTE-88)")
    assert (project / "AGENTS.md").read_text() == "# Rules\nAlways run make lint (NOTE-88)\n"
    t.submit("go on")
    t.wait_for("second")
    assert "NOTE-88" in sent(server)
    t.idle()
    t.submit("#Prefer small commits (GLOBAL-5)")
    t.wait_for("add it to:")
    t.send("g")
    t.wait_for("+Prefer small commits (GLOBAL-5)")
    assert (auger_home / "AGENTS.md").read_text() == "Prefer small commits (GLOBAL-5)\n"
    t.submit("and now")
    t.wait_for("third")
    assert "GLOBAL-5" in sent(server) and "NOTE-88" in sent(server)


def test_memory_lists_the_files_and_opens_one_in_the_editor(term, server, project, auger_home, tmp_path):
    (project / "AGENTS.md").write_text("root rules\n@docs/style.md\n")
    (project / "docs").mkdir()
    (project / "docs" / "style.md").write_text("style rules\n")
    editor = tmp_path / "editor.py"
    editor.write_text("import sys\nopen(sys.argv[1], 'a').write('Edited in the editor (EDIT-31).\\n')\n")
    server.add(Reply(text="first"), Reply(text="second"))
    t = term(width=250, env={"EDITOR": f"{sys.executable} {editor}"})
    t.ready()
    t.submit("/memory")
    t.wait_for("instruction files")
    shown = t.wait_for("docs/style.md")
    assert f"1. global   {auger_home / 'AGENTS.md'}  (not created yet)" in shown
    assert f"2. project  {project / 'AGENTS.md'}" in shown and f"3. imported {project / 'docs' / 'style.md'}" in shown
    t.submit("/memory 3")
    t.wait_for("the next turn reads it as it is now")
    assert (project / "docs" / "style.md").read_text().endswith("(EDIT-31).\n")
    t.submit("hi")
    t.wait_for("first")
    assert "EDIT-31" in sent(server)


def test_effort_shows_in_the_status_line_and_rate_limits_too(term, server):
    server.stream_headers = ROOMY
    server.add(Reply(text="first"))
    t = term(width=160)
    t.ready()
    t.submit("/effort high")
    t.wait_for("next turns: reasoning effort high")
    t.wait_until(lambda s: "mock-model (high)" in status_line(s), "the effort in the status line")
    t.submit("hello")
    t.wait_for("first")
    t.wait_until(lambda s: "limits 98/100 req · 38k/40k tok" in status_line(s), "the rate limits in the status line")
    t.submit("/effort")
    t.wait_for("reasoning effort: high")


def test_init_shows_the_draft_and_writes_it_only_on_yes(term, server, project):
    (project / "AGENTS.md").write_text("# Guide\n")
    server.add(Reply(text="# Guide\n\n- Run `make check` (INIT-DRAFT).\n"), Reply(text="# Other\n"))
    t = term()
    t.ready()
    t.submit("/init")
    t.wait_for("write AGENTS.md? [y] yes, write it  [n] no, drop it")
    t.wait_for("+- Run `make check` (INIT-DRAFT).", whole=True)
    assert (project / "AGENTS.md").read_text() == "# Guide\n"  # nothing written before the answer
    t.send("y")
    t.wait_for("wrote AGENTS.md")
    assert "INIT-DRAFT" in (project / "AGENTS.md").read_text()
    t.submit("/init")
    t.wait_for("write AGENTS.md?")
    t.send("n")
    t.wait_for("AGENTS.md not written")
    assert "INIT-DRAFT" in (project / "AGENTS.md").read_text()
