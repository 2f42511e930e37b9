"""A wire client reads each reply to the end of its body, so one connection carries every request of a
session (a new one would cost a TCP and a TLS handshake each time); a server slow to end a body, or sending
past the reply's end, is not waited for."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

import pytest

from auger.models.anthropic import AnthropicClient
from auger.models.base import ModelRequest, TextDelta
from auger.models import http
from auger.models.http import REST_WAIT
from auger.models.openai_chat import OpenAIChatClient
from auger.models.openai_responses import OpenAIResponsesClient
from auger.protocol.items import UserMessage
from tests.support import mock_anthropic, mock_openai, mock_responses


def _replies(client: Any, count: int) -> tuple[list[str], list[float]]:
    """The text of `count` replies streamed one after another by one client, and how long each took."""

    async def main() -> tuple[list[str], list[float]]:
        texts, took = [], []
        try:
            for n in range(count):
                started = time.monotonic()
                events = [e async for e in client.stream(ModelRequest("s", [UserMessage(f"hi {n}")]))]
                took.append(time.monotonic() - started)
                texts.append("".join(e.text for e in events if isinstance(e, TextDelta)))
        finally:
            await client.aclose()
        return texts, took

    return asyncio.run(main())


WIRES: dict[str, tuple[Callable[..., Any], Callable[..., Any], Callable[[str], Any]]] = {
    "chat": (mock_openai.MockChatServer, mock_openai.Reply,
             lambda url: OpenAIChatClient(provider="openai-compatible", model="m", base_url=url, api_key="k")),
    "responses": (mock_responses.MockResponsesServer, mock_responses.Reply,
                  lambda url: OpenAIResponsesClient(provider="openai", model="gpt-5", base_url=url, api_key="k")),
    "anthropic": (mock_anthropic.MockAnthropicServer, mock_anthropic.Reply,
                  lambda url: AnthropicClient(provider="anthropic", model="claude-sonnet-4-5", base_url=url,
                                              api_key="k")),
}


@pytest.mark.parametrize("wire", sorted(WIRES))
def test_one_connection_carries_every_request(wire):
    server_type, reply, client = WIRES[wire]
    with server_type([reply(text=f"answer {n}") for n in range(3)]) as server:
        texts, _ = _replies(client(server.base_url), 3)
        assert texts == ["answer 0", "answer 1", "answer 2"]
        assert len(server.requests) == 3
        assert server.connections_opened == 1


def test_a_body_left_open_after_the_reply_is_not_waited_for():
    """The server keeps each body open 30 s after `[DONE]`: every reply still comes at once (its connection
    is dropped after REST_WAIT the first time, and not waited on again), whole."""
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": {"role": "assistant", "content": "whole"}, "finish_reason": None}]}
    end = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    held = [mock_openai.Raw([chunk, end], hold=30.0) for _ in range(3)]
    with mock_openai.MockChatServer(held) as server:
        texts, took = _replies(OpenAIChatClient(provider="openai-compatible", model="m", base_url=server.base_url,
                                                api_key="k"), 3)
    assert texts == ["whole"] * 3
    assert took[0] >= REST_WAIT and max(took) < 10, took
    assert server.connections_opened == 3


def test_events_past_the_end_of_a_reply_are_ignored():
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": {"role": "assistant", "content": "kept"}, "finish_reason": None}]}
    end = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    late = {**chunk, "choices": [{"index": 0, "delta": {"content": " and not this"}, "finish_reason": None}]}
    steps = [mock_openai.Raw([chunk, end, "data: [DONE]", *[late] * 20], done=False), mock_openai.Reply(text="next")]
    with mock_openai.MockChatServer(steps) as server:
        texts, took = _replies(OpenAIChatClient(provider="openai-compatible", model="m", base_url=server.base_url,
                                                api_key="k"), 2)
    assert texts == ["kept", "next"]
    assert max(took) < 10


def test_an_idle_client_lets_its_connection_go_and_opens_one_for_its_next_request(monkeypatch):
    """A session idle for IDLE_RELEASE holds no socket (a server may hold many idle sessions); a request in
    flight keeps the connection."""
    monkeypatch.setattr(http, "IDLE_RELEASE", 0.3)

    async def main(server: mock_openai.MockChatServer) -> list[int]:
        client = OpenAIChatClient(provider="openai-compatible", model="m", base_url=server.base_url, api_key="k")
        seen = []
        try:
            async for _ in client.stream(ModelRequest("s", [UserMessage("one")])):
                await asyncio.sleep(0.5)  # longer than IDLE_RELEASE, mid-reply: the connection stays
            seen.append(server.connections_open)
            for _ in range(100):
                if server.connections_open == 0:
                    break
                await asyncio.sleep(0.05)
            seen.append(server.connections_open)
            seen.append(len([e async for e in client.stream(ModelRequest("s", [UserMessage("two")]))]) > 0)
        finally:
            await client.aclose()
        return seen

    with mock_openai.MockChatServer([mock_openai.Reply(text="a"), mock_openai.Reply(text="b")]) as server:
        open_after_reply, open_when_idle, answered = asyncio.run(main(server))
        assert (open_after_reply, open_when_idle, answered) == (1, 0, True)
        assert server.connections_opened == 2
