"""Config values of the wrong type are reported and ignored; relative paths mean "next to the config file"."""

from __future__ import annotations

from auger.config import load_config
from tests.support.harness import auger_cli


def test_wrong_types_in_a_config_file_are_reported_and_ignored(tmp_path):
    config_file = tmp_path / "config.toml"
    config_file.write_text('model = 3\ndb_path = 5\nmax_model_calls_per_turn = 2.5\nbase_url = "localhost:8080/v1"\n'
                           'provider = "openai"\n')
    config = load_config(config_file=config_file, env={})
    assert (config.model, config.db_path, config.max_model_calls_per_turn, config.base_url) == (None, None, 200, None)
    assert config.provider == "openai"
    problems = "\n".join(config.warnings)
    assert f"{config_file}: 'model' expects a string, got 3 (ignored)" in problems
    assert f"{config_file}: 'db_path' expects a string, got 5 (ignored)" in problems
    assert "'max_model_calls_per_turn' expects a whole number >= 1, got 2.5" in problems
    assert "'base_url' must be an http:// or https:// URL, got 'localhost:8080/v1'" in problems
    assert len(config.warnings) == 4


def test_a_string_key_on_the_command_line_takes_the_text_as_typed(tmp_path):
    config = load_config(["model=3", "max_model_calls_per_turn=7", 'mode="safe"'],
                         config_file=tmp_path / "absent.toml", env={})
    assert (config.model, config.max_model_calls_per_turn, config.mode) == ("3", 7, "safe")
    assert not config.warnings


def test_relative_paths_in_a_config_file_resolve_next_to_it(tmp_path):
    config_file = tmp_path / "conf" / "config.toml"
    config_file.parent.mkdir()
    config_file.write_text('db_path = "data/sessions.db"\ncassette = "rec.jsonl"\n')
    config = load_config(config_file=config_file, env={})
    assert config.db_path == str(tmp_path / "conf" / "data" / "sessions.db")
    assert config.cassette == str(tmp_path / "conf" / "rec.jsonl")
    config_file.write_text(f'db_path = "{tmp_path / "abs.db"}"\ncassette = "session:abcd"\n')
    config = load_config(config_file=config_file, env={})
    assert (config.db_path, config.cassette) == (str(tmp_path / "abs.db"), "session:abcd")


def test_the_cli_never_creates_a_database_named_after_a_bad_value(project, auger_home):
    (auger_home / "config.toml").write_text("db_path = 5\n")
    result = auger_cli("sessions", home=auger_home, cwd=project)
    assert result.returncode == 0, result.stderr
    assert "'db_path' expects a string, got 5 (ignored)" in result.stderr
    assert list(project.iterdir()) == []
    (auger_home / "config.toml").write_text('db_path = "mine.db"\n')
    auger_cli("sessions", home=auger_home, cwd=project)
    assert (auger_home / "mine.db").exists() and list(project.iterdir()) == []
