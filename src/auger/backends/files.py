"""The agent's fs/read_text_file and fs/write_text_file, beneath the project root like auger's own tools.

Paths come from the agent (absolute, by the protocol) and are treated as hostile: they are opened
beneath the session's root handle (policy/fs.py: no `..` or symlink out, no NUL bytes), writes never
follow a symlink and never land in a git directory (policy/gitguard.py), and land atomically
(changes/files.py). A refusal is a `FileRefused` whose message the agent reads.
"""

from __future__ import annotations

import errno
import os

from auger.policy.fs import RootHandle, read_beneath
from auger.policy.gitguard import git_write_refusal
from auger.policy.paths import PathEscape

MAX_READ_BYTES = 10 << 20  # one read answer travels as one JSON line


class FileRefused(Exception):
    """Why a file request is refused, in one line."""


def relative(handle: RootHandle, raw: str) -> str:
    """The project-relative path the agent means, or FileRefused when it is outside the project."""
    try:
        rel = os.path.normpath(handle.relative(raw))
    except PathEscape as exc:
        raise FileRefused(str(exc)) from None
    if rel == "." or rel.split("/")[0] == "..":
        raise FileRefused(f"{raw} is not a file inside the project {handle.path}")
    return rel


def read_text(handle: RootHandle, raw: str, line: int | None = None, limit: int | None = None) -> str:
    """The file's text (undecodable bytes replaced), from 1-based `line`, at most `limit` lines."""
    rel = relative(handle, raw)
    try:
        data = read_beneath(handle, rel, limit=MAX_READ_BYTES)
    except PathEscape as exc:
        raise FileRefused(str(exc)) from None
    except FileNotFoundError:
        raise FileRefused(f"{raw} does not exist") from None
    except IsADirectoryError:
        raise FileRefused(f"{raw} is a directory") from None
    except OSError as exc:
        if exc.errno == errno.EFBIG:
            raise FileRefused(f"{raw} is larger than {MAX_READ_BYTES >> 20} MB") from None
        raise FileRefused(f"cannot read {raw}: {exc.strerror or exc}") from None
    text = data.decode("utf-8", "replace")
    if line is None and limit is None:
        return text
    lines = text.splitlines(keepends=True)
    start = max(0, (line or 1) - 1)
    end = len(lines) if limit is None else start + max(0, limit)
    return "".join(lines[start:end])


def write_refusal(handle: RootHandle, raw: str) -> tuple[str, str | None]:
    """(the relative path, why writing it is refused or None); checked before anything is written."""
    rel = relative(handle, raw)
    return rel, git_write_refusal(handle, rel)


def write_text(handle: RootHandle, rel: str, content: str) -> bool:
    """Write `content` at `rel` (checked by `write_refusal`) atomically, never through a symlink;
    True when the file is new."""
    from auger.changes.files import write_beneath

    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError:
        raise FileRefused("content is not valid UTF-8 text") from None
    try:
        where = handle.resolve(rel, follow=False, links=False)
        try:
            created = not _exists(where.parent_fd, where.name)
        finally:
            os.close(where.parent_fd)
    except FileNotFoundError:
        created = True
    except PathEscape as exc:
        raise FileRefused(str(exc)) from None
    except OSError as exc:
        raise FileRefused(f"cannot write {rel}: {exc.strerror or exc}") from None
    try:
        write_beneath(handle, rel, data, None)
    except PathEscape as exc:
        raise FileRefused(str(exc)) from None
    except OSError as exc:
        raise FileRefused(f"cannot write {rel}: {exc.strerror or exc}") from None
    return created


def _exists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        return True
    except FileNotFoundError:
        return False
