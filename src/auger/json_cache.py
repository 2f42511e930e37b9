"""A small JSON object kept in auger's cache dir (what a check found, a model's context window): read as
{} when missing or damaged, replaced whole so a reader in another process never sees half of it. A cache
that cannot be written is no error — not even when its directory is a file, or cannot be made."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any


def read(path: Path) -> dict[str, Any]:
    """The object at `path`, or {} (missing, unreadable, not JSON, not an object)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write(path: Path, data: dict[str, Any], *, private: bool = False) -> None:
    """Replace `path` with `data`; `private`: readable by the user only (it names URLs or hosts)."""
    temp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(json.dumps(data))
        os.replace(temp, path)
    except OSError:
        with contextlib.suppress(OSError):  # not there, or its directory is not one
            temp.unlink()
