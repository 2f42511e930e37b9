"""The wire clients against recorded real-provider stream shapes (tests/support/mock_provider_streams.py):
reasoning sent back per provider, Mistral content parts, refusals and filters, in-stream errors classified
like HTTP ones, raw Responses reasoning, images on Chat Completions, rejected images, server-reported
context windows, reasoning efforts, and linear-time stream assembly."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
from pathlib import Path

import pytest

from auger.config import load_config
from auger.models.anthropic import AnthropicClient
from auger.models.base import (
    Completed, ContextWindowExceeded, ImageRejected, ModelRequest, ReasoningDelta, ReasoningDone, TextDelta,
    ToolCallReady, ToolSchema,
)
from auger.models.context_window import learn_window
from auger.models.http import stream_error
from auger.models.openai_chat import OpenAIChatClient
from auger.models.openai_responses import OpenAIResponsesClient
from auger.models.registry import effort_problem
from auger.protocol import events as ev
from auger.protocol.items import Reasoning, ToolCall, ToolOutput, UserMessage
from auger.protocol.ops import UserTurn
from tests.support.harness import conversation, drive, open_session, run_session
from tests.support import mock_anthropic, mock_responses
from tests.support import mock_provider_streams as rec
from tests.support.mock_openai import Fault as ChatFault, MockChatServer, Raw, Reply, ToolCall as ChatToolCall

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


def _collect(client, request: ModelRequest) -> list:
    async def main() -> list:
        try:
            return [event async for event in client.stream(request)]
        finally:
            await client.aclose()

    return asyncio.run(main())


def _chat(server: MockChatServer, model: str = "mock-model") -> OpenAIChatClient:
    return OpenAIChatClient(provider="openai-compatible", model=model, base_url=server.base_url, api_key="sk-test")


def _assistant_with_calls(request) -> dict:
    return next(m for m in request.messages if m["role"] == "assistant" and m.get("tool_calls"))


# --------------------------------------------------------------------------------------------------------- #
# Reasoning sent back (DeepSeek reasoning_content, Ollama reasoning, OpenRouter reasoning_details)
# --------------------------------------------------------------------------------------------------------- #


@pytest.mark.parametrize("stream, field, expected", [
    (rec.deepseek_tool_call, "reasoning_content", rec.DEEPSEEK_REASONING),
    (rec.ollama_tool_call, "reasoning", rec.OLLAMA_REASONING),
    (rec.openrouter_tool_call, "reasoning_details", rec.OPENROUTER_DETAILS),
])
def test_tool_loop_sends_the_providers_reasoning_back(project, stream, field, expected):
    with MockChatServer([Raw(stream()), Reply(text="listed")], reasoning_back=(field,)) as server:
        run = run_session(project, server, "list the files")
        assert run.ended.reason == "complete", run.ended.message
        assert [e.text for e in run.of(ev.AgentMessage)] == ["listed"]
        assert len(server.chat_requests) == 2
        assert _assistant_with_calls(server.chat_requests[1])[field] == expected


def test_deepseek_mock_rejects_a_tool_turn_without_its_reasoning(project):
    """The mock answers what DeepSeek answers: the check above is a real one."""
    with MockChatServer([Raw(rec.deepseek_tool_call())], reasoning_back=("reasoning_content",)) as server:
        client = _chat(server)
        history = [UserMessage("list"), ToolCall("call_00_ds1", "list_dir", '{"path": "."}'),
                   ToolOutput("call_00_ds1", "a.txt")]
        _collect(client, ModelRequest("sys", [UserMessage("list")]))
        with pytest.raises(Exception) as info:
            _collect(_chat(server), ModelRequest("sys", history))
        assert "reasoning_content in the thinking mode must be passed back" in str(info.value)
        assert getattr(info.value, "retryable", True) is False


# --------------------------------------------------------------------------------------------------------- #
# Mistral content parts, refusals, content filters
# --------------------------------------------------------------------------------------------------------- #


def test_mistral_content_parts_give_text_and_thinking(project):
    with MockChatServer([Raw(rec.mistral_thinking_reply())]) as server:
        run = run_session(project, server, "what is 2+2")
    assert run.ended.reason == "complete", run.ended.message
    assert [e.text for e in run.of(ev.AgentMessage)] == [rec.MISTRAL_TEXT]
    assert "".join(e.delta for e in run.of(ev.ReasoningDelta)) == rec.MISTRAL_THINKING


def test_chat_refusal_is_shown_recorded_and_warned(project):
    db = project.parent / "refusal.db"
    with MockChatServer([Raw(rec.chat_refusal()), Reply(text="ok")]) as server:
        run = run_session(project, server, "do something bad", "then something fine", db=db)
        assert [e.text for e in run.of(ev.AgentMessage)] == [rec.REFUSAL, "ok"]
        assert any("refused" in w.message for w in run.of(ev.WarningEvent))
        # recorded: the next request carries the refusal as the assistant's message
        assert {"role": "assistant", "content": rec.REFUSAL} in conversation(server.chat_requests[1].messages)


def test_chat_content_filter_is_warned(project):
    with MockChatServer([Raw(rec.chat_content_filter())]) as server:
        run = run_session(project, server, "hello")
    assert run.ended.reason == "complete"
    assert any("content filter" in w.message and "content_filter" in w.message for w in run.of(ev.WarningEvent))


def test_anthropic_refusal_stop_reason_is_warned():
    with mock_anthropic.MockAnthropicServer([mock_anthropic.Reply(text="I can't help with that.",
                                                                  stop_reason="refusal")]) as server:
        client = AnthropicClient(provider="anthropic", model="claude-sonnet-4-5", base_url=server.base_url,
                                 api_key="k")
        events = _collect(client, ModelRequest("sys", [UserMessage("hi")]))
    completed = [e for e in events if isinstance(e, Completed)][0]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "I can't help with that."
    assert completed.warning and "refus" in completed.warning


# --------------------------------------------------------------------------------------------------------- #
# In-stream errors: one classifier with HTTP
# --------------------------------------------------------------------------------------------------------- #


def test_openrouter_400_error_chunk_is_not_retried(project):
    with MockChatServer([Raw(rec.openrouter_error(400, "Provider returned error: invalid schema for tool")),
                         Reply(text="never")]) as server:
        run = run_session(project, server, "hi")
        assert run.ended.reason == "error" and "invalid schema for tool" in run.ended.message
        assert not run.of(ev.Retrying) and len(server.chat_requests) == 1


def test_openrouter_502_error_chunk_is_retried(project):
    with MockChatServer([Raw(rec.openrouter_error(502, "Upstream provider error")), Reply(text="fine")]) as server:
        run = run_session(project, server, "hi")
    assert run.ended.reason == "complete" and len(run.of(ev.Retrying)) == 1
    assert [e.text for e in run.of(ev.AgentMessage)] == ["fine"]


@pytest.mark.parametrize("status, kind, retryable", [
    (400, None, False), (408, None, True), (409, None, True), (429, None, True), (422, None, False),
    (500, None, True), (503, None, True), (None, "overloaded_error", True), (None, "invalid_request_error", False),
    (None, "api_error", True), (None, "server_error", True), (None, "invalid_prompt", False), (None, None, True),
])
def test_in_stream_errors_are_classified_like_http(status, kind, retryable):
    error = stream_error(status, kind, "something failed", "http://x/v1", model="m")
    assert error.retryable is retryable


def test_in_stream_context_and_image_errors_are_recognised():
    assert isinstance(stream_error(400, None, "This model's maximum context length is 8192 tokens", "u", model="m"),
                      ContextWindowExceeded)
    assert isinstance(stream_error(None, "invalid_request_error", "prompt is too long: 210000 tokens", "u",
                                   model="m"), ContextWindowExceeded)
    assert isinstance(stream_error(None, "invalid_request_error", "Could not process image", "u", model="m"),
                      ImageRejected)


def test_anthropic_invalid_request_error_event_is_not_retried(project):
    from auger.models.retry import RetryPolicy, stream_with_retry

    with mock_anthropic.MockAnthropicServer([
            mock_anthropic.Fault.error_event("invalid_request_error", "messages: bad block"),
            mock_anthropic.Reply(text="never")]) as server:
        client = AnthropicClient(provider="anthropic", model="claude-sonnet-4-5", base_url=server.base_url,
                                 api_key="k")

        async def main():
            try:
                await stream_with_retry(client, ModelRequest("s", [UserMessage("hi")]), RetryPolicy(3, 0.01, 0.01),
                                        lambda e: None, lambda *a: None)
            finally:
                await client.aclose()

        with pytest.raises(Exception) as info:
            asyncio.run(main())
        assert "bad block" in str(info.value) and len(server.message_requests) == 1


# --------------------------------------------------------------------------------------------------------- #
# Responses: raw reasoning_text, incomplete reasons
# --------------------------------------------------------------------------------------------------------- #


def test_responses_reasoning_text_is_shown_recorded_and_sent_back():
    with mock_responses.MockResponsesServer([mock_responses.Raw(rec.responses_reasoning_text()),
                                             mock_responses.Reply(text="done")]) as server:
        def client():
            return OpenAIResponsesClient(provider="openai-compatible", model="openai/gpt-oss-20b",
                                         base_url=server.base_url, api_key="k", reasoning_summary=None)
        events = _collect(client(), ModelRequest("s", [UserMessage("list")]))
        assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == rec.RAW_REASONING
        done = [e for e in events if isinstance(e, ReasoningDone)]
        assert len(done) == 1 and done[0].text == rec.RAW_REASONING
        call = [e for e in events if isinstance(e, ToolCallReady)][0]
        history = [UserMessage("list"), Reasoning(done[0].text, done[0].encrypted, done[0].provider),
                   ToolCall(call.call_id, call.name, call.arguments), ToolOutput(call.call_id, "a.txt")]
        _collect(client(), ModelRequest("s", history))
        sent = server.responses_requests[1].items_of("reasoning")
    assert sent == [{"type": "reasoning", "summary": [],
                     "content": [{"type": "reasoning_text", "text": rec.RAW_REASONING}]}]


@pytest.mark.parametrize("reason", ["content_filter", "max_output_tokens"])
def test_every_incomplete_reason_is_warned_by_name(reason):
    with mock_responses.MockResponsesServer([mock_responses.Reply(text="partial", incomplete=reason)]) as server:
        client = OpenAIResponsesClient(provider="openai", model="gpt-5", base_url=server.base_url, api_key="k")
        events = _collect(client, ModelRequest("s", [UserMessage("hi")]))
    completed = [e for e in events if isinstance(e, Completed)][0]
    assert completed.warning and reason in completed.warning


# --------------------------------------------------------------------------------------------------------- #
# Images on Chat Completions; a rejected image is replaced durably
# --------------------------------------------------------------------------------------------------------- #


def _run_with_image(project: Path, server: MockChatServer, image: Path, *later: str, db: Path,
                    overrides: tuple[str, ...] = ()):
    async def main():
        session, store = await open_session(project, server, db, *overrides)
        try:
            session.submit(UserTurn("what is in this picture?", images=[str(image)]))
            queue = list(later)

            def next_prompt(session, event):
                if isinstance(event, ev.TurnEnded) and queue:
                    session.submit(UserTurn(queue.pop(0)))

            return await asyncio.wait_for(drive(session, turns=1 + len(later), on_event=next_prompt), 60), session.id
        finally:
            await store.aclose()

    return asyncio.run(main())


def _images_in(request) -> list[str]:
    return [part["image_url"]["url"] for m in request.messages if isinstance(m.get("content"), list)
            for part in m["content"] if part.get("type") == "image_url"]


def test_chat_completions_sends_images_as_data_urls(project, tmp_path):
    image = project / "shot.png"
    image.write_bytes(PNG)
    with MockChatServer([Reply(text="a pixel")]) as server:
        (run, _) = _run_with_image(project, server, image, db=tmp_path / "s.db")
        assert run.ended.reason == "complete"
        assert _images_in(server.chat_requests[0]) == ["data:image/png;base64," + base64.b64encode(PNG).decode()]


def test_chat_completions_refuses_images_for_a_text_only_model(project, tmp_path):
    image = project / "shot.png"
    image.write_bytes(PNG)
    tables = {"openai-compatible": {"models": {"mock-model": {"supports_images": False}}}}

    async def main():
        session, store = await open_session(project, server, tmp_path / "t.db", provider_tables=tables)
        try:
            session.submit(UserTurn("look", images=[str(image)]))
            return await asyncio.wait_for(drive(session, turns=1), 60)
        finally:
            await store.aclose()

    with MockChatServer([Reply(text="never")]) as server:
        run = asyncio.run(main())
        assert run.ended.reason == "error" and "does not accept images" in run.ended.message
        assert not server.chat_requests


def test_a_rejected_image_is_replaced_by_a_note_for_good(project, tmp_path):
    image = project / "shot.png"
    image.write_bytes(PNG)
    db = tmp_path / "img.db"
    reason = "Invalid content type. image_url is only supported by certain models."
    with MockChatServer([Reply(text="I only see a note"), Reply(text="second")], reject_images=reason) as server:
        (run, session_id) = _run_with_image(project, server, image, "and now?", db=db)
        ends = run.of(ev.TurnEnded)
        assert [e.reason for e in ends] == ["complete", "complete"], [e.message for e in ends]
        assert any("rejected an image" in w.message for w in run.of(ev.WarningEvent))
        rejected = [r for r in server.chat_requests if _images_in(r)]
        accepted = [r for r in server.chat_requests if not _images_in(r)]
        assert len(rejected) == 1 and len(accepted) == 2  # replaced after the first 400, never sent again
        user = [m for m in conversation(accepted[1].messages) if m["role"] == "user"][0]
        assert "inline image" in json.dumps(user) and "rejected" in json.dumps(user)
    with MockChatServer([Reply(text="resumed")], reject_images=reason) as server:  # resume never resends it
        run = run_session(project, server, "still there?", db=db, resume=session_id)
        assert run.ended.reason == "complete" and not _images_in(server.chat_requests[0])


# --------------------------------------------------------------------------------------------------------- #
# The context window a server really gives a model
# --------------------------------------------------------------------------------------------------------- #


def _probe(server: MockChatServer, model: str, explicit: bool = False, times: int = 1) -> int | None:
    """Probe `times` times with one client; the answers must agree."""
    client = _chat(server, model)

    async def main():
        try:
            answers = {await learn_window(client, explicit=explicit, cache_dir=None).wait() for _ in range(times)}
            assert len(answers) == 1, answers
            return answers.pop()
        finally:
            await client.aclose()

    return asyncio.run(main())


@pytest.mark.parametrize("routes, expected", [
    ({"POST /api/show": rec.ollama_show(131072)}, 4096),  # no num_ctx, not loaded: the server default
    ({"POST /api/show": rec.ollama_show(131072, num_ctx=16384)}, 16384),
    ({"POST /api/show": rec.ollama_show(131072), "GET /api/ps": rec.ollama_ps("gpt-oss:20b", 32768)}, 32768),
    ({"POST /api/show": rec.ollama_show(2048, num_ctx=8192)}, 2048),  # never beyond what it was trained for
    ({"GET /v1/models": rec.lmstudio_models("gpt-oss:20b", loaded=8192)}, 8192),
    ({"GET /v1/models": rec.vllm_models("gpt-oss:20b", 32000)}, 32000),
    ({}, None),  # nothing reported: quiet fallback
    ({"GET /v1/models": lambda body: (500, {"error": "boom"}), "POST /api/show": lambda body: (500, "x")}, None),
])
def test_probe_reads_the_window_the_server_reports(routes, expected):
    with MockChatServer(routes=routes) as server:
        assert _probe(server, "gpt-oss:20b") == expected


def test_probe_is_skipped_for_explicit_config_and_cached():
    with MockChatServer(routes={"POST /api/show": rec.ollama_show(131072, num_ctx=9000)}) as server:
        assert _probe(server, "m-explicit", explicit=True) is None
        assert not server.requests
        assert _probe(server, "gpt-oss:20b") == 9000
        once = len(server.requests)
        assert _probe(server, "gpt-oss:20b", times=3) == 9000
        assert len(server.requests) == 2 * once, "a client asks its server once per model"


def test_clients_asking_one_server_at_once_share_one_question(tmp_path):
    """Sessions opened together (each with its own client) ask the server once between them; one that stops
    waiting leaves the others their answer."""
    with MockChatServer(routes={"POST /api/show": rec.ollama_show(131072, num_ctx=9000)}) as server:
        clients = [_chat(server, "gpt-oss:20b") for _ in range(5)]

        async def main():
            try:
                learned = [learn_window(c, explicit=False, cache_dir=tmp_path) for c in clients]
                await learned[0].aclose()
                return [await w.wait() for w in learned[1:]]
            finally:
                for c in clients:
                    await c.aclose()

        assert asyncio.run(main()) == [9000] * 4
        assert [r.path for r in server.requests] == ["/v1/models", "/api/show"]


def test_session_uses_the_ollama_window_and_warns_when_the_first_request_fills_it(project):
    routes = {"POST /api/show": rec.ollama_show(131072, num_ctx=1024)}
    with MockChatServer([Reply(text="summary")] * 4, routes=routes) as server:

        async def main():
            session, store = await open_session(project, server, project.parent / "sessions.db")
            try:
                while session.limits.provisional:  # the server's answer comes in the background
                    await asyncio.sleep(0.01)
                return await drive(session, "hi")
            finally:
                await store.aclose()

        run = asyncio.run(main())
    usage = run.of(ev.TokenUsage)
    assert usage and usage[0].context_window == 1024
    warnings = [w.message for w in run.of(ev.WarningEvent) if "context window" in w.message]
    assert len(warnings) == 1 and "OLLAMA_CONTEXT_LENGTH" in warnings[0]


def test_the_window_probe_never_delays_the_first_request_and_applies_once_answered(project):
    """The server answers /v1/models only after the first chat request is in: that request was sent without
    waiting, and the small window the server then reports makes the same turn compact before its next call."""
    (project / "notes.txt").write_text("some notes\n")
    asked, answered = threading.Event(), threading.Event()
    probe_pending_at_first_request = []

    def models(body):
        asked.wait(2)  # within the probe's timeout: a client that waits for this answer gets it first
        answered.set()
        return 200, rec.lmstudio_models("mock-model", loaded=1024)

    def first(body):
        probe_pending_at_first_request.append(not answered.is_set())
        asked.set()
        return Reply(tool_calls=[ChatToolCall("read_file", {"path": "notes.txt"})])

    script = [first, Reply(text="summary of the work"), Reply(text="done")]
    with MockChatServer(script, routes={"GET /v1/models": models}) as server:
        run = run_session(project, server, "read the notes")
        requests = server.chat_requests
    assert probe_pending_at_first_request == [True]
    assert run.ended.reason == "complete"
    assert [c.reason for c in run.of(ev.ContextCompacted)] == ["auto"]
    assert "hand-off summary" in requests[1].messages[-1]["content"]  # the compaction's own request
    assert run.of(ev.TokenUsage)[-1].context_window == 1024
    warnings = [w.message for w in run.of(ev.WarningEvent) if "context window" in w.message]
    assert len(warnings) == 1  # once, with the real window: the registry's default was never judged


def test_the_window_is_kept_per_server_and_model_for_the_next_session(project, isolated_home, monkeypatch):
    from auger.models import context_window

    routes = {"POST /api/show": rec.ollama_show(131072, num_ctx=20000)}
    with MockChatServer([Reply(text="one"), Reply(text="two"), Reply(text="three")], routes=routes) as server:
        first = run_session(project, server, "hi")
        probes = [r.path for r in server.requests if r.method == "GET" or r.path == "/api/show"]
        second = run_session(project, server, "hi")
        assert [r.path for r in server.requests if r.method == "GET" or r.path == "/api/show"] == probes
        assert second.of(ev.TokenUsage)[0].context_window == 20000  # known before the first request
        monkeypatch.setattr(context_window, "CACHE_TTL", 0.0)  # an hour later: asked again
        run_session(project, server, "hi")
        assert len([r for r in server.requests if r.path == "/api/show"]) == 2
    assert first.ended.reason == "complete" and probes == ["/v1/models", "/api/show"]
    assert (isolated_home / "cache" / context_window.CACHE_FILE).exists()


def test_a_hosted_api_is_never_asked_for_its_window():
    import httpx

    asked = []

    def transport(request: httpx.Request) -> httpx.Response:
        asked.append(str(request.url))
        return httpx.Response(200, json=rec.vllm_models("m", 4096))

    async def learn(base_url: str, provider: str = "openai-compatible") -> int | None:
        client = OpenAIChatClient(provider=provider, model="m", base_url=base_url, api_key="k")
        await client.aclose()
        client._http = httpx.AsyncClient(transport=httpx.MockTransport(transport))
        try:
            learned = learn_window(client, explicit=False, cache_dir=None)
            return await learned.wait()
        finally:
            await client._http.aclose()

    for hosted in ("https://openrouter.ai/api/v1", "https://api.example.com/v1", "http://8.8.8.8:8000/v1"):
        assert asyncio.run(learn(hosted)) is None
    assert asked == []
    for local in ("http://localhost:8000/v1", "http://192.168.1.20:8000/v1", "http://gpu.local:8000/v1"):
        assert asyncio.run(learn(local)) == 4096
    assert asyncio.run(learn("http://gpu-box:11434/v1", provider="ollama")) == 4096  # runs on the user's machine
    assert len(asked) == 4


def test_explicit_context_window_wins_over_the_server(project):
    routes = {"POST /api/show": rec.ollama_show(131072, num_ctx=1024)}
    with MockChatServer([Reply(text="ok")], routes=routes) as server:
        run = run_session(project, server, "hi", overrides=("model_context_window=50000",))
        assert run.of(ev.TokenUsage)[0].context_window == 50000
        assert not [r for r in server.requests if r.path == "/api/show"]
    assert not [w for w in run.of(ev.WarningEvent) if "context window" in w.message]


# --------------------------------------------------------------------------------------------------------- #
# Reasoning efforts
# --------------------------------------------------------------------------------------------------------- #


@pytest.mark.parametrize("model, effort", [("gpt-5.1", "none"), ("gpt-5.2", "xhigh"), ("gpt-5", "minimal")])
def test_efforts_the_model_accepts_are_taken(model, effort):
    config = load_config([f"model={model}", f"model_reasoning_effort={effort}"], env={},
                         config_file=Path("/nonexistent"))
    assert config.model_reasoning_effort == effort and effort_problem(config) is None


@pytest.mark.parametrize("model, effort", [("gpt-5", "xhigh"), ("some-local-model", "ultra")])
def test_unexpected_efforts_pass_with_a_warning(model, effort):
    config = load_config([f"model={model}", f"model_reasoning_effort={effort}"], env={},
                         config_file=Path("/nonexistent"))
    assert config.model_reasoning_effort == effort and not config.warnings  # loading config never asks models/
    problem = effort_problem(config)
    assert problem is not None and effort in problem


# --------------------------------------------------------------------------------------------------------- #
# Linear-time assembly
# --------------------------------------------------------------------------------------------------------- #

SMALL, LARGE = 256 * 1024, 1024 * 1024  # 4x the argument: ~4x the time when assembly is linear, ~16x if not


def _arguments(size: int) -> dict:
    return {"path": "big.txt", "content": "x" * (size - 40)}


def _assembled(client, request: ModelRequest) -> tuple[float, str]:
    """The CPU time the assembling thread spent on the stream (the mock server runs on another; other
    processes' load is not counted) and the tool call's arguments. Only the finished call is kept: holding
    every delta would make the garbage collector's passes, not the assembly, grow with the stream."""
    async def main() -> str:
        try:
            ready = [event async for event in client.stream(request) if isinstance(event, ToolCallReady)]
        finally:
            await client.aclose()
        return ready[0].arguments

    started = time.thread_time()
    arguments = asyncio.run(main())
    return time.thread_time() - started, arguments


def _assemble_chat(size: int) -> tuple[float, str]:
    with MockChatServer([Reply(tool_calls=[ChatToolCall("write_file", _arguments(size))], chunk_chars=64)]) as server:
        return _assembled(_chat(server), ModelRequest("s", [UserMessage("write")]))


def _assemble_responses(size: int) -> tuple[float, str]:
    with mock_responses.MockResponsesServer([mock_responses.Reply(
            tool_calls=[mock_responses.ToolCall("write_file", _arguments(size))], chunk_chars=64)]) as server:
        client = OpenAIResponsesClient(provider="openai", model="gpt-5", base_url=server.base_url, api_key="k")
        return _assembled(client, ModelRequest("s", [UserMessage("write")]))


def _assemble_anthropic(size: int) -> tuple[float, str]:
    with mock_anthropic.MockAnthropicServer([mock_anthropic.Reply(
            tool_calls=[mock_anthropic.ToolCall("write_file", _arguments(size))], chunk_chars=64)]) as server:
        client = AnthropicClient(provider="anthropic", model="claude-sonnet-4-5", base_url=server.base_url,
                                 api_key="k")
        return _assembled(client, ModelRequest("s", [UserMessage("write")]))


@pytest.mark.parametrize("assemble", [_assemble_chat, _assemble_responses, _assemble_anthropic],
                         ids=["chat", "responses", "anthropic"])
def test_a_large_streamed_argument_is_assembled_in_linear_time(assemble):
    """A tool call's arguments arrive in thousands of small deltas: assembling them costs time in proportion
    to their size. Judged by growth, not by a clock (CPU time of the assembling thread, the best of two runs
    at each size): 4x the bytes must cost well under the 16x a quadratic assembly would."""
    small = min(assemble(SMALL)[0] for _ in range(2))
    large_times = []
    for _ in range(2):
        elapsed, arguments = assemble(LARGE)
        large_times.append(elapsed)
    assert json.loads(arguments) == _arguments(LARGE)
    assert min(large_times) / small < 8, f"{SMALL // 1024} KB: {small:.2f} s, {LARGE // 1024} KB: {min(large_times):.2f} s"


def test_a_model_table_describes_the_efforts_its_model_accepts(tmp_path):
    config_file = tmp_path / "config.toml"
    config_file.write_text('model = "house-model"\nprovider = "openai"\nmodel_reasoning_effort = "max"\n'
                           '[providers.openai.models.house-model]\nreasoning_efforts = ["low", "max"]\n')
    config = load_config([], env={}, config_file=config_file)
    assert config.model_reasoning_effort == "max" and effort_problem(config) is None
    config = load_config(["model_reasoning_effort=high"], env={}, config_file=config_file)
    assert config.model_reasoning_effort == "high" and "low, max" in (effort_problem(config) or "")


def test_image_rejections_are_recognised_on_every_wire():
    """Each provider's own 400 body for a bad image becomes ImageRejected (so the engine can replace it)."""
    request = ModelRequest("s", [UserMessage("look")])
    openai_body = {"error": {"message": "You uploaded an unsupported image. Please make sure your image is valid.",
                             "type": "invalid_request_error", "param": None, "code": "invalid_image_format"}}
    anthropic_body = {"type": "error", "error": {"type": "invalid_request_error", "message":
                      "messages.0.content.0.image.source.base64: image exceeds 5 MB maximum"}}
    with MockChatServer([ChatFault.status(400, body=openai_body)]) as server:
        with pytest.raises(ImageRejected):
            _collect(_chat(server), request)
    with mock_responses.MockResponsesServer([mock_responses.Fault.status(400, body=openai_body)]) as server:
        with pytest.raises(ImageRejected):
            _collect(OpenAIResponsesClient(provider="openai", model="gpt-5", base_url=server.base_url, api_key="k"),
                     request)
    with mock_anthropic.MockAnthropicServer([mock_anthropic.Fault.status(400, body=anthropic_body)]) as server:
        with pytest.raises(ImageRejected):
            _collect(AnthropicClient(provider="anthropic", model="claude-sonnet-4-5", base_url=server.base_url,
                                     api_key="k"), request)



def test_reasoning_of_a_reply_without_tool_calls_is_not_sent_back(project):
    stream = [c for c in rec.deepseek_tool_call() if "tool_calls" not in str(c)]
    stream[-2] = {**stream[-2], "choices": [{"index": 0, "delta": {"content": "no tools needed"},
                                             "finish_reason": "stop"}]}
    with MockChatServer([Raw(stream), Reply(text="ok")], reasoning_back=("reasoning_content",)) as server:
        run = run_session(project, server, "hi", "again")
        assert [e.text for e in run.of(ev.AgentMessage)] == ["no tools needed", "ok"]
        assistant = [m for m in server.chat_requests[1].messages if m["role"] == "assistant"]
        assert assistant == [{"role": "assistant", "content": "no tools needed"}]


@pytest.mark.parametrize("wire", ["chat", "responses", "anthropic"])
def test_every_request_carries_the_tools_it_was_given_encoded_once_while_they_stay_the_same(wire):
    """Each wire's tools are encoded once and kept while equal (models/http.py `_encode`): what each server
    parses is still exactly the request's tools, in every request, and a changed list is sent as changed."""
    first = [ToolSchema("read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}},
                                                     "required": ["path"]}),
             ToolSchema("shell", "Run a command — ünïcode too.", {"type": "object", "properties": {
                 "command": {"type": "string"}}, "required": ["command"]})]
    changed = [first[0], ToolSchema("grep", "Search.", {"type": "object", "properties": {}})]
    if wire == "chat":
        server, make, posts = MockChatServer([Reply(text="ok")] * 3), OpenAIChatClient, "chat_requests"
        names = lambda body: [t["function"]["name"] for t in body["tools"]]  # noqa: E731
    elif wire == "responses":
        server, make, posts = (mock_responses.MockResponsesServer([mock_responses.Reply(text="ok")] * 3),
                               OpenAIResponsesClient, "responses_requests")
        names = lambda body: [t["name"] for t in body["tools"]]  # noqa: E731
    else:
        server, make, posts = (mock_anthropic.MockAnthropicServer([mock_anthropic.Reply(text="ok")] * 3),
                               AnthropicClient, "message_requests")
        names = lambda body: [t["name"] for t in body["tools"]]  # noqa: E731

    async def main(url: str) -> None:
        client = make(provider="test", model="m", base_url=url, api_key="sk-test")
        try:
            for tools in (first, list(first), changed):
                async for _ in client.stream(ModelRequest("be brief", [UserMessage("hi")], tools)):
                    pass
        finally:
            await client.aclose()

    with server:
        asyncio.run(main(server.base_url))
        sent = [r.body for r in getattr(server, posts)]
    assert [names(body) for body in sent] == [["read_file", "shell"], ["read_file", "shell"], ["read_file", "grep"]]
    assert sent[0]["tools"] == sent[1]["tools"] and "ünïcode" in json.dumps(sent[0]["tools"], ensure_ascii=False)
    assert all(body["model"] == "m" and body.get("stream") is True for body in sent)
