"""Per-turn settings beside the trust mode and the model: the reasoning effort and summary, and the
working directory, changed between turns by a `set_turn_context` op.

Why they are recorded as items (`turn_settings`, never shown to the model) rather than kept in the
session record: a fork copies a session's items, and a resumed session reads them back, so both send
exactly the requests the original would have. The model hears of a new working directory the way it
hears of a new mode or model — an environment change — and the instructions are read again from the
root down to that directory at the next user turn (nested AGENTS.md files apply there).

The directory is resolved beneath a handle on the project root (no `..` out, no symlink out) and kept
relative to it, so the same setting names the same place in pending mode's copy of the project.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Sequence

from auger.policy.fs import RootHandle
from auger.protocol.items import Item, TurnSettings
from auger.protocol.ops import SetTurnContext

SUMMARIES = ("auto", "concise", "detailed", "none")


class SettingRefused(ValueError):
    """A setting that cannot be used; the message says which and why."""


def recorded_settings(items: Sequence[Item]) -> TurnSettings:
    """The settings the last `turn_settings` item left (defaults when there is none)."""
    for item in reversed(items):
        if isinstance(item, TurnSettings):
            return item
    return TurnSettings()


def settings_after(current: TurnSettings, op: SetTurnContext, root: Path) -> TurnSettings:
    """The settings once `op` is applied to `current`: null fields stay, empty ones go back to the
    configuration (the root, for the directory). SettingRefused for an unknown summary or a directory
    that is not one inside the project."""
    effort = current.effort if op.effort is None else op.effort.strip() or None
    summary = current.summary if op.summary is None else op.summary.strip() or None
    if op.summary is not None and summary is not None and summary not in SUMMARIES:
        raise SettingRefused(f"reasoning summary {op.summary!r} is not one of {', '.join(SUMMARIES)}")
    cwd = current.cwd if op.cwd is None else project_dir(root, op.cwd) if op.cwd.strip() else ""
    return TurnSettings(effort, summary, cwd)


def project_dir(root: Path, raw: str) -> str:
    """`raw` (absolute, or relative to the root) as a symlink-free directory path relative to the root;
    "" for the root itself. SettingRefused when it leads out of the project or is not a directory."""
    handle = RootHandle(root)
    try:
        where = handle.resolve(raw.strip(), follow=True)
    except ValueError as exc:  # PathEscape
        raise SettingRefused(str(exc)) from None
    except OSError as exc:
        why = "no such directory" if exc.errno == errno.ENOENT else exc.strerror or str(exc)
        raise SettingRefused(f"working directory {raw!r}: {why}") from None
    finally:
        handle.close()
    try:
        kind = os.stat(where.name or ".", dir_fd=where.parent_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        raise SettingRefused(f"working directory {raw!r}: no such directory") from None
    finally:
        os.close(where.parent_fd)
    if not stat.S_ISDIR(kind):
        raise SettingRefused(f"working directory {raw!r} is not a directory")
    return where.rel


def working_dir(root: Path, settings: TurnSettings) -> Path:
    """The absolute working directory the settings name beneath `root` (the project, or its pending copy)."""
    return root / settings.cwd if settings.cwd else root
