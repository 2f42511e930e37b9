"""Renders the screenshots in docs/ from the real program in tmux: capture-pane with colours → rich's
SVG export → PNG (ImageMagick `convert` or `rsvg-convert`).

    python -m tests.tui.screenshots [OUT_DIR]   (default: docs/)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.support.mock_openai import MockChatServer, Reply, ToolCall
from tests.tui.terminal import Terminal

APP = "def greet(name):\n    return 'Helo, ' + name\n"


def to_png(ansi: str, title: str, out: Path) -> None:
    from rich.console import Console
    from rich.text import Text

    console = Console(record=True, width=100, force_terminal=True, color_system="standard", file=open(os.devnull, "w"))
    console.print(Text.from_ansi(ansi.rstrip("\n")))
    svg = out.with_suffix(".svg")
    svg.write_text(console.export_svg(title=title))
    if shutil.which("rsvg-convert"):
        subprocess.run(["rsvg-convert", "-o", str(out), str(svg)], check=True)
    else:
        subprocess.run(["convert", "-density", "110", str(svg), str(out)], check=True)
    svg.unlink()


def main() -> None:
    out_dir = Path(sys.argv[1] if len(sys.argv) > 1 else "docs")
    script = [
        Reply(text="I'll fix the greeting's typo.", reasoning="The greeting says Helo; edit app.py.",
              tool_calls=[ToolCall("edit_file", {"path": "app.py", "old_string": "'Helo, '",
                                                 "new_string": "'Hello, '"})]),
        Reply(tool_calls=[ToolCall("shell", {"command": "python3 -c 'import app; print(app.greet(\"auger\"))'"})]),
        Reply(text="Fixed: `greet` now says **Hello**.\n\n```python\ndef greet(name):\n    return 'Hello, ' + name\n```"),
    ]
    with MockChatServer(script) as server, tempfile.TemporaryDirectory() as tmp:
        home, project = Path(tmp, "home"), Path(tmp, "project")
        home.mkdir()
        project.mkdir()
        (project / "app.py").write_text(APP)
        term = Terminal(project, home, ["--base-url", server.base_url, "-m", "mock-model", "--mode", "safe",
                                        "-c", "generate_titles=false"], width=100, height=34)
        try:
            term.ready()
            term.submit("fix the typo in greet")
            term.wait_for("approve? [y]")
            term.wait_for("+    return 'Hello, ' + name")
            to_png(term.screen(ansi=True), "auger: an approval with its diff", out_dir / "tui-approval.png")
            term.send("y")
            term.wait_for("approve? [y]")
            term.wait_for("$ python3")
            term.send("s")
            term.wait_until(lambda s: "says Hello" in s and "esc to interrupt" not in s, "the answer")
            time.sleep(1)  # the last block is printed just after the turn's end redraws the prompt
            to_png(term.screen(ansi=True), "auger: the finished turn", out_dir / "tui-session.png")
        finally:
            term.close()
    print(f"wrote {out_dir}/tui-approval.png and {out_dir}/tui-session.png")


if __name__ == "__main__":
    main()
