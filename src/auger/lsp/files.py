"""The project as the code-intelligence parts read it: files beneath the root, never through a link that leads
out of it, each at most MAX_FILE bytes, in the walk the search tools use (tools/walk.py: ripgrep's ignore
rules), which of them mention a name — and never a protected file (auger/secrets: `.env`, keys, what
`.augerignore` names), which the file tools refuse and the sandbox hides from the servers too.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from auger.policy.paths import PathEscape, resolve_inside
from auger.tools.walk import walk

MAX_FILE = 2 * 1024 * 1024  # bytes: a larger file is generated or data, not something to analyse
RG_TIMEOUT = 10.0  # seconds a search for a name may take


def _nothing_refused(rel: str) -> bool:
    return False


@dataclass(frozen=True)
class Project:
    """A project root, and what is never read beneath it (`refused(rel)`: protected files)."""

    root: Path
    refused: Callable[[str], bool] = field(default=_nothing_refused, compare=False)

    def read(self, rel: str) -> str | None:
        """The file's text (undecodable bytes kept as surrogate escapes), or None: absent, protected, not a
        regular file, too large, or reached through a link that leaves the project."""
        try:
            path = resolve_inside(self.root, rel)
            if self.refused(os.path.relpath(path, self.root)) or self.refused(os.path.normpath(rel)):
                return None
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO never blocks
            with open(fd, "rb") as f:
                info = os.fstat(f.fileno())
                if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE:
                    return None
                data = f.read(MAX_FILE + 1)
        except (OSError, PathEscape, ValueError):
            return None
        return data.decode("utf-8", "surrogateescape") if len(data) <= MAX_FILE else None

    def files(self, extensions: frozenset[str], limit: int = 50_000) -> list[str]:
        """The project's files with one of `extensions` (lower-case, with the dot), relative, in walk order."""
        found = []
        for entry in walk(self.root):
            if os.path.splitext(entry.name)[1].lower() in extensions and not self.refused(entry.rel):
                found.append(entry.rel)
                if len(found) >= limit:
                    break
        return found

    async def mentioning(self, word: str, extensions: frozenset[str], limit: int) -> list[str]:
        """Up to `limit` files with one of `extensions` that contain `word` as a whole word (ripgrep when it
        is installed, else a walk that reads each file)."""
        return await asyncio.to_thread(self._mentioning, word, extensions, limit)

    def _mentioning(self, word: str, extensions: frozenset[str], limit: int) -> list[str]:
        rg = shutil.which("rg")
        if rg is None or not word.isidentifier():
            return self._read_mentioning(word, extensions, limit)
        globs = [arg for ext in sorted(extensions) for arg in ("--glob", f"*{ext}")]
        try:
            done = subprocess.run(
                [rg, "--no-config", "--files-with-matches", "--null", "--hidden", "--no-require-git",
                 "--no-ignore-global", "--no-ignore-messages", "--word-regexp", "--fixed-strings", *globs,
                 "--glob", "!.git", "-e", word, "--", "."], cwd=self.root, stdin=subprocess.DEVNULL,
                capture_output=True, timeout=RG_TIMEOUT, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return []
        names = sorted(os.path.normpath(os.fsdecode(name)) for name in done.stdout.split(b"\0") if name)
        return [name for name in names if not self.refused(name)][:limit]

    def _read_mentioning(self, word: str, extensions: frozenset[str], limit: int) -> list[str]:
        import re

        pattern = re.compile(rf"(?<![\w$]){re.escape(word)}(?![\w$])")
        found = []
        for rel in self.files(extensions):
            text = self.read(rel)
            if text is not None and pattern.search(text):
                found.append(rel)
                if len(found) >= limit:
                    break
        return sorted(found)
