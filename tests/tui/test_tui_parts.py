"""The pure parts of the terminal UI: streaming Markdown splits, hostile text, mentions, fuzzy matching."""

from __future__ import annotations

import os
import re

from auger.frontends.tui.compose import compose, fuzzy, inside
from auger.frontends.tui.render import Renderer, clean
from auger.protocol import events as ev


def plain(ansi: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", ansi)


def test_streamed_answer_is_printed_by_paragraph_never_inside_a_code_block():
    r = Renderer(80)
    printed = r.handle(ev.MessageDelta("t", "Intro paragraph.\n\n```python\nx = 1\n\ny = 2\n"))
    assert "Intro paragraph." in printed and "x = 1" not in printed  # the open code block waits
    printed = plain(r.handle(ev.MessageDelta("t", "```\n\nTail")))
    assert "x = 1" in printed and "y = 2" in printed and "Tail" not in printed
    assert "Tail" in "".join(text for _, text in r.live_lines())
    assert "Tail" in plain(r.handle(ev.AgentMessage("t", "whole text")))  # the rest, not the whole text again


def test_clean_removes_terminal_control_sequences():
    assert clean("a\x1b]0;title\x07b\x1b[2Jc\x9bd\x07e") == "abcde"
    assert clean("keep\ttabs\nand lines") == "keep\ttabs\nand lines"


def test_mentions_attach_only_project_files(tmp_path):
    root = tmp_path / "p"
    root.mkdir()
    (root / "a.py").write_text("print(1)\n")
    (tmp_path / "secret").write_text("s3cret\n")
    os.symlink(tmp_path / "secret", root / "link")
    msg = compose("look at @a.py, @link and @../secret and @missing", root)
    assert msg.attached == [str((root / "a.py").resolve())]
    assert '<file path="a.py">\nprint(1)' in msg.text and "s3cret" not in msg.text
    assert inside(root, "../secret") is None and inside(root, "link") is None


def test_fuzzy_prefers_matches_in_the_file_name():
    files = ["src/auger/frontends/cli.py", "docs/client.md", "tests/test_cli.py", "README.md"]
    assert fuzzy("cli", files) == ["src/auger/frontends/cli.py", "docs/client.md", "tests/test_cli.py"]
    assert fuzzy("agfc", files) == ["src/auger/frontends/cli.py"]  # scattered letters still match
    assert fuzzy("zzz", files) == []
