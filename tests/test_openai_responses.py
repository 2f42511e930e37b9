"""The Responses API client driven by the real engine against a mock Responses server.

Every test runs a real session (store, tools, retry policy) over a socket, so what
is asserted is what a user of `auger` with an OpenAI Responses provider would get:
files on disk, events, and the exact requests the API received.
"""

from __future__ import annotations

import asyncio
import base64
import time
from pathlib import Path

import pytest

from auger.engine.session.sessions import SessionManager
from auger.engine.workspace import Workspace
from auger.models.base import ModelRequest, ToolSchema
from auger.models.openai_responses import OpenAIResponsesClient, to_input
from auger.protocol import events as ev
from auger.protocol.events import Usage
from auger.protocol.items import AssistantMessage, Reasoning, ToolCall as CallItem, ToolOutput, UserMessage
from auger.protocol.ops import UserTurn
from auger.store.sqlite import SqliteStore
from tests.support.harness import Run, drive, make_config
from tests.support.mock_responses import Fault, MockResponsesServer, Raw, Reply, ToolCall, validate_request

# A 1x1 transparent PNG.
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA"
                       "60e6kgAAAABJRU5ErkJggg==")


@pytest.fixture
def responses():
    with MockResponsesServer() as srv:
        yield srv


def _client(server: MockResponsesServer, idle_timeout: float = 300.0, **options) -> OpenAIResponsesClient:
    return OpenAIResponsesClient(provider="openai", model="mock-model", base_url=server.base_url, api_key="sk-test",
                                 key_env="OPENAI_API_KEY", idle_timeout=idle_timeout, **options)


def run_responses(project: Path, server: MockResponsesServer, *prompts: str | UserTurn, overrides: tuple = (),
                  resume: str | None = None, **client_options) -> tuple[Run, list]:
    """One session through the Responses client: (events, the items the store holds afterwards).

    A UserTurn prompt (for images) must be the only one: `drive` submits plain text.
    """
    db = project.parent / "sessions.db"

    async def main():
        config = make_config(*overrides)
        client = _client(server, config.stream_idle_timeout, **client_options)
        store = SqliteStore(db)
        sessions = SessionManager(Workspace.open(project, config), store)
        try:
            if resume:
                session = await sessions.resume(resume, client=client)
            else:
                session = await sessions.create(client)
            if isinstance(prompts[0], UserTurn):
                session.submit(prompts[0])
                run = await asyncio.wait_for(drive(session, turns=1), 30)
            else:
                run = await asyncio.wait_for(drive(session, *prompts), 30)
            return run, [stored.item for stored in await store.load_items(session.id)]
        finally:
            await store.aclose()

    return asyncio.run(main())


def user_texts(request) -> list[str]:
    return [part["text"] for item in request.items_of("message") if item["role"] == "user"
            for part in item["content"] if part["type"] == "input_text"]


# --------------------------------------------------------------------------- #
# A real task, and what went over the wire
# --------------------------------------------------------------------------- #


def test_multi_step_tool_task(project, responses):
    script = "echo hi from auger\n"
    responses.add(
        Reply(reasoning_summary="Write the script, then run it.",
              tool_calls=[ToolCall("write_file", {"path": "hello.sh", "content": script})],
              usage={"input_tokens": 1200, "cached_tokens": 1000, "output_tokens": 50, "reasoning_tokens": 30}),
        Reply(tool_calls=[ToolCall("shell", {"command": "sh hello.sh"})]),
        Reply(text="The script prints: hi from auger"),
    )
    run, items = run_responses(project, responses, "write hello.sh and run it")

    assert run.ended.reason == "complete"
    assert (project / "hello.sh").read_text() == script
    assert [m.text for m in run.of(ev.AgentMessage)] == ["The script prints: hi from auger"]
    assert run.of(ev.TokenUsage)[0].last == Usage(1200, 1000, 50, 30)

    requests = responses.responses_requests
    assert len(requests) == 3
    for req in requests:
        body = req.body
        assert req.headers["authorization"] == "Bearer sk-test"
        assert body["model"] == "mock-model" and body["stream"] is True and body["store"] is False
        assert body["include"] == ["reasoning.encrypted_content"]
        assert body["reasoning"] == {"summary": "auto"}
        assert "previous_response_id" not in body
        assert body["instructions"] and body["instructions"] == requests[0].body["instructions"]
        assert body["tool_choice"] == "auto" and body["parallel_tool_calls"] is True
        assert all(t["type"] == "function" and t["strict"] is False and t["parameters"] for t in body["tools"])
        assert {"shell", "write_file", "read_file"} <= {t["name"] for t in body["tools"]}
        assert user_texts(req)[-1] == "write hello.sh and run it"
        assert all("id" not in item for item in req.input)  # nothing refers to server-side state

    # Every request carries the whole history; each output follows its call, with its call id.
    last = requests[2].input
    kinds = [item["type"] for item in last]
    assert kinds[-6:] == ["message", "reasoning", "function_call", "function_call_output",
                          "function_call", "function_call_output"]
    write_call, write_out, shell_call, shell_out = last[-4:]
    assert write_call["name"] == "write_file" and write_out["call_id"] == write_call["call_id"]
    assert shell_call["name"] == "shell" and shell_out["call_id"] == shell_call["call_id"]
    assert write_call["call_id"] != shell_call["call_id"]
    assert "hello.sh" in write_out["output"]
    assert "Exit code: 0" in shell_out["output"] and "hi from auger" in shell_out["output"]
    assert requests[1].input == last[:-2]  # the second request is a prefix of the third: nothing rewritten

    conversation = [type(i).__name__ for i in items
                    if isinstance(i, (UserMessage, Reasoning, AssistantMessage, CallItem, ToolOutput))]
    assert conversation == ["UserMessage", "Reasoning", "ToolCall", "ToolOutput", "ToolCall", "ToolOutput",
                            "AssistantMessage"]


def test_reasoning_summary_streams_is_recorded_and_sent_back_before_the_call(project, responses):
    responses.add(
        Reply(reasoning_summary=["**Looking around**", "List the project first."], encrypted="ENC-blob-1",
              tool_calls=[ToolCall("list_dir", {"path": "."})]),
        Reply(text="It is empty."),
    )
    run, items = run_responses(project, responses, "what is here?")

    summary = "**Looking around**\n\nList the project first."
    assert "".join(d.delta for d in run.of(ev.ReasoningDelta)) == summary
    reasoning = [i for i in items if isinstance(i, Reasoning)]
    assert len(reasoning) == 1
    assert reasoning[0].text == summary and reasoning[0].encrypted == "ENC-blob-1"
    assert reasoning[0].provider == "openai_responses" and reasoning[0].item_id.startswith("rs_")

    sent = responses.responses_requests[1].input
    at = next(n for n, item in enumerate(sent) if item["type"] == "reasoning")
    assert sent[at] == {"type": "reasoning", "summary": [{"type": "summary_text", "text": summary}],
                        "encrypted_content": "ENC-blob-1"}  # no "id": store is false
    assert sent[at + 1]["type"] == "function_call" and sent[at + 1]["name"] == "list_dir"


def test_resumed_session_sends_the_recorded_reasoning(project, responses):
    responses.add(Reply(reasoning_summary="Think.", encrypted="ENC-resume",
                        tool_calls=[ToolCall("list_dir", {"path": "."})]),
                  Reply(text="first answer"), Reply(text="second answer"))
    first, _ = run_responses(project, responses, "one")
    second, _ = run_responses(project, responses, "two", resume=first.session_id)

    assert second.ended.reason == "complete"
    resumed = responses.responses_requests[-1]
    assert user_texts(resumed)[-2:] == ["one", "two"]
    assert [i["encrypted_content"] for i in resumed.items_of("reasoning")] == ["ENC-resume"]
    assert [i["content"][0]["text"] for i in resumed.items_of("message") if i["role"] == "assistant"] == [
        "first answer"]


def test_compatible_server_quirks(project, responses):
    """Unknown events are ignored, a message sent only as a finished item still reaches the user,
    several reasoning items stream as separate paragraphs, and a refusal is the model's answer."""
    usage = {"input_tokens": 10, "output_tokens": 5}
    responses.add(
        Raw([
            {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
            {"type": "response.mystery.delta", "delta": "not for us"},
            {"type": "response.reasoning_summary_part.added", "item_id": "rs_a", "summary_index": 0},
            {"type": "response.reasoning_summary_text.delta", "item_id": "rs_a", "summary_index": 0, "delta": "first"},
            {"type": "response.output_item.done", "item": {"id": "rs_a", "type": "reasoning", "encrypted_content": "E1",
                                                           "summary": [{"type": "summary_text", "text": "first"}]}},
            {"type": "response.reasoning_summary_part.added", "item_id": "rs_b", "summary_index": 0},
            {"type": "response.reasoning_summary_text.delta", "item_id": "rs_b", "summary_index": 0, "delta": "second"},
            {"type": "response.output_item.done", "item": {"id": "rs_b", "type": "reasoning", "encrypted_content": "E2",
                                                           "summary": [{"type": "summary_text", "text": "second"}]}},
            {"type": "response.output_item.done", "item": {
                "id": "msg_1", "type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": "sent only when done"}]}},
            {"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "usage": usage}},
        ]),
        Raw([
            {"type": "response.refusal.delta", "item_id": "msg_2", "delta": "I can't help with that."},
            {"type": "response.output_item.done", "item": {
                "id": "msg_2", "type": "message", "role": "assistant",
                "content": [{"type": "refusal", "refusal": "I can't help with that."}]}},
            {"type": "response.completed", "response": {"id": "resp_2", "status": "completed", "usage": usage}},
        ]),
    )
    run, items = run_responses(project, responses, "hi", "something else")
    assert [e.reason for e in run.of(ev.TurnEnded)] == ["complete", "complete"]
    assert "".join(d.delta for d in run.of(ev.ReasoningDelta)) == "first\n\nsecond"
    assert [(i.text, i.encrypted) for i in items if isinstance(i, Reasoning)] == [("first", "E1"), ("second", "E2")]
    assert [m.text for m in run.of(ev.AgentMessage)] == ["sent only when done", "I can't help with that."]
    assert [i["encrypted_content"] for i in responses.responses_requests[1].items_of("reasoning")] == ["E1", "E2"]


def test_to_input_drops_reasoning_it_cannot_send_back():
    items = [
        UserMessage("hi"),
        Reasoning("anthropic thinking", "signature", "anthropic"),
        Reasoning("chat completions reasoning"),
        Reasoning("no encrypted content", None, "openai_responses", "rs_1"),
        Reasoning("", "ENC", "openai_responses", "rs_2"),
        AssistantMessage("hello"),
        CallItem("c1", "shell", '{"command": "ls"}'),
        ToolOutput("c1", "a\nb"),
    ]
    assert to_input(items) == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "reasoning", "summary": [], "encrypted_content": "ENC"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hello"}]},
        {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": '{"command": "ls"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "a\nb"},
    ]


def test_request_options(responses):
    request = ModelRequest("be brief", [UserMessage("hi")], [ToolSchema("t", "a tool", {"type": "object"})])
    body = _client(responses, reasoning_effort="high", max_output_tokens=64).build_body(request)
    assert body["reasoning"] == {"effort": "high", "summary": "auto"} and body["max_output_tokens"] == 64
    assert body["tools"] == [{"type": "function", "name": "t", "description": "a tool",
                              "parameters": {"type": "object"}, "strict": False}]
    plain = _client(responses, reasoning_summary=None).build_body(request)  # a model without reasoning
    assert "reasoning" not in plain and "include" not in plain and "max_output_tokens" not in plain
    no_tools = _client(responses).build_body(ModelRequest("x", [UserMessage("hi")]))
    assert "tools" not in no_tools and "tool_choice" not in no_tools


def test_mock_rejects_what_the_real_api_rejects_for_stateless_requests():
    base = {"model": "m", "store": False}
    with_id = [{"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "E"}]
    assert validate_request({**base, "input": with_id})[0] == 404
    assert validate_request({**base, "input": [{"type": "reasoning", "summary": []}]})[0] == 400
    assert validate_request({**base, "input": [{"type": "function_call_output", "call_id": "x", "output": ""}]})
    assert validate_request({**base, "input": [], "previous_response_id": "resp_1"})
    assert validate_request({**base, "input": [{"type": "function_call", "call_id": "x", "name": "n",
                                                "arguments": "{}"}]})


# --------------------------------------------------------------------------- #
# Images
# --------------------------------------------------------------------------- #


def test_images_are_sent_as_input_image_data_urls(project, responses):
    (project / "dot.png").write_bytes(PNG)
    responses.add(Reply(text="a transparent pixel"))
    run, _ = run_responses(project, responses, UserTurn("what is this?", [str(project / "dot.png")]))

    assert run.ended.reason == "complete"
    message = [i for i in responses.responses_requests[0].items_of("message") if i["role"] == "user"][-1]
    assert message["content"] == [
        {"type": "input_text", "text": "what is this?"},
        {"type": "input_image", "image_url": "data:image/png;base64," + base64.b64encode(PNG).decode()},
    ]


def test_unreadable_image_fails_the_turn_without_a_request_or_retry(project, responses):
    run, _ = run_responses(project, responses, UserTurn("look", [str(project / "missing.png")]))
    assert run.ended.reason == "error"
    assert "missing.png" in run.ended.message and "cannot read image" in run.ended.message
    assert not run.of(ev.Retrying) and not responses.responses_requests


# --------------------------------------------------------------------------- #
# Faults
# --------------------------------------------------------------------------- #


def test_429_honours_retry_after(project, responses):
    responses.add(Fault.status(429, retry_after="1"), Reply(text="after the wait"))
    started = time.monotonic()
    run, _ = run_responses(project, responses, "hi")
    assert time.monotonic() - started >= 1.0
    [retry] = run.of(ev.Retrying)
    assert retry.delay_s == 1.0 and "429" in retry.reason
    assert [m.text for m in run.of(ev.AgentMessage)] == ["after the wait"]


def test_server_errors_are_retried(project, responses):
    responses.add(Fault.status(500), Fault.status(503), Reply(text="ok"))
    run, _ = run_responses(project, responses, "hi")
    assert [r.attempt for r in run.of(ev.Retrying)] == [1, 2]
    assert run.ended.reason == "complete"


def test_broken_streams_are_retried_and_partial_text_discarded(project, responses):
    partial = Reply(text="partial partial partial partial", chunk_chars=4)
    responses.add(Fault.drop(after_events=6, reply=partial), Fault.end_early(after_events=6, reply=partial),
                  Reply(text="the whole answer"))
    run, items = run_responses(project, responses, "hi")
    dropped, ended = run.of(ev.Retrying)
    assert "connection" in dropped.reason  # the socket closed mid-body
    assert "ended before the reply was complete" in ended.reason  # a clean end, but no response.completed
    assert any(d.delta == "part" for d in run.of(ev.MessageDelta))  # it did stream something first
    assert [m.text for m in run.of(ev.AgentMessage)] == ["the whole answer"]
    assert [i.text for i in items if isinstance(i, AssistantMessage)] == ["the whole answer"]


def test_idle_stream_times_out_and_is_retried(project, responses):
    responses.add(Fault.hang(after_events=3, seconds=10), Reply(text="second try"))
    started = time.monotonic()
    run, _ = run_responses(project, responses, "hi", overrides=("stream_idle_timeout=0.5",))
    assert time.monotonic() - started < 5
    assert "idle" in run.of(ev.Retrying)[0].reason
    assert run.ended.reason == "complete"


def test_retryable_stream_failures(project, responses):
    responses.add(Fault.failed("server_error"),
                  Fault.failed("rate_limit_exceeded", "Rate limit reached for gpt-5. Please try again in 20ms."),
                  Fault.error_event("server_error"),
                  Reply(text="made it"))
    run, _ = run_responses(project, responses, "hi")
    retries = run.of(ev.Retrying)
    assert [r.attempt for r in retries] == [1, 2, 3]
    assert "server_error" in retries[0].reason
    assert retries[1].delay_s == 0.02  # the delay the message suggested
    assert run.ended.reason == "complete"


def test_non_retryable_stream_failure_ends_the_turn_and_session_stays_usable(project, responses):
    responses.add(Fault.failed("invalid_prompt", "Invalid prompt: your prompt was flagged."), Reply(text="fine"))
    run, _ = run_responses(project, responses, "bad", "good")
    assert [e.reason for e in run.of(ev.TurnEnded)] == ["error", "complete"]
    assert "invalid_prompt" in run.of(ev.TurnEnded)[0].message and "flagged" in run.of(ev.TurnEnded)[0].message
    assert not run.of(ev.Retrying)


@pytest.mark.parametrize("in_stream", [False, True], ids=["http-400", "response.failed"])
def test_context_window_error_is_not_retried_and_says_so(project, responses, in_stream):
    def step(body):
        # Whatever the engine asks while the conversation is "too long" (the reply, or a summary to
        # compact it), overflow; the next prompt stands for a conversation that fits again.
        texts = [p.get("text", "") for i in body["input"] if i.get("role") == "user" for p in i["content"]]
        if "fits now" in texts:
            return Reply(text="fine")
        return Fault.context_length(in_stream=in_stream)

    responses.add(*[step] * 12)
    run, _ = run_responses(project, responses, "too long", "fits now")
    ends = run.of(ev.TurnEnded)
    assert [e.reason for e in ends] == ["error", "complete"]
    assert "context window" in ends[0].message
    assert not run.of(ev.Retrying)


def test_incomplete_reply_ends_with_a_cut_off_warning(project, responses):
    responses.add(Reply(text="The answer starts here and then", incomplete="max_output_tokens"))
    run, _ = run_responses(project, responses, "long answer please", max_output_tokens=16)
    assert responses.responses_requests[0].body["max_output_tokens"] == 16
    assert [m.text for m in run.of(ev.AgentMessage)] == ["The answer starts here and then"]
    assert any("cut off" in w.message for w in run.of(ev.WarningEvent))
    assert run.ended.reason == "complete"
