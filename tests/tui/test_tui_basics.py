"""The interactive terminal, driven for real in tmux against the mock model server."""

from __future__ import annotations

import re
import time

from tests.support.mock_openai import Reply, ToolCall
from tests.tui.conftest import both_ways
from tests.tui.terminal import status_line


@both_ways
def test_a_prompt_streams_an_answer_and_quitting_leaves_the_transcript(term, server, way):
    server.add(Reply(text="First paragraph with **bold**.\n\n```python\nprint('hi')\n```\n\nThe end."))
    t = term()
    t.ready()
    t.submit("say hello")
    shown = t.wait_until(lambda s: "The end." in s and "mock-model" in status_line(s)
                         and "esc to interrupt" not in s, "the turn's end with the prompt redrawn")
    assert "› say hello" in shown and "print('hi')" in shown and "**bold**" not in shown  # rendered Markdown
    assert shown.index("First paragraph") < shown.index("print('hi')") < shown.index("The end.")
    assert "mock-model" in status_line(shown) and "auto mode" in status_line(shown)
    assert server.chat_requests[-1].messages[-1]["content"] == "say hello"
    t.send("C-d")
    after = t.wait_for("AUGER-EXITED:0", whole=True)
    assert "› say hello" in after and "The end." in after  # the transcript stays in the scrollback
    assert after.index("The end.") < after.index("AUGER-EXITED")
    assert ("auger: detached; session" if way == "remote" else "session saved") in after


def test_ctrl_c_twice_at_an_empty_prompt_quits(term, server):
    t = term()
    t.ready()
    t.send("C-c")
    t.wait_for("press ctrl-c again")
    t.send("C-c")
    t.wait_for("AUGER-EXITED:0", whole=True)


@both_ways
def test_escape_interrupts_a_running_shell_command_within_a_second(term, server, way):
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "echo started; sleep 30"})]), Reply(text="unused"))
    t = term()
    t.ready()
    t.submit("run it")
    t.wait_for("started")  # the live area shows the command's output while it runs
    sent = time.monotonic()
    t.send("Escape")
    t.wait_for("■ interrupted", timeout=10)
    elapsed = time.monotonic() - sent
    print(f"escape to interrupted shown: {elapsed:.2f}s")
    assert elapsed < 1.0, f"the interrupt took {elapsed:.2f}s"
    t.wait_for("■ shell echo started; sleep 30 (stopped)")  # the call's line says it was cut short
    assert len(server.chat_requests) == 1  # no model call after the interrupt


@both_ways
def test_a_message_typed_during_a_turn_is_queued_and_injected(term, server, way):
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "sleep 3; echo slept"})]), Reply(text="saw both"))
    t = term()
    t.ready()
    t.submit("first task")
    t.wait_for("⋯ shell")
    t.submit("also do this")
    t.wait_for("queued: also do this")
    t.wait_for("saw both")
    sent = [m.get("content") for m in server.chat_requests[1].messages if m["role"] == "user"]
    assert "also do this" in sent
    t.wait_for("› also do this")  # shown in the transcript where it joined the conversation
    t.wait_gone("queued:")


def test_resizing_to_80x24_keeps_it_usable(term, server):
    server.add(Reply(text="word " * 60 + "\n\nshort tail"))
    t = term(width=120, height=40)
    t.ready()
    t.resize(80, 24)
    t.submit("after resize")
    shown = t.wait_until(lambda s: "short tail" in s and "› after resize" in s and "mock-model" in status_line(s),
                         "the answer and the redrawn status line")
    assert all(len(line) <= 80 for line in shown.splitlines())


def test_no_color_is_honoured(term, server):
    server.add(Reply(text="plain **text**"))
    t = term(env={"NO_COLOR": "1"})
    t.ready()
    t.submit("hi")
    t.wait_for("plain text")
    # attributes stay (captured with escapes; the final render may land a moment after the text)...
    ansi = t.wait_until(lambda shown: "\x1b[1m" in shown, "bold text", ansi=True)
    assert not re.search(r"\x1b\[(?:[0-9;]*;)?(?:3[0-7]|9[0-7]|38;[25])[;m]", ansi), ansi  # ...colours go


def test_a_session_that_cannot_open_is_one_line_and_a_failing_exit(term, server, project):
    t = term("--db", str(project))  # a directory, not a database file
    shown = t.wait_for("AUGER-EXITED:1", whole=True)
    assert "✗ cannot start a session" in shown and "Traceback" not in shown


@both_ways
def test_a_prompt_on_the_command_line_is_sent_first(term, server, way):
    server.add(Reply(text="answer to the argument"))
    t = term("explain this project")
    t.wait_for("answer to the argument")
    assert t.wait_for("› explain this project")
    assert server.chat_requests[-1].messages[-1]["content"] == "explain this project"


@both_ways
def test_ctrl_o_shows_reasoning_in_full_and_each_calls_output(term, server, way):
    thoughts = "\n".join(f"thought {i}" for i in range(1, 7))
    shell = ToolCall("shell", {"command": "for i in 1 2 3 4 5 6; do echo out-line-$i; done"})
    server.add(Reply(reasoning=thoughts, tool_calls=[shell]), Reply(text="first done"),
               Reply(reasoning=thoughts, tool_calls=[shell]), Reply(text="second done"))
    t = term(width=120, height=60)
    t.ready()
    t.submit("one")
    shown = t.wait_until(lambda s: "first done" in s and "✓ shell" in s, "the first turn printed")
    assert "thought 3" in shown and "thought 4" not in shown and "3 more lines (ctrl-o shows it all)" in shown
    assert "out-line-6" not in shown, "a successful call's output stays collapsed"
    t.send("C-o")
    t.wait_for("details shown")
    t.submit("two")
    shown = t.wait_until(lambda s: "second done" in s and s.count("✓ shell") == 2 and "out-line-6" in s,
                         "the expanded turn")
    assert "thought 6" in shown
    t.send("C-o")
    t.wait_for("details hidden")
