"""auger's small caches (sandbox detection, context windows, provider checks) are never an error: written
whole or not at all, read as empty when missing or damaged — also when a file stands where their
directory should be, which once raised out of the sandbox's detection and failed the session's start."""

from __future__ import annotations

import json

from auger import json_cache
from auger.policy import sandbox


def test_a_cache_under_a_file_is_neither_written_nor_an_error(tmp_path):
    (tmp_path / "not-a-dir").write_text("a file")
    path = tmp_path / "not-a-dir" / "cache" / "x.json"
    json_cache.write(path, {"a": 1})
    assert json_cache.read(path) == {}
    assert (tmp_path / "not-a-dir").read_text() == "a file"


def test_a_cache_is_replaced_whole_private_when_asked_and_damage_reads_as_empty(tmp_path):
    path = tmp_path / "deep" / "x.json"
    json_cache.write(path, {"a": 1}, private=True)
    assert json_cache.read(path) == {"a": 1} and path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["x.json"]  # no temporary file left
    for damaged in ("{not json", "[1, 2]", ""):
        path.write_text(damaged)
        assert json_cache.read(path) == {}
    json_cache.write(path, {"b": 2})
    assert json.loads(path.read_text()) == {"b": 2}


def test_sandbox_detection_with_its_cache_dir_under_a_file_still_answers(tmp_path, monkeypatch):
    (tmp_path / "home-file").write_text("a file")
    monkeypatch.setenv("AUGER_HOME", str(tmp_path / "home-file" / "home"))
    sandbox._cache.clear()
    try:
        found, why = sandbox.detect("auto")
    finally:
        sandbox._cache.clear()
    assert why  # an answer (a sandbox, or why there is none), never an exception
