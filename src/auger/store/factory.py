"""One way to open the session store, for every front end: a `postgresql://` URL opens the PostgreSQL
store (psycopg is imported only then), anything else is a SQLite file (default: `sessions.db` in the
user data directory)."""

from __future__ import annotations

from pathlib import Path

from auger.store.base import Store


def is_postgres_url(target: object) -> bool:
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


def default_db_path() -> Path:
    from auger.config import home_dirs

    return home_dirs()["data"] / "sessions.db"


def open_store(target: str | Path | None = None, *, ahead: bool = False) -> Store:
    """The store `--db` / `AUGER_DB` / `db_path` names. Opening is lazy: nothing touches the database
    until the first call, and a failure then is a StoreError naming it. `ahead`: a SQLite file starts
    opening on its thread at once (the first call still reports a failure), so a caller that has imports
    to do before its first call overlaps them with it."""
    if is_postgres_url(target):
        from auger.store.postgres import PostgresStore

        return PostgresStore(str(target))
    from auger.store.sqlite import SqliteStore

    store = SqliteStore(Path(target) if target else default_db_path())
    if ahead:
        store.open_ahead()
    return store


def describe(target: str | Path | None) -> str:
    """The database as a message names it (a URL without its password)."""
    if is_postgres_url(target):
        from auger.store.postgres import redact

        return redact(str(target))
    return str(Path(target) if target else default_db_path())
