"""The wire clients and the retry policy against real mock servers injecting real faults (hostile streams
on every wire, through the real command)."""

from __future__ import annotations

import json
import time

import pytest

from auger.protocol import events as ev
from tests.support.harness import auger_cli, conversation, json_events, run_session
from tests.support.mock_openai import Fault, Reply, ToolCall


def test_request_wire_format(project, server):
    server.add(Reply(text="hi"))
    run_session(project, server, "hello")
    req = server.chat_requests[0]
    assert req.headers["authorization"] == "Bearer sk-test"
    body = req.body
    assert body["model"] == "mock-model" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"][0]["role"] == "system"
    assert body["messages"][-1] == {"role": "user", "content": "hello"}
    names = {t["function"]["name"] for t in body["tools"]}
    assert names == {"shell", "exec_command", "write_stdin", "read_file", "write_file", "edit_file", "list_dir",
                     "glob", "grep", "recall", "update_plan", "spawn_agent", "web_fetch", "code_nav", "repo_map"}


def test_429_honours_retry_after(project, server):
    server.add(Fault.status(429, retry_after="1"), Reply(text="after wait"))
    started = time.monotonic()
    run = run_session(project, server, "hi")
    assert time.monotonic() - started >= 1.0
    retries = run.of(ev.Retrying)
    assert len(retries) == 1 and retries[0].delay_s == 1.0 and retries[0].attempt == 1
    assert "429" in retries[0].reason
    assert run.ended.reason == "complete"
    assert [m.text for m in run.of(ev.AgentMessage)] == ["after wait"]


def test_500_then_success(project, server):
    server.add(Fault.status(500), Fault.status(503), Reply(text="ok"))
    run = run_session(project, server, "hi")
    assert [r.attempt for r in run.of(ev.Retrying)] == [1, 2]
    assert run.ended.reason == "complete"


def test_dropped_stream_is_retried_and_partial_text_discarded(project, server):
    server.add(Fault.drop(after_chunks=3, reply=Reply(text="partial partial partial partial", chunk_chars=4)),
               Reply(text="the whole answer"))
    run = run_session(project, server, "hi")
    assert len(run.of(ev.Retrying)) == 1
    assert [m.text for m in run.of(ev.AgentMessage)] == ["the whole answer"]
    assert run.ended.reason == "complete"


def test_stalled_stream_times_out_and_is_retried(project, server):
    server.add(Fault.hang(after_chunks=1, seconds=10), Reply(text="second try"))
    started = time.monotonic()
    run = run_session(project, server, "hi", overrides=("stream_idle_timeout=0.5",))
    assert time.monotonic() - started < 5
    assert "idle" in run.of(ev.Retrying)[0].reason
    assert run.ended.reason == "complete"


def test_retry_budget_exhausted_ends_turn_and_session_stays_usable(project, server):
    server.add(Fault.status(500), Fault.status(500), Reply(text="back again"))
    run = run_session(project, server, "first", "second", overrides=("model_max_attempts=2",))
    ends = run.of(ev.TurnEnded)
    assert [e.reason for e in ends] == ["error", "complete"]
    assert "after 2 attempts" in ends[0].message
    # the failed turn's user message is still part of the conversation
    users = [m["content"] for m in conversation(server.chat_requests[-1].body["messages"]) if m["role"] == "user"]
    assert users == ["first", "second"]


def test_non_retryable_errors_say_what_to_do(project, server):
    # a context-window error compacts the conversation and retries once; a second one ends the turn
    server.add(Fault.status(401), Fault.status(404), Fault.context_length(), Reply(text="summary of a and b"),
               Fault.context_length(), Reply(text="fine"))
    run = run_session(project, server, "a", "b", "c", "d")
    ends = run.of(ev.TurnEnded)
    assert [e.reason for e in ends] == ["error", "error", "error", "complete"]
    assert not run.of(ev.Retrying)
    assert "authentication failed" in ends[0].message
    assert "model 'mock-model'" in ends[1].message and "not found" in ends[1].message
    assert "context window" in ends[2].message
    assert [c.summary for c in run.of(ev.ContextCompacted)] == ["summary of a and b"]


def test_tool_call_fragments_reassemble(project, server):
    content = "line with \"quotes\" and unicode é ✓\n" * 20
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "out.txt", "content": content})]),
               Reply(text="written"))
    run = run_session(project, server, "write it")
    assert run.ended.reason == "complete"
    assert (project / "out.txt").read_text() == content


def test_reasoning_deltas_are_streamed_and_recorded(project, server):
    server.add(Reply(text="answer", reasoning="thinking about it"))
    run = run_session(project, server, "q")
    assert "".join(d.delta for d in run.of(ev.ReasoningDelta)) == "thinking about it"
    assert [m.text for m in run.of(ev.AgentMessage)] == ["answer"]


DEEP = "[" * 10_000 + "]" * 10_000  # valid JSON that json.loads answers with RecursionError
QUICK = ["-c", "model_max_attempts=2", "-c", "model_retry_base_delay=0.01", "-c", "model_retry_max_delay=0.02"]


def _hostile_server(wire: str, *steps):
    """A loopback server of `wire` serving `steps` (each a list of raw event texts), and the `auger exec`
    options and environment that reach it."""
    from tests.support import mock_anthropic, mock_openai, mock_responses

    if wire == "openai_chat":
        server = mock_openai.MockChatServer([mock_openai.Raw(["data: " + text for text in step]) for step in steps])
        return server, ["--base-url"], {}
    if wire == "openai_responses":
        server = mock_responses.MockResponsesServer([mock_responses.Raw(list(step)) for step in steps])
        return server, ["-p", "openai", "--base-url"], {}
    server = mock_anthropic.MockAnthropicServer([mock_anthropic.Raw(list(step)) for step in steps])
    return server, ["-p", "anthropic", "--base-url"], {"ANTHROPIC_API_KEY": "sk-test"}


# Per wire: a chunk nested deeper than json.loads can recurse, and one whose fields have the wrong shape.
HOSTILE = {
    "openai_chat": [(DEEP, "nested deeper than"),
                    ('{"choices": [{"delta": {"tool_calls": [7]}}]}', "AttributeError")],
    "openai_responses": [(DEEP, "nested deeper than"),
                         ('{"type": "response.output_item.done", "item": [7]}', "AttributeError")],
    "anthropic": [(DEEP, "nested deeper than"),
                  ('{"type": "content_block_start", "index": "first", "content_block": {}}', "ValueError")],
}


@pytest.mark.parametrize("wire,chunk,problem", [(w, c, p) for w, cases in HOSTILE.items() for c, p in cases],
                         ids=[f"{w}-{p}" for w, cases in HOSTILE.items() for _, p in cases])
def test_a_hostile_chunk_is_a_model_error_retried_then_reported(wire, chunk, problem, project, auger_home):
    server, options, env = _hostile_server(wire, [chunk], [chunk])
    with server:
        result = auger_cli("exec", *options, server.base_url, "-m", "m", *QUICK, "hi", home=auger_home,
                           cwd=project, env=env)
        attempts = [r for r in server.requests if r.method == "POST" and r.path.endswith(("/chat/completions",
                                                                                          "/responses", "/messages"))]
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "RecursionError" not in result.stderr
    assert "after 2 attempts" in result.stderr and "malformed stream event" in result.stderr
    assert problem in result.stderr
    assert len(attempts) == 2  # retried within the policy, then reported


def test_a_chat_stream_whose_chunks_carry_no_choice_is_an_error_not_an_empty_answer(project, auger_home):
    empty = json.dumps({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": []})
    server, options, env = _hostile_server("openai_chat", [empty, "[DONE]"], [empty, "[DONE]"])
    with server:
        result = auger_cli("exec", *options, server.base_url, "-m", "m", *QUICK, "hi", home=auger_home,
                           cwd=project, env=env)
    assert result.returncode == 1 and result.stdout == ""
    assert "ended without a reply" in result.stderr and "after 2 attempts" in result.stderr


def test_an_empty_choices_stream_is_retried_and_the_next_reply_is_taken(project, auger_home):
    from tests.support.mock_openai import MockChatServer, Raw

    empty = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": []}
    with MockChatServer([Raw([empty]), Reply(text="the real answer")]) as server:
        url = server.base_url
        result = auger_cli("exec", "--json", "--base-url", url, "-m", "m", *QUICK, "hi", home=auger_home, cwd=project)
    events = json_events(result.stdout)
    assert result.returncode == 0, result.stderr
    assert [e["reason"] for e in events if e["type"] == "retrying"] == [
        f"the model stream from {url}/chat/completions ended without a reply (no choice in any chunk)"]
    assert [e["text"] for e in events if e["type"] == "agent_message"] == ["the real answer"]
