"""Tests for the mock OpenAI server: it must speak the real wire format, or every
engine test built on it proves nothing. httpx is used directly as the client so
these tests depend on nothing in the engine."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.support.mock_openai import (
    CHAT_PATH,
    Fault,
    MockChatServer,
    Reply,
    ToolCall,
    load_script,
    step_from_dict,
)

AUTH = {"Authorization": "Bearer sk-test-123"}
MESSAGES = [{"role": "user", "content": "hello"}]


def chat_body(stream: bool = True, include_usage: bool = False, **extra) -> dict:
    body = {"model": "gpt-test", "messages": MESSAGES, "stream": stream, **extra}
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    return body


def stream_events(client: httpx.Client, server: MockChatServer, body: dict) -> tuple[list, bytes]:
    """POST a streaming request; return (parsed chunk dicts + "[DONE]", raw body bytes)."""
    with client.stream("POST", server.base_url + "/chat/completions", json=body, headers=AUTH) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        assert r.headers["transfer-encoding"] == "chunked"
        raw = r.read()
    events = []
    assert raw.endswith(b"\n\n")
    for block in raw.split(b"\n\n")[:-1]:
        assert block.startswith(b"data: "), block
        data = block[len(b"data: ") :].decode()
        events.append(data if data == "[DONE]" else json.loads(data))
    return events, raw


def reassemble(chunks: list[dict]) -> dict:
    """What a client builds from the deltas: text, reasoning, tool calls by index."""
    text, reasoning, calls, finish = "", "", {}, []
    for chunk in chunks:
        for choice in chunk["choices"]:
            delta = choice["delta"]
            text += delta.get("content") or ""
            reasoning += delta.get("reasoning_content") or ""
            for tc in delta.get("tool_calls", []):
                slot = calls.setdefault(tc["index"], {"id": None, "name": "", "arguments": ""})
                if "id" in tc:
                    slot["id"] = tc["id"]
                    slot["name"] = tc["function"]["name"]
                slot["arguments"] += tc["function"]["arguments"]
            if choice["finish_reason"] is not None:
                finish.append(choice["finish_reason"])
    return {"text": text, "reasoning": reasoning, "calls": calls, "finish": finish}


@pytest.fixture(scope="module")
def client():
    # One client for the module: building an httpx.Client (its SSL context) costs ~20 ms.
    with httpx.Client(timeout=5.0) as c:
        yield c


# --------------------------------------------------------------------------- #
# Streaming wire format
# --------------------------------------------------------------------------- #


def test_stream_text_deltas_reassemble(client):
    text = "Hello, wörld! This reply arrives in small pieces ✓."
    with MockChatServer([Reply(text=text, chunk_chars=5)]) as server:
        events, raw = stream_events(client, server, chat_body())

    assert events[-1] == "[DONE]" and raw.endswith(b"data: [DONE]\n\n")
    chunks = events[:-1]
    first = chunks[0]
    assert set(first) == {"id", "object", "created", "model", "choices"}
    assert first["id"].startswith("chatcmpl-")
    assert first["object"] == "chat.completion.chunk"
    assert isinstance(first["created"], int)
    assert first["model"] == "gpt-test"
    assert first["choices"] == [
        {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
    ]
    assert {c["id"] for c in chunks} == {first["id"]}
    content = [c["choices"][0]["delta"]["content"] for c in chunks[1:-1]]
    assert all(0 < len(piece) <= 5 for piece in content) and len(content) > 5
    assert chunks[-1]["choices"] == [{"index": 0, "delta": {}, "finish_reason": "stop"}]
    assert reassemble(chunks)["text"] == text
    assert not any("usage" in c for c in chunks)  # no include_usage, no usage at all


def test_stream_tool_call_fragments_reassemble_exactly(client):
    args = {"command": "ls -la", "cwd": "/tmp", "nested": {"a": [1, 2, 3]}}
    broken = '{"path": "a.txt", "content": "unterminated'
    reply = Reply(
        text="Let me look.",
        tool_calls=[ToolCall("shell", args), ToolCall("write", broken), ToolCall("noop", {}, id="mine")],
    )
    with MockChatServer([reply]) as server:
        events, _ = stream_events(client, server, chat_body())

    got = reassemble(events[:-1])
    assert got["text"] == "Let me look."
    assert got["finish"] == ["tool_calls"]
    assert got["calls"] == {
        0: {"id": "call_1", "name": "shell", "arguments": json.dumps(args)},
        1: {"id": "call_2", "name": "write", "arguments": broken},
        2: {"id": "mine", "name": "noop", "arguments": "{}"},
    }
    # Each call opens with id/type/name and empty arguments, then several fragments.
    openers = [e for e in events[:-1] if "id" in (e["choices"][0]["delta"].get("tool_calls") or [{}])[0]]
    assert [o["choices"][0]["delta"]["tool_calls"][0]["type"] for o in openers] == ["function"] * 3
    assert all(o["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] == "" for o in openers)
    fragments = [
        e for e in events[:-1]
        if (e["choices"][0]["delta"].get("tool_calls") or [{}])[0].get("index") == 2
        and "id" not in e["choices"][0]["delta"]["tool_calls"][0]
    ]
    assert len(fragments) == 2  # even "{}" arrives in more than one piece


def test_reasoning_streams_as_reasoning_content(client):
    with MockChatServer([Reply(text="42", reasoning="Think hard about it.")]) as server:
        events, _ = stream_events(client, server, chat_body())
    chunks = events[:-1]
    got = reassemble(chunks)
    assert (got["reasoning"], got["text"]) == ("Think hard about it.", "42")
    kinds = [next(iter(c["choices"][0]["delta"]), None) for c in chunks[1:-1]]
    assert kinds == ["reasoning_content"] * 3 + ["content"]  # reasoning first


def test_usage_chunk_only_with_include_usage(client):
    text = "x" * 40
    with MockChatServer(
        [
            Reply(text=text),
            Reply(text=text),
            Reply(text="hi", usage={"prompt_tokens": 1000, "cached_tokens": 800, "reasoning_tokens": 7}),
        ]
    ) as server:
        plain, _ = stream_events(client, server, chat_body())
        body = chat_body(include_usage=True)
        with_usage, _ = stream_events(client, server, body)
        overridden, _ = stream_events(client, server, body)
        raw_len = len(server.requests[1].raw)

    assert not any("usage" in c for c in plain[:-1])
    *normal, usage_chunk, done = with_usage
    assert done == "[DONE]"
    assert all(c["usage"] is None for c in normal)  # as the real API: null until the end
    assert normal[-1]["choices"][0]["finish_reason"] == "stop"
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"] == {
        "prompt_tokens": raw_len // 4,
        "completion_tokens": 40 // 4 + 1,
        "total_tokens": raw_len // 4 + 11,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }
    usage = overridden[-2]["usage"]
    assert usage["prompt_tokens"] == 1000
    assert usage["completion_tokens"] == 2 // 4 + 1
    assert usage["total_tokens"] == 1001
    assert usage["prompt_tokens_details"] == {"cached_tokens": 800}
    assert usage["completion_tokens_details"] == {"reasoning_tokens": 7}


def test_default_completion_tokens_count_tool_arguments(client):
    reply = Reply(tool_calls=[ToolCall("shell", "a" * 30), ToolCall("shell", "b" * 10)], text="ab")
    with MockChatServer([reply]) as server:
        events, _ = stream_events(client, server, chat_body(include_usage=True))
    assert events[-2]["usage"]["completion_tokens"] == (2 + 30 + 10) // 4 + 1


# --------------------------------------------------------------------------- #
# Non-streaming
# --------------------------------------------------------------------------- #


def test_non_streaming_shapes(client):
    with MockChatServer(
        [Reply(text="plain answer"), Reply(tool_calls=[ToolCall("read", {"path": "x"})], reasoning="hmm")]
    ) as server:
        url = server.base_url + "/chat/completions"
        r1 = client.post(url, json=chat_body(stream=False), headers=AUTH)
        r2 = client.post(url, json={"model": "m2", "messages": MESSAGES}, headers=AUTH)

    assert r1.status_code == 200 and r1.headers["content-type"] == "application/json"
    assert int(r1.headers["content-length"]) == len(r1.content)
    d1 = r1.json()
    assert d1["object"] == "chat.completion" and d1["model"] == "gpt-test"
    assert d1["id"].startswith("chatcmpl-")
    assert d1["choices"] == [
        {"index": 0, "message": {"role": "assistant", "content": "plain answer"}, "finish_reason": "stop"}
    ]
    assert set(d1["usage"]) == {
        "prompt_tokens", "completion_tokens", "total_tokens",
        "prompt_tokens_details", "completion_tokens_details",
    }
    d2 = r2.json()
    assert d2["model"] == "m2"
    assert d2["choices"][0]["finish_reason"] == "tool_calls"
    assert d2["choices"][0]["message"] == {
        "role": "assistant",
        "content": None,
        "reasoning_content": "hmm",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": '{"path": "x"}'}}
        ],
    }


# --------------------------------------------------------------------------- #
# Faults
# --------------------------------------------------------------------------- #


def test_status_faults(client):
    with MockChatServer(
        [
            Fault.status(429, retry_after="1"),
            Fault.status(500),
            Fault.status(401),
            Fault.status(404),
            Fault.context_length(),
            Fault.status(503, body="<html>bad gateway</html>", headers={"X-Proxy": "yes"}),
            Fault.status(429, message="slow down", retry_after=2),
        ]
    ) as server:
        url = server.base_url + "/chat/completions"
        responses = [client.post(url, json=chat_body(), headers=AUTH) for _ in range(7)]

    r429, r500, r401, r404, r400, r503, r429b = responses
    assert r429.status_code == 429 and r429.headers["retry-after"] == "1"
    assert r429.json()["error"]["code"] == "rate_limit_exceeded"
    assert set(r429.json()["error"]) == {"message", "type", "param", "code"}
    assert r500.status_code == 500 and r500.json()["error"]["type"] == "server_error"
    assert "retry-after" not in r500.headers
    assert r401.json()["error"]["code"] == "invalid_api_key"
    assert r404.json()["error"]["code"] == "model_not_found"
    assert "gpt-test" in r404.json()["error"]["message"]
    assert r400.status_code == 400 and r400.json()["error"]["code"] == "context_length_exceeded"
    assert r503.status_code == 503 and r503.text == "<html>bad gateway</html>"
    assert r503.headers["x-proxy"] == "yes"
    assert r429b.json()["error"] == {
        "message": "slow down", "type": "requests", "param": None, "code": "rate_limit_exceeded"
    }
    assert r429b.headers["retry-after"] == "2"


def test_drop_breaks_stream_without_done(client):
    with MockChatServer([Fault.drop(after_chunks=2), Reply(text="after")]) as server:
        url = server.base_url + "/chat/completions"
        lines = []
        with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
            with client.stream("POST", url, json=chat_body(), headers=AUTH) as r:
                assert r.status_code == 200
                for line in r.iter_lines():
                    lines.append(line)
        data = [line for line in lines if line.startswith("data: ")]
        assert len(data) == 2 and "data: [DONE]" not in data
        # The same client recovers on a fresh connection.
        events, _ = stream_events(client, server, chat_body())
        assert reassemble(events[:-1])["text"] == "after"


def test_drop_non_streaming_truncates_body(client):
    with MockChatServer([Fault.drop()]) as server:
        with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
            client.post(server.base_url + "/chat/completions", json=chat_body(stream=False))


def test_hang_times_out_and_stop_is_prompt():
    server = MockChatServer([Fault.hang(after_chunks=1, seconds=30)]).start()
    try:
        with httpx.Client(timeout=httpx.Timeout(5.0, read=0.2)) as c:
            got = []
            with pytest.raises(httpx.ReadTimeout):
                with c.stream("POST", server.base_url + "/chat/completions", json=chat_body()) as r:
                    for line in r.iter_lines():
                        got.append(line)
            assert got[0].startswith("data: ") and len([g for g in got if g]) == 1
    finally:
        started = time.monotonic()
        server.stop()
        assert time.monotonic() - started < 1.5


def test_stop_while_client_still_waiting_on_hang():
    server = MockChatServer([Fault.hang(after_chunks=0, seconds=30)]).start()
    outcome = []

    def call():
        try:
            with httpx.Client(timeout=10.0) as c:
                with c.stream("POST", server.base_url + "/chat/completions", json=chat_body()) as r:
                    r.read()
            outcome.append("completed")
        except httpx.HTTPError as exc:
            outcome.append(type(exc).__name__)

    t = threading.Thread(target=call)
    t.start()
    assert server.wait_for_requests(1, timeout=2)
    time.sleep(0.05)
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 1.5
    t.join(2)
    assert outcome and outcome[0] != "completed"  # the client sees a broken stream


def test_script_exhausted_is_500_and_recorded(client):
    with MockChatServer() as server:
        r = client.post(server.base_url + "/chat/completions", json=chat_body(), headers=AUTH)
        assert len(server.requests) == 1
    assert r.status_code == 500
    assert r.json()["error"]["message"] == "mock script exhausted"


# --------------------------------------------------------------------------- #
# Recording, script management, other paths
# --------------------------------------------------------------------------- #


def test_requests_recorded_with_headers_and_body(client):
    with MockChatServer([Reply(text="a")]) as server:
        body = chat_body(stream=False, tools=[{"type": "function", "function": {"name": "shell"}}])
        client.post(server.base_url + "/chat/completions?x=1", json=body, headers=AUTH)
        (rec,) = server.requests
    assert rec.method == "POST" and rec.path == CHAT_PATH
    assert rec.headers["authorization"] == "Bearer sk-test-123"
    assert rec.headers["content-type"] == "application/json"
    assert rec.body == body and rec.messages == MESSAGES
    assert json.loads(rec.raw) == body


def test_keep_alive_reuses_one_connection(client):
    with MockChatServer([Reply(text="one"), Reply(text="two"), Reply(text="three")]) as server:
        stream_events(client, server, chat_body())
        client.post(server.base_url + "/chat/completions", json=chat_body(stream=False))
        stream_events(client, server, chat_body())
        ports = {r.client_port for r in server.requests}
    assert len(server.requests) == 3 and len(ports) == 1


def test_add_remaining_and_callable_steps(client):
    def echo(body):
        return Reply(text=f"you said {body['messages'][-1]['content']}")

    with MockChatServer([Reply(text="first")]) as server:
        server.add(echo, {"text": "third"})
        assert len(server.remaining) == 3
        url = server.base_url + "/chat/completions"
        texts = [
            client.post(url, json=chat_body(stream=False)).json()["choices"][0]["message"]["content"]
            for _ in range(3)
        ]
        assert server.remaining == []
    assert texts == ["first", "you said hello", "third"]


def test_callable_step_error_is_500_and_reraised(client):
    def bad(body):
        raise AssertionError("client sent the wrong thing")

    with pytest.raises(AssertionError, match="wrong thing"):
        with MockChatServer([bad]) as server:
            r = client.post(server.base_url + "/chat/completions", json=chat_body(stream=False))
            assert r.status_code == 500


def test_loop_replays_script(client):
    with MockChatServer([Reply(text="a"), Reply(text="b")], loop=True) as server:
        url = server.base_url + "/chat/completions"
        texts = [
            client.post(url, json=chat_body(stream=False)).json()["choices"][0]["message"]["content"]
            for _ in range(5)
        ]
    assert texts == ["a", "b", "a", "b", "a"]


def test_models_and_unknown_paths(client):
    with MockChatServer() as server:
        models = client.get(server.base_url + "/models")
        missing = client.post(server.base_url + "/completions", json={})
        assert [r.path for r in server.requests] == ["/v1/models", "/v1/completions"]
        assert server.chat_requests == []
    assert models.status_code == 200
    assert models.json()["object"] == "list" and models.json()["data"][0]["object"] == "model"
    assert missing.status_code == 404 and "error" in missing.json()


def test_invalid_json_body_is_400_and_keeps_script(client):
    with MockChatServer([Reply(text="kept")]) as server:
        r = client.post(server.base_url + "/chat/completions", content=b"{not json")
        assert r.status_code == 400
        assert len(server.remaining) == 1 and server.requests[0].raw == b"{not json"


def test_chunked_request_body(client):
    body = json.dumps(chat_body(stream=False)).encode()

    def pieces():
        yield body[:10]
        yield body[10:]

    with MockChatServer([Reply(text="ok")]) as server:
        r = client.post(server.base_url + "/chat/completions", content=pieces())
        assert server.requests[0].body == chat_body(stream=False)
    assert r.json()["choices"][0]["message"]["content"] == "ok"


def test_concurrent_clients_each_get_one_step():
    n = 16
    with MockChatServer([Reply(text=str(i)) for i in range(n)]) as server:
        results = []

        def call():
            with httpx.Client(timeout=5.0) as c:
                with c.stream("POST", server.base_url + "/chat/completions", json=chat_body()) as r:
                    chunks = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]
            results.append(reassemble(chunks)["text"])

        threads = [threading.Thread(target=call) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(5)
        assert len(server.requests) == n and server.remaining == []
    assert sorted(results, key=int) == [str(i) for i in range(n)]


def test_delay_is_applied(client):
    with MockChatServer([Reply(text="slow", delay=0.15)]) as server:
        started = time.monotonic()
        client.post(server.base_url + "/chat/completions", json=chat_body(stream=False))
    assert time.monotonic() - started >= 0.15


# --------------------------------------------------------------------------- #
# Dict steps and the CLI
# --------------------------------------------------------------------------- #


def test_step_from_dict():
    reply = step_from_dict(
        {"text": "t", "tool_calls": [{"name": "shell", "arguments": {"cmd": "ls"}}], "chunk_chars": 3}
    )
    assert reply == Reply(text="t", tool_calls=[ToolCall("shell", {"cmd": "ls"})], chunk_chars=3)
    assert step_from_dict("hi") == Reply(text="hi")
    status = step_from_dict({"fault": "status", "code": 429, "retry_after": "1"})
    assert (status.kind, status.code, status.retry_after) == ("status", 429, "1")
    assert step_from_dict({"fault": "drop", "after_chunks": 3}) == Fault.drop(3)
    assert step_from_dict({"fault": "hang", "seconds": 2}) == Fault.hang(1, 2)
    assert step_from_dict({"fault": "context_length"}).code == 400
    with pytest.raises(ValueError, match="unknown key"):
        step_from_dict({"txt": "typo"})
    with pytest.raises(ValueError, match="unknown fault"):
        step_from_dict({"fault": "explode"})


def test_cli_serves_script(tmp_path: Path):
    script = tmp_path / "steps.json"
    script.write_text(
        json.dumps(
            [
                {"text": "from cli", "tool_calls": [{"name": "shell", "arguments": {"c": 1}}]},
                {"fault": "status", "code": 429, "retry_after": "1"},
            ]
        )
    )
    assert len(load_script(str(script))) == 2
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.mock_openai", "--script", str(script), "--port", "0"],
        cwd=root,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("READY http://127.0.0.1:") and line.endswith("/v1")
        base_url = line.split(" ", 1)[1]
        with httpx.Client(timeout=5.0) as c:
            with c.stream("POST", base_url + "/chat/completions", json=chat_body()) as r:
                chunks = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]
            got = reassemble(chunks)
            assert got["text"] == "from cli" and got["calls"][0]["arguments"] == '{"c": 1}'
            r2 = c.post(base_url + "/chat/completions", json=chat_body())
            assert r2.status_code == 429 and r2.headers["retry-after"] == "1"
    finally:
        proc.terminate()
        returncode = proc.wait(timeout=5)
        proc.stdout.close()
    assert returncode == 0  # SIGTERM is a clean shutdown


def _call_message(*ids: str) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": "shell", "arguments": "{}"}} for i in ids]}


def _tool_message(call_id: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": "ok"}


@pytest.mark.parametrize("messages, problem", [
    ([*MESSAGES, _call_message("call_a", "call_b"), _tool_message("call_a"), {"role": "user", "content": "go on"}],
     "The following tool_call_ids did not have response messages: call_b"),
    ([*MESSAGES, _call_message("call_a")], "The following tool_call_ids did not have response messages: call_a"),
    ([*MESSAGES, _tool_message("call_x")], "messages with role 'tool' must be a response to a preceeding message"),
    ([*MESSAGES, _call_message("call_a"), _tool_message("call_a"), {"role": "assistant", "content": "done"},
      _tool_message("call_a")], "messages with role 'tool' must be a response to a preceeding message"),
])
def test_unpaired_tool_calls_and_outputs_are_refused_like_the_real_api(client, messages, problem):
    with MockChatServer([Reply(text="kept")]) as server:
        r = client.post(server.base_url + "/chat/completions", json=chat_body(messages=messages), headers=AUTH)
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert problem in error["message"] and error["type"] == "invalid_request_error"
        assert error["param"].startswith("messages.[") and len(server.remaining) == 1
        paired = [*MESSAGES, _call_message("call_a", "call_b"), _tool_message("call_b"), _tool_message("call_a")]
        assert client.post(server.base_url + "/chat/completions", json=chat_body(stream=False, messages=paired),
                           headers=AUTH).status_code == 200
