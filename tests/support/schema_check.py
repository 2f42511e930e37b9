"""Every event the suite produces validates against the protocol's generated JSON Schema.

Two ways in, both of the real wire form rather than the Python objects:

* `check_envelope(line)`: `json_events` (conftest) runs it on each line `auger exec --json` prints;
* `events_match_schema`, an autouse fixture (conftest imports it): after each test it reads the
  events table of every SQLite database the test left under its tmp_path — what in-process sessions
  and `auger` subprocesses alike persisted — validates each envelope and checks that every session's
  sequence numbers run 1, 2, 3… without a gap or a repeat.

`pytest_terminal_summary` reports how many envelopes of how many event types were validated (with
pytest-xdist, the workers' counts summed by `pytest_testnodedown`).
"""

from __future__ import annotations

import collections
import functools
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from auger.protocol.events import Event
from auger.protocol.schema import protocol_schema

VALIDATED: collections.Counter[str] = collections.Counter()


@functools.cache
def _validators() -> dict[str, Draft202012Validator]:
    """One validator per event type: the `Envelope` branch for that type (a clear error, and no
    25-way `oneOf` per line)."""
    schema = protocol_schema()
    Draft202012Validator.check_schema(schema)
    branches = schema["$defs"]["Envelope"]["oneOf"]
    return {tag: Draft202012Validator({"$defs": schema["$defs"], **branch})
            for tag, branch in zip(Event.registry(), branches, strict=True)}


def check_envelope(data: Any) -> None:
    """Fail unless `data` is one event envelope as the schema describes it."""
    assert isinstance(data, dict), f"an event line is a JSON object, not {type(data).__name__}"
    tag = data.get("type")
    validator = _validators().get(tag) if isinstance(tag, str) else None
    assert validator is not None, f"event type {tag!r} is not in the protocol schema"
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.path))
    assert not errors, f"{tag} does not match the protocol schema: " + "; ".join(
        f"{'/'.join(map(str, e.path)) or '(root)'}: {e.message}" for e in errors[:5])
    VALIDATED[tag] += 1


def check_database(path: Path) -> int:
    """Validate every stored envelope in a session database; returns how many (0: no events table)."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:
        return 0
    try:
        rows = conn.execute("SELECT session_id, seq, type, data FROM events ORDER BY session_id, seq").fetchall()
    except sqlite3.Error:  # not a session database, an older schema, or one a test broke on purpose
        return 0
    finally:
        conn.close()
    expected: dict[str, int] = {}
    for session_id, seq, tag, data in rows:
        want = expected.get(session_id, 0) + 1
        assert seq == want, f"{path.name}: session {session_id[:8]} has event seq {seq} where {want} belongs"
        expected[session_id] = seq
        envelope = json.loads(data)
        assert envelope.get("type") == tag and envelope.get("seq") == seq and envelope.get("session_id") == session_id
        check_envelope(envelope)
    return len(rows)


@pytest.fixture(autouse=True)
def events_match_schema(tmp_path: Path):
    yield
    for db in sorted(tmp_path.rglob("*.db")):
        check_database(db)


def pytest_sessionfinish(session) -> None:
    """Under pytest-xdist each worker hands its counts to the controller, which prints the summary."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["schema_validated"] = dict(VALIDATED)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    VALIDATED.update(getattr(node, "workeroutput", {}).get("schema_validated", {}))


def pytest_terminal_summary(terminalreporter) -> None:
    if VALIDATED:
        unseen = sorted(set(Event.registry()) - set(VALIDATED))
        terminalreporter.write_line(
            f"protocol schema: {sum(VALIDATED.values())} event envelopes of {len(VALIDATED)} of "
            f"{len(Event.registry())} event types validated" + (f"; never emitted: {', '.join(unseen)}" if unseen else ""))
