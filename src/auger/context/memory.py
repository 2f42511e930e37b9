"""Memory: the instruction files a user keeps (and sees) rather than a hidden store.

What the agent "remembers" is what its instruction files say: the user's global AGENTS.md, the
project's AGENTS.md files and, when `memory = true` is in the user's config, the project's
`.auger/memory.md` — a plain file in the project, listed by `/memory`, read as part of the instructions
and editable like any other, to which the model may propose additions (the `remember` tool, each
addition approved by the user). Nothing is remembered anywhere else.

This module names those files (`instruction_files`, for `/memory`) and adds a line to one
(`append_line`, for `#text` in the terminal and the `remember` tool): beneath a handle on the file's
root, through a symlink only where it stays inside (a project's AGENTS.md linked to its CLAUDE.md
gets the line, and stays a link), atomically, with the change returned as a small diff.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from auger.context.project_docs import (
    ProjectDocs, discover_project_docs, doc_path, file_docs, global_doc_path, global_docs,
)
from auger.policy.fs import RootHandle, read_beneath
from auger.secrets.settings import secrets_settings

if TYPE_CHECKING:
    from auger.config import Config

MEMORY_PATH = ".auger/memory.md"  # the project's memory file, relative to its root
MEMORY_LABEL = f"{MEMORY_PATH} (notes remembered in this project; the user reads and edits them)"
MEMORY_LIMIT = 1 << 20  # a memory file larger than this is not appended to (it is no longer a list of notes)


def memory_docs(root: Path, max_bytes: int) -> ProjectDocs:
    """The project's memory file as instructions (empty when there is none)."""
    return file_docs(root, MEMORY_PATH, MEMORY_LABEL, max_bytes)


@dataclass(frozen=True)
class InstructionFile:
    kind: str  # "global" | "project" | "imported" | "memory"
    path: Path
    exists: bool


def instruction_files(root: Path, config_dir: Path, config: Config, cwd: Path | None = None) -> list[InstructionFile]:
    """The files the instructions are read from now, in the order they are read: the global doc, the
    project's docs from the repository root down to `cwd`, what they import, the memory file. The global
    doc, the project root's doc and (with `memory` on) the memory file are listed even when they do not
    exist yet: opening one is how a user starts it."""
    max_bytes = config.project_doc_max_bytes
    personal = global_docs(config_dir, max_bytes)
    project = discover_project_docs(cwd or root, fallback_names=config.project_doc_fallback_filenames,
                                    max_bytes=max_bytes, project=root, secrets=secrets_settings(config))
    found = [_entry("global", global_doc_path(config_dir)), *(_entry("imported", p) for p in personal.imports)]
    own = doc_path(root, config.project_doc_fallback_filenames)
    sources = project.sources if own in project.sources else [own, *project.sources]
    found += [_entry("project", p) for p in sources] + [_entry("imported", p) for p in project.imports]
    if config.memory:
        found.append(_entry("memory", Path(root) / MEMORY_PATH))
    return found


def _entry(kind: str, path: Path) -> InstructionFile:
    return InstructionFile(kind, path, path.is_file())


class NoteRefused(Exception):
    """A line that cannot be added; the message says why."""


def append_line(root: Path | RootHandle, rel: str, line: str, *, write: bool = True) -> str:
    """Add `line` at the end of the file at `rel` beneath `root` (created, with its directories, when
    missing) and return the change as a unified diff; with `write=False` only the diff (a preview).
    NoteRefused for an empty or multi-line note, a path leading out, or a file that is not a text file."""
    line = " ".join(line.split())
    if not line:
        raise NoteRefused("nothing to remember: the note is empty")
    handle = root if isinstance(root, RootHandle) else RootHandle(root)
    try:
        real = _real_path(handle, rel)
        try:
            old = read_beneath(handle, real, limit=MEMORY_LIMIT)
        except FileNotFoundError:
            old = b""
        except OSError as exc:
            raise NoteRefused(f"{rel}: cannot read it ({exc.strerror or exc})") from None
        if b"\0" in old:
            raise NoteRefused(f"{rel} is not a text file")
        text = old.decode("utf-8", errors="surrogateescape")
        new = text + ("\n" if text and not text.endswith("\n") else "") + line + "\n"
        if write:
            from auger.changes.files import write_beneath

            write_beneath(handle, real, new.encode("utf-8", errors="surrogateescape"), None)
        return "".join(difflib.unified_diff(text.splitlines(keepends=True), new.splitlines(keepends=True),
                                            f"a/{rel}", f"b/{rel}", n=2))
    finally:
        if handle is not root:
            handle.close()


def _real_path(handle: RootHandle, rel: str) -> str:
    """`rel` with symlinks resolved beneath the handle (refused when one leads out)."""
    try:
        where = handle.resolve(rel, follow=True)
    except ValueError as exc:  # PathEscape
        raise NoteRefused(str(exc)) from None
    except FileNotFoundError:  # a directory on the way is missing: made when the file is written
        return os.path.normpath(rel)
    except OSError as exc:
        raise NoteRefused(f"{rel}: {exc.strerror or exc}") from None
    os.close(where.parent_fd)
    if not where.name:
        raise NoteRefused(f"{rel} is the root directory, not a file")
    return where.rel
