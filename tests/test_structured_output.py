"""Structured output: `auger exec --output-schema FILE` (and `UserTurn.output_schema` in the library) holds
the final answer to a JSON Schema on every wire — natively where the wire takes a schema, in words where it
does not — with one repair round, and fails loudly rather than ignore the schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from auger.engine.turn.structured_output import OutputSpec, strict_compatible
from auger.protocol import events as ev
from auger.protocol.ops import UserTurn
from tests.support import mock_anthropic, mock_responses
from tests.support.harness import auger_cli, json_events, run_session
from tests.support.mock_openai import MockChatServer, Reply, ToolCall

# In the strict subset: every object closed, every property required.
STRICT = {"type": "object", "title": "Report", "additionalProperties": False, "required": ["answer", "files"],
          "properties": {"answer": {"type": "integer"}, "files": {"type": "array", "items": {"type": "string"}}}}
# Outside it (minLength, an optional property): sent without strict mode, still checked here.
LOOSE = {"type": "object", "required": ["name"],
         "properties": {"name": {"type": "string", "minLength": 3}, "note": {"type": "string"}}}
FAST = ["-c", "model_retry_base_delay=0.01"]


def _schema(tmp_path: Path, schema: object) -> str:
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema))
    return str(path)


def _exec(server, project, home, schema_file: str | None, *extra: str, wire: tuple[str, ...] = ("--base-url",),
          env: dict | None = None, model: str = "mock-model"):
    options = ["--output-schema", schema_file] if schema_file else []
    return auger_cli("exec", *wire, server.base_url, "-m", model, *FAST, *options, *extra, "report",
                     home=home, cwd=project, env=env)


def _texts(messages: list[dict]) -> str:
    return json.dumps(messages)


def test_a_valid_answer_is_printed_compact_and_the_schema_sent_strict(project, auger_home, tmp_path):
    with MockChatServer([Reply(text='{\n  "answer": 42,\n  "files": ["a.py", "ü.py"]\n}')]) as server:
        result = _exec(server, project, auger_home, _schema(tmp_path, STRICT), "-o", str(tmp_path / "last.txt"))
        body = server.chat_requests[0].body
    assert result.returncode == 0, result.stderr
    assert result.stdout == '{"answer":42,"files":["a.py","ü.py"]}\n'
    assert body["response_format"] == {"type": "json_schema",
                                       "json_schema": {"name": "Report", "schema": STRICT, "strict": True}}
    assert "only a JSON value valid against this JSON Schema" in _texts(body["messages"])
    assert (tmp_path / "last.txt").read_text() == '{\n  "answer": 42,\n  "files": ["a.py", "ü.py"]\n}'


def test_an_invalid_answer_is_sent_back_once_and_the_repair_accepted(project, auger_home, tmp_path):
    with MockChatServer([Reply(text="Here is the report: 42"),
                         Reply(text='```json\n{"answer": 7, "files": []}\n```')]) as server:
        result = _exec(server, project, auger_home, _schema(tmp_path, STRICT), "--json")
        second = server.chat_requests[1].messages
    assert result.returncode == 0, result.stderr
    events = json_events(result.stdout)
    outputs = [e for e in events if e["type"] == "structured_output"]
    assert [o["value"] for o in outputs] == [{"answer": 7, "files": []}]
    kinds = [e["type"] for e in events]
    assert kinds.index("structured_output") < kinds.index("turn_ended")
    assert second[-2] == {"role": "assistant", "content": "Here is the report: 42"}
    assert "not valid against the JSON Schema" in second[-1]["content"] and "not JSON" in second[-1]["content"]


def test_an_answer_invalid_twice_fails_with_the_validation_error(project, auger_home, tmp_path):
    with MockChatServer([Reply(text='{"answer": "x", "files": []}'),
                         Reply(text='{"answer": "forty-two", "files": []}'), Reply(text="unused")]) as server:
        result = _exec(server, project, auger_home, _schema(tmp_path, STRICT), "-o", str(tmp_path / "last.txt"))
        repair = server.chat_requests[1].messages[-1]["content"]
        calls = len(server.chat_requests)
    assert result.returncode == 1
    assert result.stdout == ""  # never the invalid answer where the value belongs
    assert "$.answer: 'forty-two' is not of type 'integer'" in result.stderr
    assert "also after one repair" in result.stderr
    assert "$.answer: 'x' is not of type 'integer'" in repair
    assert calls == 2
    assert (tmp_path / "last.txt").read_text() == '{"answer": "forty-two", "files": []}'


def test_a_schema_outside_the_strict_subset_is_sent_without_strict_and_still_enforced(project, auger_home,
                                                                                        tmp_path):
    # The mock refuses a strict schema outside the subset with a 400, as the real API does.
    with MockChatServer([Reply(text='{"name": "ab"}'), Reply(text='{"name": "abc"}')]) as server:
        result = _exec(server, project, auger_home, _schema(tmp_path, LOOSE))
        fmt = server.chat_requests[0].body["response_format"]
    assert result.returncode == 0, result.stderr
    assert fmt["json_schema"]["strict"] is False and fmt["json_schema"]["schema"] == LOOSE
    assert result.stdout == '{"name":"abc"}\n'


def test_the_answer_comes_after_tool_calls(project, auger_home, tmp_path):
    with MockChatServer([Reply(tool_calls=[ToolCall("write_file", {"path": "a.py", "content": "x = 1\n"})]),
                         Reply(text='{"answer": 1, "files": ["a.py"]}')]) as server:
        result = _exec(server, project, auger_home, _schema(tmp_path, STRICT))
    assert result.returncode == 0, result.stderr
    assert result.stdout == '{"answer":1,"files":["a.py"]}\n' and (project / "a.py").exists()


def test_responses_gets_text_format(project, auger_home, tmp_path):
    with mock_responses.MockResponsesServer([mock_responses.Reply(text='{"answer": 3, "files": []}')]) as server:
        result = _exec(server, project, auger_home, _schema(tmp_path, STRICT), wire=("-p", "openai", "--base-url"),
                       model="gpt-4.1")
        body = server.responses_requests[0].body
    assert result.returncode == 0, result.stderr
    assert body["text"] == {"format": {"type": "json_schema", "name": "Report", "schema": STRICT, "strict": True}}
    assert result.stdout == '{"answer":3,"files":[]}\n'


def test_anthropic_is_told_in_words_and_checked(project, auger_home, tmp_path):
    # The mock refuses any field the Messages API does not know (`response_format`, `text`), as the API does.
    with mock_anthropic.MockAnthropicServer([mock_anthropic.Reply(text='{"answer": "no", "files": []}'),
                                             mock_anthropic.Reply(text='{"answer": 5, "files": ["b"]}')]) as server:
        result = _exec(server, project, auger_home, _schema(tmp_path, STRICT), wire=("-p", "anthropic", "--base-url"),
                       env={"ANTHROPIC_API_KEY": "sk-test"}, model="claude-sonnet-4-5")
        first = server.message_requests[0].body
        second = server.message_requests[1].body
    assert result.returncode == 0, result.stderr
    assert result.stdout == '{"answer":5,"files":["b"]}\n'
    assert "response_format" not in first and "text" not in first
    assert "only a JSON value valid against this JSON Schema" in _texts(first["messages"])
    assert "$.answer: 'no' is not of type 'integer'" in _texts(second["messages"])


def test_a_provider_without_structured_output_is_told_in_words(project, auger_home, tmp_path):
    with MockChatServer([Reply(text='{"answer": 1, "files": []}')]) as server:
        (auger_home / "config.toml").write_text(
            f'provider = "plainchat"\n[providers.plainchat]\nextends = "openai-compatible"\n'
            f'base_url = "{server.base_url}"\nstructured_output = false\n')
        result = auger_cli("exec", "-m", "mock-model", *FAST, "--output-schema", _schema(tmp_path, STRICT), "report",
                           home=auger_home, cwd=project)
        body = server.chat_requests[0].body
    assert result.returncode == 0, result.stderr
    assert "response_format" not in body
    assert "only a JSON value valid against this JSON Schema" in _texts(body["messages"])


@pytest.mark.parametrize("content,problem", [
    ("{not json", "not JSON"),
    ('{"type": "objekt"}', "not a valid JSON Schema: $.type"),
    ('[1, 2]', "must be a JSON object"),
])
def test_an_unusable_schema_file_is_a_usage_error_before_any_request(content, problem, project, auger_home,
                                                                     tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with MockChatServer([Reply(text="never")]) as server:
        result = _exec(server, project, auger_home, str(path))
        requests = len(server.chat_requests)
    assert result.returncode == 2
    assert problem in result.stderr and str(path) in result.stderr and "Traceback" not in result.stderr
    assert requests == 0


def test_a_missing_schema_file_is_a_usage_error(project, auger_home, tmp_path):
    with MockChatServer([]) as server:
        result = _exec(server, project, auger_home, str(tmp_path / "absent.json"))
    assert result.returncode == 2 and "cannot read it" in result.stderr


def test_output_last_message_without_a_schema(project, auger_home, tmp_path):
    with MockChatServer([Reply(text="all done")]) as server:
        result = _exec(server, project, auger_home, None, "--output-last-message", str(tmp_path / "out.md"))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "all done\n" and (tmp_path / "out.md").read_text() == "all done"


def test_an_unwritable_last_message_file_fails_the_run(project, auger_home, tmp_path):
    with MockChatServer([Reply(text="all done")]) as server:
        result = _exec(server, project, auger_home, None, "-o", str(tmp_path / "no" / "such" / "dir.md"))
    assert result.returncode == 1 and "--output-last-message" in result.stderr and "cannot write" in result.stderr


# -- the library: a schema dict on the user turn ------------------------------------------------------------


def test_a_schema_dict_on_the_user_turn(project, server):
    schema = {"type": "array", "items": {"type": "integer"}, "minItems": 2}  # not an object: asked in words only
    server.add(Reply(text="[1]"), Reply(text="[1, 2]"))
    run = run_session(project, server, UserTurn("numbers", output_schema=schema))
    assert run.ended.reason == "complete"
    assert [e.value for e in run.of(ev.StructuredOutput)] == [[1, 2]]
    assert "response_format" not in server.chat_requests[0].body
    assert "$: [1] is too short" in server.chat_requests[1].messages[-1]["content"]


def test_an_invalid_schema_dict_ends_the_turn_before_any_model_call(project, server):
    server.add(Reply(text="never"))
    run = run_session(project, server, UserTurn("numbers", output_schema={"type": 12}))
    assert run.ended.reason == "error"
    assert "message not sent: the output schema is not a valid JSON Schema" in (run.ended.message or "")
    assert server.chat_requests == []


def test_a_later_turn_without_a_schema_is_free_text(project, server):
    server.add(Reply(text='{"answer": 1, "files": []}'), Reply(text="plain words"))
    run = run_session(project, server, UserTurn("one", output_schema=STRICT), "two")
    assert [e.reason for e in run.of(ev.TurnEnded)] == ["complete", "complete"]
    assert len(run.of(ev.StructuredOutput)) == 1
    assert "response_format" not in server.chat_requests[1].body


def test_strict_subset():
    assert strict_compatible(STRICT)
    assert not strict_compatible(LOOSE)
    assert not strict_compatible({**STRICT, "additionalProperties": True})
    nested = {"type": "object", "additionalProperties": False, "required": ["a"],
              "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}}}}
    assert not strict_compatible(nested)  # the inner object is open
    assert OutputSpec.of({"type": "string"}).format is None  # only object roots are sent natively


def test_a_backend_agent_refuses_a_schema_rather_than_ignore_it(project, server):
    from tests.test_backends import run_backend

    run = run_backend(project, server, UserTurn("numbers", output_schema=STRICT))
    assert run.ended.reason == "error"
    assert "an output schema needs auger's own model loop" in (run.ended.message or "")
    assert run.of(ev.StructuredOutput) == []
