"""The Anthropic Messages client, driven by the real engine against a mock Messages API.

Every engine test goes through a socket, httpx, the SSE parser and the retry loop; the mock also
rejects requests whose shape the real API would reject (see tests/support/mock_anthropic.py), so
"the turn completed" implies "the request was well formed".
"""

from __future__ import annotations

import asyncio
import base64
import struct
import time
import zlib
from pathlib import Path

import pytest

from auger.engine.session.sessions import SessionManager
from auger.engine.workspace import Workspace
from auger.models.anthropic import AnthropicClient, messages_url
from auger.models.base import ModelError, ModelRequest, ToolSchema
from auger.protocol import events as ev
from auger.protocol.items import AssistantMessage, Reasoning, ToolCall as ToolCallItem, ToolOutput, UserMessage
from auger.protocol.ops import Shutdown, UserTurn
from auger.store.sqlite import SqliteStore
from tests.support.harness import Run, make_config
from tests.support.mock_anthropic import Fault, MockAnthropicServer, Reply, ToolCall, validate_request

EPHEMERAL = {"type": "ephemeral"}
HEADERS = {"anthropic-version": "2023-06-01"}


@pytest.fixture
def mock():
    with MockAnthropicServer(api_key="k") as srv:
        yield srv


def converse(project: Path, server: MockAnthropicServer, *inputs: str | UserTurn, overrides: tuple[str, ...] = (),
             **client_options) -> tuple[Run, list]:
    """Run one session: submit each input after the previous turn ended, then shut down.
    Returns the events and the items the store recorded."""
    config = make_config(*overrides)

    async def main() -> tuple[Run, list]:
        client = AnthropicClient(provider="anthropic", model="claude-test", base_url=server.base_url, api_key="k",
                                 key_env="ANTHROPIC_API_KEY", idle_timeout=config.stream_idle_timeout,
                                 **client_options)
        store = SqliteStore(project.parent / "sessions.db")
        try:
            session = await SessionManager(Workspace.open(project, config), store).create(client)
            run = Run(session_id=session.id)
            queue = [UserTurn(i) if isinstance(i, str) else i for i in inputs]
            session.submit(queue.pop(0))

            async def collect() -> None:
                async for event in session.events():
                    run.events.append(event)
                    if isinstance(event, ev.TurnEnded):
                        session.submit(queue.pop(0) if queue else Shutdown())

            await asyncio.wait_for(collect(), 30)
            items = [stored.item for stored in await store.load_items(session.id)]
            return run, items
        finally:
            await store.aclose()

    return asyncio.run(main())


def blocks(request, index: int) -> list[dict]:
    return request.body["messages"][index]["content"]


def cache_marks(body: dict) -> int:
    found = [b for b in [*(body.get("tools") or []), *(body.get("system") or [])] if b.get("cache_control")]
    found += [b for m in body["messages"] for b in m["content"] if b.get("cache_control")]
    return len(found)


def tiny_png() -> bytes:
    """A valid 1x1 PNG, built by hand so the test needs no image library."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00"))
            + chunk(b"IEND", b""))


# ------------------------------------------------------------------------------------------------ #
# A real task
# ------------------------------------------------------------------------------------------------ #


def test_multi_step_tool_task(project, mock):
    usage = {"input_tokens": 100, "cache_read_input_tokens": 900, "cache_creation_input_tokens": 50,
             "output_tokens": 20}
    mock.add(
        Reply(text="I'll write the script.", tool_calls=[
            ToolCall("write_file", {"path": "greet.sh", "content": 'echo "hello from $1"\n'})], usage=usage),
        Reply(tool_calls=[ToolCall("shell", {"command": "sh greet.sh auger > out.txt; cat out.txt"})]),
        Reply(text="Done: out.txt says hello."),
    )
    run, items = converse(project, mock, "make a greeting")

    assert run.ended.reason == "complete", run.ended.message
    assert (project / "greet.sh").read_text() == 'echo "hello from $1"\n'
    assert (project / "out.txt").read_text() == "hello from auger\n"
    assert [m.text for m in run.of(ev.AgentMessage)] == ["I'll write the script.", "Done: out.txt says hello."]
    assert not mock.remaining and not mock.rejections

    first, second, third = mock.message_requests
    assert first.path == "/v1/messages"
    assert first.headers["x-api-key"] == "k"
    assert first.headers["anthropic-version"] == "2023-06-01"
    assert first.headers["content-type"].startswith("application/json")
    body = first.body
    assert body["model"] == "claude-test" and body["stream"] is True and body["max_tokens"] == 8192
    assert "thinking" not in body
    assert body["system"][-1]["type"] == "text" and body["system"][-1]["cache_control"] == EPHEMERAL
    assert {"shell", "write_file", "read_file"} <= {t["name"] for t in body["tools"]}
    assert all(set(t) == {"name", "description", "input_schema"} for t in body["tools"][:-1])
    assert body["tools"][-1]["cache_control"] == EPHEMERAL
    (opening,) = body["messages"]  # the recorded environment and the prompt form one user message
    assert opening["role"] == "user" and opening["content"][0]["text"].startswith("<environment_context>")
    assert opening["content"][1:] == [{"type": "text", "text": "make a greeting", "cache_control": EPHEMERAL}]

    # The write_file call goes back as tool_use; its output comes back as a tool_result with the same id.
    write_id, shell_id = [i.call_id for i in items if isinstance(i, ToolCallItem)]
    assert write_id == "toolu_mock_0001" and shell_id == "toolu_mock_0002"
    assert blocks(second, 1) == [
        {"type": "text", "text": "I'll write the script."},
        {"type": "tool_use", "id": write_id, "name": "write_file",
         "input": {"path": "greet.sh", "content": 'echo "hello from $1"\n'}}]
    result = blocks(second, 2)[0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == write_id and result["is_error"] is False
    assert result["cache_control"] == EPHEMERAL  # the growing conversation is cached incrementally
    shell_result = blocks(third, 4)[0]
    assert shell_result["tool_use_id"] == shell_id and "hello from auger" in shell_result["content"]
    assert blocks(third, 3)[0]["input"] == {"command": "sh greet.sh auger > out.txt; cat out.txt"}
    # Breakpoints: last tool, system, and the two most recent user messages -- never more than 4.
    assert blocks(third, 2)[-1]["cache_control"] == EPHEMERAL
    assert "cache_control" not in blocks(third, 0)[-1]
    assert cache_marks(third.body) == 4

    # Anthropic's input_tokens excludes cached tokens; the engine's count includes them.
    last = run.of(ev.TokenUsage)[0].last
    assert (last.input_tokens, last.cached_input_tokens, last.output_tokens) == (1050, 900, 20)


# ------------------------------------------------------------------------------------------------ #
# Faults
# ------------------------------------------------------------------------------------------------ #


def test_429_honours_retry_after(project, mock):
    mock.add(Fault.status(429, retry_after="0.5"), Reply(text="after the wait"))
    started = time.monotonic()
    run, _ = converse(project, mock, "hi")
    assert time.monotonic() - started >= 0.5
    (retry,) = run.of(ev.Retrying)
    assert retry.delay_s == 0.5 and "429" in retry.reason and "rate limit" in retry.reason
    assert [m.text for m in run.of(ev.AgentMessage)] == ["after the wait"]


@pytest.mark.parametrize("fault, reason", [
    (Fault.status(500), "HTTP 500"),
    (Fault.overloaded(), "Overloaded"),
    (Fault.drop(after_events=5), "RemoteProtocolError"),
    (Fault.truncate(after_events=6), "ended before the reply was complete"),
    (Fault.error_event("overloaded_error", after_events=4), "overloaded_error"),
    (Fault.error_event("api_error", after_events=2), "api_error"),
], ids=["500", "529", "drop", "truncate", "overloaded-event", "api-error-event"])
def test_retryable_faults_recover(project, mock, fault, reason):
    mock.add(fault, Reply(text="recovered"))
    run, _ = converse(project, mock, "hi")
    (retry,) = run.of(ev.Retrying)
    assert reason in retry.reason
    assert run.ended.reason == "complete"
    assert [m.text for m in run.of(ev.AgentMessage)] == ["recovered"]  # the partial text was discarded


def test_a_tool_call_of_an_unfinished_reply_is_never_run(project, mock):
    # Everything up to message_stop arrives (the tool_use block is complete), then the stream ends.
    mock.add(Fault.truncate(after_events=1000, reply=Reply(tool_calls=[
                 ToolCall("write_file", {"path": "half.txt", "content": "x"})])),
             Reply(text="thought better of it"))
    run, _ = converse(project, mock, "hi")
    assert len(run.of(ev.Retrying)) == 1 and not run.of(ev.ToolCallStarted)
    assert not (project / "half.txt").exists()
    assert run.ended.reason == "complete"


def test_idle_stream_times_out_and_is_retried(project, mock):
    mock.add(Fault.hang(after_events=3, seconds=10), Reply(text="second try"))
    started = time.monotonic()
    run, _ = converse(project, mock, "hi", overrides=("stream_idle_timeout=0.3",))
    assert time.monotonic() - started < 5
    assert "idle" in run.of(ev.Retrying)[0].reason
    assert run.ended.reason == "complete"


def test_non_retryable_errors_end_the_turn_with_what_to_do(project, mock):
    # A context-window error makes the engine compact (one summary request) and try once more;
    # a second one ends the turn. None of these failures is retried as such.
    mock.add(Fault.context_length(), Reply(text="summary of a"), Fault.context_length(),
             Fault.status(401), Fault.status(404),
             Fault.error_event("invalid_request_error", "messages: something the API disliked"),
             Reply(text="still here"))
    run, _ = converse(project, mock, "a", "b", "c", "d", "e")
    ends = run.of(ev.TurnEnded)
    assert [e.reason for e in ends] == ["error", "error", "error", "error", "complete"]
    assert not run.of(ev.Retrying) and not mock.remaining
    assert len(mock.message_requests) == 7
    assert [c.summary for c in run.of(ev.ContextCompacted)] == ["summary of a"]
    assert "context window" in ends[0].message and "prompt is too long" in ends[0].message
    assert "authentication failed" in ends[1].message and "ANTHROPIC_API_KEY" in ends[1].message
    assert "model 'claude-test'" in ends[2].message and "not found" in ends[2].message
    assert "invalid_request_error" in ends[3].message and "something the API disliked" in ends[3].message


# ------------------------------------------------------------------------------------------------ #
# Extended thinking
# ------------------------------------------------------------------------------------------------ #


def test_thinking_streams_is_recorded_and_goes_back_with_its_signature(project, mock):
    mock.add(Reply(thinking="I should list the files first.", signature="sig-abc123", text="Let me look.",
                   tool_calls=[ToolCall("list_dir", {"path": "."})], chunk_chars=5),
             Reply(thinking="Nothing to see.", signature="sig-2", text="The project is empty."))
    run, items = converse(project, mock, "what is here?", thinking_budget=2048)

    assert run.ended.reason == "complete", run.ended.message
    assert "".join(d.delta for d in run.of(ev.ReasoningDelta)) == "I should list the files first.Nothing to see."
    reasoning = [i for i in items if isinstance(i, Reasoning)]
    assert [(r.text, r.encrypted, r.provider, r.redacted) for r in reasoning] == [
        ("I should list the files first.", "sig-abc123", "anthropic", False),
        ("Nothing to see.", "sig-2", "anthropic", False)]

    first, second = mock.message_requests
    assert first.body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert first.body["max_tokens"] == 8192 + 2048
    call_id = next(i.call_id for i in items if isinstance(i, ToolCallItem))
    assert blocks(second, 1) == [
        {"type": "thinking", "thinking": "I should list the files first.", "signature": "sig-abc123"},
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": call_id, "name": "list_dir", "input": {"path": "."}}]


def test_redacted_thinking_round_trips(project, mock):
    mock.add(Reply(redacted="EmwKAhgBEgy3va3pzix/opaque==", tool_calls=[ToolCall("list_dir", {"path": "."})]),
             Reply(text="ok"))
    run, items = converse(project, mock, "go", thinking_budget=1024)
    assert run.ended.reason == "complete", run.ended.message
    (reasoning,) = [i for i in items if isinstance(i, Reasoning)]
    assert (reasoning.text, reasoning.encrypted, reasoning.redacted) == ("", "EmwKAhgBEgy3va3pzix/opaque==", True)
    assert blocks(mock.message_requests[1], 1)[0] == {"type": "redacted_thinking",
                                                      "data": "EmwKAhgBEgy3va3pzix/opaque=="}


def test_reasoning_of_other_providers_is_dropped_and_thinking_waits_for_a_fresh_loop():
    client = AnthropicClient(provider="anthropic", model="claude-test", base_url="https://example.invalid/v1",
                             api_key=None, thinking_budget=4096)
    items = [UserMessage("hi"), Reasoning("from elsewhere", "enc", "openai_responses"),
             ToolCallItem("c1", "shell", "not json"), ToolOutput("c1", "", ok=False)]
    body = client.build_body(ModelRequest("be brief", items, [ToolSchema("shell", "run", {"type": "object"})]))
    assert body["messages"][1] == {"role": "assistant", "content": [
        {"type": "tool_use", "id": "c1", "name": "shell", "input": {}}]}  # unparsable arguments → {}
    assert body["messages"][2]["content"][0]["is_error"] is True
    # The open tool loop has no thinking block to send back: thinking would be rejected for this request.
    assert "thinking" not in body and body["max_tokens"] == 8192
    assert validate_request(body, HEADERS) is None

    anthropic = [UserMessage("hi"), Reasoning("mine", "sig", "anthropic"), AssistantMessage("checking"),
                 ToolCallItem("c1", "shell", '{"command": "ls"}'), ToolOutput("c1", "a.txt")]
    body = client.build_body(ModelRequest("be brief", anthropic))
    assert body["thinking"]["budget_tokens"] == 4096
    assert [b["type"] for b in body["messages"][1]["content"]] == ["thinking", "text", "tool_use"]
    assert validate_request(body, HEADERS) is None


# ------------------------------------------------------------------------------------------------ #
# Images
# ------------------------------------------------------------------------------------------------ #


def test_images_are_sent_as_base64_blocks(project, mock, tmp_path):
    png = project / "dot.png"
    png.write_bytes(tiny_png())
    mock.add(Reply(text="A green dot."))
    run, _ = converse(project, mock, UserTurn("what is in this picture?", images=[str(png)]))
    assert run.ended.reason == "complete", run.ended.message
    assert blocks(mock.message_requests[0], 0)[1:] == [  # after the recorded environment block
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": base64.b64encode(tiny_png()).decode()}},
        {"type": "text", "text": "what is in this picture?", "cache_control": EPHEMERAL}]


def test_unreadable_image_is_a_clear_error_and_the_session_goes_on(project, mock):
    missing = project / "gone.png"
    mock.add(Reply(text="fine without it"))
    run, _ = converse(project, mock, UserTurn("look at this", images=[str(missing)]), "never mind")
    first, second = run.of(ev.TurnEnded)
    assert first.reason == "error" and "gone.png" in first.message and "cannot read image" in first.message
    assert second.reason == "complete"
    (request,) = mock.message_requests  # the failed turn sent nothing...
    texts = [b.get("text", "") for b in blocks(request, 0)]
    assert texts[-1].startswith("never mind") or "never mind" in texts[-1]
    assert not any("look at this" in t for t in texts)  # ...and its message never entered the history


def test_bad_image_in_the_latest_message_raises_a_model_error():
    client = AnthropicClient(provider="anthropic", model="m", base_url="http://127.0.0.1:9", api_key=None)
    with pytest.raises(ModelError) as info:
        client.build_body(ModelRequest("", [UserMessage("x", ["data:image/bmp;base64,AAAA"])]))
    assert not info.value.retryable and "unsupported image type" in str(info.value)


# ------------------------------------------------------------------------------------------------ #
# Wire details
# ------------------------------------------------------------------------------------------------ #


@pytest.mark.parametrize("base", ["https://api.anthropic.com", "https://api.anthropic.com/",
                                  "https://api.anthropic.com/v1", "https://api.anthropic.com/v1/", ""])
def test_base_url_with_or_without_v1(base):
    assert messages_url(base) == "https://api.anthropic.com/v1/messages"


def test_history_merges_roles_and_starts_with_the_user():
    client = AnthropicClient(provider="anthropic", model="m", base_url="http://127.0.0.1:9", api_key=None)
    items = [AssistantMessage("left over"), UserMessage("a"), ToolCallItem("c1", "read_file", '{"path": "x"}'),
             ToolCallItem("c2", "read_file", '{"path": "y"}'), ToolOutput("c1", "one"), ToolOutput("c2", "two"),
             UserMessage("and then"), AssistantMessage("answer"), UserMessage("b")]
    body = client.build_body(ModelRequest("", items))
    assert "system" not in body  # an empty system text block would be rejected
    roles = [(m["role"], [b["type"] for b in m["content"]]) for m in body["messages"]]
    assert roles == [("user", ["text"]), ("assistant", ["text"]), ("user", ["text"]),
                     ("assistant", ["tool_use", "tool_use"]), ("user", ["tool_result", "tool_result", "text"]),
                     ("assistant", ["text"]), ("user", ["text"])]
    assert cache_marks(body) == 2  # no tools, no system: the two newest user messages only
    assert validate_request(body, HEADERS) is None


def test_the_mock_rejects_what_the_real_api_rejects():
    """The validator is what makes "the turn completed" mean "the request was valid"."""
    base = {"model": "m", "max_tokens": 10}
    unanswered = {**base, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}]},
        {"role": "user", "content": "no result"}]}
    assert "without tool_result" in validate_request(unanswered, HEADERS)
    late = {**base, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}]},
        {"role": "user", "content": [{"type": "text", "text": "first"},
                                     {"type": "tool_result", "tool_use_id": "t1"}]}]}
    assert "must come first" in validate_request(late, HEADERS)
    thinking = {**late, "max_tokens": 3000, "thinking": {"type": "enabled", "budget_tokens": 2048}, "messages": [
        *late["messages"][:2], {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]}]}
    assert "must start with a thinking block" in validate_request(thinking, HEADERS)
    marks = {**base, "messages": [{"role": "user", "content": [
        {"type": "text", "text": str(i), "cache_control": EPHEMERAL} for i in range(5)]}]}
    assert "maximum of 4" in validate_request(marks, HEADERS)
    assert "anthropic-version" in validate_request(marks, {})
