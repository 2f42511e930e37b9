"""The store's schema as numbered migrations, one SQL file per backend: `NNNN_name.sqlite.sql` and
`NNNN_name.postgres.sql`.

One numbering serves both backends, so "schema 9" means the same tables everywhere. Versions 1–8 predate
this directory (SQLite files were upgraded in place by idempotent statements), so the first file is 0008:
the whole schema of that time, written to bring a SQLite file of any older version up to 8. Each store
applies what it lacks when it opens (`auger db migrate` does the same on request), each migration in one
transaction, and refuses a database whose version is newer than the last file here: an older auger must
not write to tables it does not know.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auger.lazy_regex import lazy_compile

_NAME = lazy_compile(r"^(\d{4})_(\w+)\.(sqlite|postgres)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    def statements(self) -> list[str]:
        """The file's statements, for drivers that run one at a time (SQLite's `execute`). A statement
        ends with `;` at the end of a line; a function body between `$$` marks is kept whole."""
        out: list[str] = []
        current: list[str] = []
        in_body = False
        for line in self.sql.splitlines():
            if line.lstrip().startswith("--") and not current:
                continue
            current.append(line)
            if line.count("$$") % 2:
                in_body = not in_body
            if not in_body and line.rstrip().endswith(";"):
                out.append("\n".join(current).rstrip().rstrip(";"))
                current = []
        if "".join(current).strip():
            out.append("\n".join(current))
        return out


def migrations(backend: str) -> list[Migration]:
    """Every migration of `backend` ("sqlite" or "postgres"), oldest first."""
    found = []
    for entry in _directory().iterdir():
        match = _NAME.match(entry.name)
        if match and match.group(3) == backend:
            found.append(Migration(int(match.group(1)), match.group(2), entry.read_text(encoding="utf-8")))
    return sorted(found, key=lambda m: m.version)


def _directory() -> Any:
    """This package's files: its directory on disk, as importlib.resources gives it (without loading the
    readers and zipfile it imports first, as every store's opening would), else through importlib.resources
    (an installation in a zip file)."""
    here = Path(__file__).parent
    if here.is_dir():
        return here
    from importlib import resources

    return resources.files(__package__)


def latest(backend: str) -> int:
    """The schema version this code writes."""
    return migrations(backend)[-1].version


def newer_schema(where: str, version: int, known: int) -> str:
    """The refusal for a database written by a newer auger."""
    return (f"{where} has schema version {version}, newer than this auger knows ({known}): "
            "upgrade auger to use it")
