"""Edits of one table in the user's config.toml (`[mcp_servers.NAME]`, `[providers.NAME]`, `[backends.NAME]`).

Other content is kept as written (comments included); the edited table is written anew at the end. The
new text is checked by parsing it — it must give exactly the table meant — before it replaces the file,
and the file is replaced atomically (a crash leaves the old or the new file, never half). Only the
user's own file is edited, never a project's.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any


class ConfigEditError(ValueError):
    """The file cannot be edited as asked (unreadable, not TOML, or the table is in a form not edited here)."""


def user_config_path() -> Path:
    from auger.config import home_dirs

    return home_dirs()["config"] / "config.toml"


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigEditError(f"cannot read {path}: {exc}") from None


def tables(text: str, path: Path, section: str) -> dict[str, Any]:
    """The tables of `[section.NAME]` in the text (empty when there are none)."""
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigEditError(f"{path} is not valid TOML ({exc}); fix it first") from None
    found = data.get(section, {})
    return found if isinstance(found, dict) else {}


def set_table(path: Path, section: str, name: str, table: dict[str, Any] | None) -> bool:
    """Write `[section.NAME]` as `table` (None: remove it); True when it replaced or removed one."""
    text = read_text(path)
    tables(text, path, section)  # refuse to touch a file that does not parse now
    kept = without_table(text, f"{section}.{name}")
    new = kept if table is None else (kept.rstrip("\n") + ("\n\n" if kept.strip() else "")
                                      + render_table(f"{section}.{name}", table))
    if tables(new, path, section).get(name) != table:
        raise ConfigEditError(f"{path} defines {section} in a form this edit does not handle; edit the file by hand")
    _replace(path, new)
    return kept != text


def render_table(key: str, table: dict[str, Any]) -> str:
    return f"[{key}]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in table.items())


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(type(value).__name__)


_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]*?)\s*\]\]?\s*(#.*)?$")


def without_table(text: str, key: str) -> str:
    """The text without `[key]` and its sub-tables (each from its header to the next header)."""
    out: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        header = _HEADER.match(line)
        if header:
            found = re.sub(r"\s*\.\s*", ".", header.group(1)).replace('"', "").replace("'", "")
            skipping = found == key or found.startswith(f"{key}.")
        if not skipping:
            out.append(line)
    return "".join(out)


def _replace(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".config.toml.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
