"""What the prompt offers and what a submitted line becomes: `/` and `@path` completion, and the
files and images a message attaches.

Mentioned paths come from the user, but they still must lie inside the project (after resolving
symlinks), so a mention never reads something the session's tools could not.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")
MAX_ATTACH = 64 * 1024
MAX_FILES = 20000
_SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", "venv", ".mypy_cache", ".pytest_cache", ".tox",
              "dist", "build", ".idea"}
_MENTION = re.compile(r"(?<!\S)@(\S+)")


@dataclass
class Message:
    text: str
    images: list[str] = field(default_factory=list)
    attached: list[str] = field(default_factory=list)


def inside(root: Path, candidate: str) -> Path | None:
    """The file `candidate` names, if it is one and lies inside `root`."""
    try:
        path = (root / os.path.expanduser(candidate)).resolve()
        path.relative_to(root.resolve())
    except (ValueError, OSError, RuntimeError):
        return None
    return path if path.is_file() else None


def compose(line: str, root: Path) -> Message:
    """A submitted line with its `@path` mentions attached: images as images, text files as context
    appended to the message. Mentions that name no file inside the project stay plain text."""
    msg = Message(line)
    blocks: list[str] = []
    for match in _MENTION.finditer(line):
        path = inside(root, match.group(1).rstrip(",.;:"))
        if path is None or str(path) in msg.images or str(path) in msg.attached:
            continue
        if path.suffix.lower() in IMAGE_SUFFIXES:
            msg.images.append(str(path))
            continue
        data = path.read_bytes()[:MAX_ATTACH]
        if b"\0" in data:
            continue  # binary: the model cannot read it as text
        rel = path.relative_to(root.resolve()).as_posix()
        note = "" if path.stat().st_size <= MAX_ATTACH else f" (first {MAX_ATTACH} bytes)"
        blocks.append(f'<file path="{rel}"{note}>\n{data.decode("utf-8", "replace")}\n</file>')
        msg.attached.append(str(path))
    for word in line.split():  # a dropped image file arrives as its bare (maybe quoted) path
        word = word.strip("'\"")
        if word.lower().endswith(IMAGE_SUFFIXES) and not word.startswith("@"):
            path = Path(os.path.expanduser(word))
            path = path if path.is_absolute() else root / path
            if path.is_file() and str(path.resolve()) not in msg.images:
                msg.images.append(str(path.resolve()))
    if blocks:
        msg.text = line + "\n\n" + "\n\n".join(blocks)
    return msg


def project_files(root: Path, limit: int = MAX_FILES) -> list[str]:
    """Relative paths of the project's files, skipping VCS and build noise, at most `limit`."""
    found: list[str] = []
    for base, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        rel = os.path.relpath(base, root)
        for name in sorted(files):
            found.append(name if rel == "." else f"{rel}/{name}")
            if len(found) >= limit:
                return found
    return found


def fuzzy(query: str, candidates: Iterable[str], limit: int = 30) -> list[str]:
    """Candidates containing the query's characters in order: the file named so first, then names that
    start with it, contain it, paths that contain it, and scattered matches; shorter paths first."""
    q = query.lower()
    scored = []
    for cand in candidates:
        c = cand.lower()
        pos, start, gaps = -1, -1, 0
        for ch in q:
            nxt = c.find(ch, pos + 1)
            if nxt < 0:
                break
            gaps += nxt - pos - 1 if pos >= 0 else 0
            start = nxt if start < 0 else start
            pos = nxt
        else:
            base = c.rsplit("/", 1)[-1]
            rank = (0 if base.split(".")[0] == q else 1 if base.startswith(q) else 2 if q in base else
                    3 if q in c else 4)
            scored.append((rank, gaps, len(cand), cand))
    return [s[-1] for s in sorted(scored)[:limit]]


def make_completer(root: Path, commands: Callable[[], list[tuple[str, str]]]):
    """A prompt_toolkit completer: `/command` at the start of the input, `@path` anywhere."""
    from prompt_toolkit.completion import Completer, Completion

    class _Completer(Completer):
        def __init__(self) -> None:
            self._files: list[str] | None = None

        def get_completions(self, document, complete_event):
            before = document.text_before_cursor
            word = before.split()[-1] if before and not before[-1].isspace() else ""
            if before.startswith("/") and " " not in before:
                for name, help_text in commands():
                    if name.startswith(before[1:]):
                        yield Completion(name, start_position=-(len(before) - 1), display=f"/{name}",
                                         display_meta=help_text)
            elif word.startswith("@"):
                if self._files is None:
                    self._files = project_files(root)
                for path in fuzzy(word[1:], self._files):
                    yield Completion(path, start_position=-(len(word) - 1))

    return _Completer()
