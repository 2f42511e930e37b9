"""OpenTelemetry export of real `auger exec` runs to a real OTLP/HTTP receiver (tests/support/otlp_receiver.py):
spans nested turn → model call and turn → tool call, GenAI attributes and token counts right, metrics, no
text unless opted in; only the user can turn it on or point it somewhere; unconfigured, nothing of
OpenTelemetry is imported."""

from __future__ import annotations

import json
import sys

import pytest

pytest.importorskip("opentelemetry.proto", reason="the `otel` extra (in `dev`) is needed to decode OTLP")

from tests.support.harness import auger_cli  # noqa: E402
from tests.support.mock_openai import MockChatServer, Reply, ToolCall  # noqa: E402
from tests.support.otlp_receiver import OtlpReceiver  # noqa: E402

SECRETS = ("SECRET-PROMPT", "SECRET-CONTENT", "SECRET-REPLY")


def _script() -> list[Reply]:
    return [Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "SECRET-CONTENT"})],
                  usage={"prompt_tokens": 120, "completion_tokens": 7}),
            Reply(text="SECRET-REPLY", usage={"prompt_tokens": 150, "completion_tokens": 3})]


def _run(server, project, home, *, env: dict | None = None):
    return auger_cli("exec", "--base-url", server.base_url, "-m", "mock-model", "SECRET-PROMPT: write a.txt",
                     home=home, cwd=project, env=env)


def _otel_config(home, endpoint: str, *lines: str) -> None:
    (home / "config.toml").write_text("\n".join(["[otel]", f'endpoint = "{endpoint}"', *lines]) + "\n")


def test_spans_nest_turn_model_calls_and_tool_calls_with_genai_attributes(project, auger_home):
    with OtlpReceiver() as receiver, MockChatServer(_script()) as server:
        _otel_config(auger_home, receiver.base_url)
        result = _run(server, project, auger_home)
        assert result.returncode == 0, result.stderr
        receiver.wait_until(lambda: len(receiver.spans()) >= 4)
        spans = receiver.spans()
        points = receiver.metric_points()
        raw = receiver.raw_bytes()

    [turn] = [s for s in spans if s.name == "invoke_agent auger"]
    chats = sorted((s for s in spans if s.name == "chat mock-model"), key=lambda s: s.start)
    [tool] = [s for s in spans if s.name == "execute_tool write_file"]
    assert turn.parent_span_id == "" and len(chats) == 2
    assert all(s.parent_span_id == turn.span_id and s.trace_id == turn.trace_id for s in [*chats, tool])
    assert turn.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert turn.attributes["auger.turn.outcome"] == "complete"
    session_id = turn.attributes["gen_ai.conversation.id"]
    assert len(session_id) == 36
    assert turn.resource["service.name"] == "auger"

    assert [c.attributes["gen_ai.usage.input_tokens"] for c in chats] == [120, 150]
    assert [c.attributes["gen_ai.usage.output_tokens"] for c in chats] == [7, 3]
    assert [c.attributes["gen_ai.response.finish_reasons"] for c in chats] == [["tool_calls"], ["stop"]]
    for chat in chats:
        assert chat.kind == 3  # SPAN_KIND_CLIENT
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.request.model"] == "mock-model"
        assert chat.attributes["gen_ai.provider.name"] == chat.attributes["gen_ai.system"] == "openai-compatible"
        assert turn.start <= chat.start < chat.end <= turn.end
    # the tool ran between the two model calls
    assert chats[0].end <= tool.start < tool.end <= chats[1].end
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.call.id"].startswith("call_")
    assert tool.attributes["auger.tool.decision"] == "auto" and tool.attributes["auger.tool.outcome"] == "ok"
    assert "gen_ai.tool.call.arguments" not in tool.attributes and "gen_ai.output.messages" not in chats[1].attributes

    usage = {a["gen_ai.token.type"]: p for a, p in points["gen_ai.client.token.usage"]}
    assert (usage["input"].count, usage["input"].sum) == (2, 270)
    assert (usage["output"].count, usage["output"].sum) == (2, 10)
    assert usage["input"].attributes and points["gen_ai.client.operation.duration"][0][1].count == 2
    assert [(a["auger.turn.outcome"], p.as_int) for a, p in points["auger.turns"]] == [("complete", 1)]
    assert sum(p.as_int for _, p in points["auger.sessions"]) == 1
    assert [(a["gen_ai.tool.name"], a["auger.tool.decision"]) for a, _ in points["auger.tool.calls"]] == \
        [("write_file", "auto")]
    for secret in SECRETS:  # no prompt, argument or reply text anywhere in what was sent
        assert secret.encode() not in raw


def test_text_is_exported_only_when_opted_in(project, auger_home):
    with OtlpReceiver() as receiver, MockChatServer(_script()) as server:
        _otel_config(auger_home, receiver.base_url, "log_prompts = true")
        result = _run(server, project, auger_home)
        assert result.returncode == 0, result.stderr
        receiver.wait_until(lambda: len(receiver.spans()) >= 4)
        spans = receiver.spans()
    [tool] = [s for s in spans if s.name == "execute_tool write_file"]
    last_chat = max((s for s in spans if s.name.startswith("chat ")), key=lambda s: s.start)
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"])["content"] == "SECRET-CONTENT"
    assert json.loads(last_chat.attributes["gen_ai.output.messages"]) == \
        [{"role": "assistant", "parts": [{"type": "text", "content": "SECRET-REPLY"}]}]


def test_the_standard_environment_variable_turns_it_on(project, auger_home):
    with OtlpReceiver() as receiver, MockChatServer(_script()) as server:
        result = _run(server, project, auger_home, env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.base_url,
                                                        "OTEL_SERVICE_NAME": "ci-agent"})
        assert result.returncode == 0, result.stderr
        receiver.wait_until(lambda: len(receiver.spans()) >= 4)
        spans = receiver.spans()
    assert {s.name for s in spans} >= {"invoke_agent auger", "chat mock-model", "execute_tool write_file"}
    assert spans[0].resource["service.name"] == "ci-agent"


def test_a_projects_config_can_neither_turn_it_on_nor_redirect_it(project, auger_home):
    (project / ".auger").mkdir()
    with OtlpReceiver() as users, OtlpReceiver() as projects, MockChatServer(_script() + _script()) as server:
        (project / ".auger" / "config.toml").write_text(f'[otel]\nendpoint = "{projects.base_url}"\n')
        alone = _run(server, project, auger_home)  # the project alone: no telemetry at all
        _otel_config(auger_home, users.base_url)
        both = _run(server, project, auger_home)  # the user's endpoint, whatever the project says
        assert alone.returncode == 0 and both.returncode == 0, alone.stderr + both.stderr
        users.wait_until(lambda: len(users.spans()) >= 4)
        assert projects.raw == []
    assert "[otel] ignored: only your user config may configure telemetry" in alone.stderr


def test_a_sub_agents_turn_hangs_under_its_spawn_call(project, auger_home):
    script = [Reply(tool_calls=[ToolCall("spawn_agent", {"prompt": "look around", "agent": "explore"})]),
              Reply(text="found it"), Reply(text="done")]
    with OtlpReceiver() as receiver, MockChatServer(script) as server:
        _otel_config(auger_home, receiver.base_url)
        result = _run(server, project, auger_home)
        assert result.returncode == 0, result.stderr
        receiver.wait_until(lambda: len([s for s in receiver.spans() if s.name == "invoke_agent auger"]) >= 2)
        spans = receiver.spans()
    [spawn] = [s for s in spans if s.name == "execute_tool spawn_agent"]
    turns = [s for s in spans if s.name == "invoke_agent auger"]
    [child] = [t for t in turns if t.parent_span_id]
    assert child.parent_span_id == spawn.span_id and child.trace_id == spawn.trace_id
    assert [s.parent_span_id for s in spans if s.name.startswith("chat ") and s.start >= child.start
            and s.end <= child.end] == [child.span_id]


def _imported(stderr: str) -> list[str]:
    """Modules `python -X importtime` reported."""
    return [line.rsplit("|", 1)[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")]


def test_nothing_of_opentelemetry_is_imported_unless_configured(project, auger_home):
    version = auger_cli("--version", home=auger_home, env={"PYTHONPROFILEIMPORTTIME": "1"})
    with MockChatServer([Reply(text="plain")]) as server:
        run = auger_cli("exec", "--base-url", server.base_url, "-m", "mock-model", "hi", home=auger_home,
                        cwd=project, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert run.returncode == 0 and version.returncode == 0
    assert "auger.engine.session.sessions" in _imported(run.stderr)  # the check sees the engine's imports
    for result in (version, run):
        assert not [m for m in _imported(result.stderr) if m.startswith(("opentelemetry", "jsonschema"))]


def test_configured_without_the_extra_is_one_clear_warning(project, auger_home, tmp_path):
    blocker = tmp_path / "no_otel"
    (blocker / "opentelemetry").mkdir(parents=True)  # shadows the installed namespace package: nothing inside
    (blocker / "opentelemetry" / "__init__.py").write_text("")
    with MockChatServer([Reply(text="still fine")]) as server:
        _otel_config(auger_home, "http://127.0.0.1:9")
        result = auger_cli("exec", "--base-url", server.base_url, "-m", "mock-model", "hi", home=auger_home,
                           cwd=project, env={"PYTHONPATH": f"{blocker}:{':'.join(sys.path[1:])}"})
    assert result.returncode == 0, result.stderr
    assert result.stdout == "still fine\n"
    assert result.stderr.count("pip install 'auger[otel]'") == 1


def test_a_collector_that_is_down_costs_one_warning_and_the_timeout(project, auger_home):
    with MockChatServer([Reply(text="answered")]) as server:
        _otel_config(auger_home, "http://127.0.0.1:9", "timeout = 1")  # nothing listens on the discard port
        result = _run(server, project, auger_home)
    assert result.returncode == 0 and result.stdout == "answered\n", result.stderr
    assert result.stderr.count("telemetry could not be sent to http://127.0.0.1:9 within 1s") == 1
    assert "Traceback" not in result.stderr and "Transient error" not in result.stderr  # not the SDK's retry log
