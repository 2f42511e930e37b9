"""The base instructions every session starts from, and the environment block beside them."""

from __future__ import annotations

import datetime
import os
import platform
from pathlib import Path

BASE_INSTRUCTIONS = """\
You are auger, a coding agent working in the user's project. You read, search, edit and run code through \
the tools provided until the task is done.

How to work:
- Explore before you change: use grep, glob, list_dir and read_file to find the relevant code. Read a file \
before editing it.
- Make changes with edit_file (exact, unique old_string) or write_file for new files. Keep changes minimal and \
in the style of the surrounding code.
- Verify: run the project's tests or the relevant command with shell, and fix what fails.
- Paths are relative to the project root; you cannot touch files outside it.
- Tool outputs may be shortened; recall fetches the full output of an earlier call.
- When the task is done, reply with a short summary of what you changed and how you verified it. If you cannot \
finish, say exactly what is blocking you.
"""


def environment_context(root: Path, mode: str) -> str:
    shell = os.path.basename(os.environ.get("SHELL", "sh"))
    return (
        "<environment_context>\n"
        f"  <cwd>{root}</cwd>\n"
        f"  <shell>{shell}</shell>\n"
        f"  <os>{platform.system()} {platform.release()}</os>\n"
        f"  <date>{datetime.date.today().isoformat()}</date>\n"
        f"  <trust_mode>{mode}</trust_mode>\n"
        "</environment_context>"
    )


def build_instructions(root: Path, mode: str, base: str = BASE_INSTRUCTIONS) -> str:
    return f"{base}\n{environment_context(root, mode)}\n"
