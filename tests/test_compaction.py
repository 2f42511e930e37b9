"""Compaction through real sessions and the real wire clients: a summary request never allows tool calls,
an empty summary is retried and then built from the record, and the context estimate counts what is sent."""

from __future__ import annotations

import asyncio

import httpx

from auger.engine.turn.compact import RECORD_SUMMARY_NOTE, SUMMARY_PROMPT
from auger.models.anthropic import AnthropicClient
from auger.models.base import ModelRequest, ToolSchema
from auger.models.openai_chat import OpenAIChatClient
from auger.models.openai_responses import OpenAIResponsesClient
from auger.protocol import events as ev
from auger.protocol.items import UserMessage
from auger.protocol.ops import Compact
from tests.support import mock_anthropic, mock_responses
from tests.support.mock_openai import Reply, ToolCall

SUMMARY_MARK = SUMMARY_PROMPT.splitlines()[0]
TOOL = ToolSchema("read_file", "read a file", {"type": "object", "properties": {"path": {"type": "string"}}})


def is_summary_request(body) -> bool:
    last = body["messages"][-1]
    return last["role"] == "user" and isinstance(last["content"], str) and SUMMARY_MARK in last["content"]


def compact_after_first_turn(session, event) -> None:
    if isinstance(event, ev.TurnEnded) and not getattr(session, "_asked_compact", False):
        session._asked_compact = True
        session.submit(Compact())


# -- the summary request forbids tool calls on every wire ---------------------------------------

def test_summary_request_forbids_tool_calls_and_keeps_the_same_tools(project, server):
    from tests.support.harness import run_session

    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "echo hi"})]), Reply(text="did it"),
               Reply(text="SUMMARY: echoed hi."))
    run = run_session(project, server, "say hi", on_event=compact_after_first_turn, turns=2)
    (compacted,) = run.of(ev.ContextCompacted)
    assert compacted.summary == "SUMMARY: echoed hi."
    normal, summary = server.chat_requests[1].body, server.chat_requests[2].body
    assert is_summary_request(summary) and not is_summary_request(normal)
    assert normal["tool_choice"] == "auto" and summary["tool_choice"] == "none"
    assert summary["tools"] == normal["tools"] and summary["tools"]


def _stream(client, request: ModelRequest) -> list:
    async def main():
        try:
            return [event async for event in client.stream(request)]
        finally:
            await client.aclose()

    return asyncio.run(main())


def test_each_wire_client_sends_tool_choice_none_the_way_its_api_accepts():
    request = ModelRequest("be brief", [UserMessage("summarise")], [TOOL], tool_choice="none")
    with mock_responses.MockResponsesServer([mock_responses.Reply(text="ok")]) as server:
        _stream(OpenAIResponsesClient(provider="openai", model="m", base_url=server.base_url, api_key="k"), request)
        (sent,) = server.requests
        assert sent.body["tool_choice"] == "none" and sent.body["tools"][0]["name"] == "read_file"
    with mock_anthropic.MockAnthropicServer([mock_anthropic.Reply(text="ok")]) as server:
        _stream(AnthropicClient(provider="anthropic", model="claude-test", base_url=server.base_url, api_key="k"),
                request)
        assert server.rejections == []
        (sent,) = server.requests
        assert sent.body["tool_choice"] == {"type": "none"} and sent.body["tools"][0]["name"] == "read_file"
    auto = AnthropicClient(provider="anthropic", model="c", base_url="http://127.0.0.1:9", api_key="k")
    assert "tool_choice" not in auto.build_body(ModelRequest("x", [UserMessage("hi")], [TOOL]))  # the API default
    chat = OpenAIChatClient(provider="openai", model="m", base_url="http://127.0.0.1:9/v1", api_key="k")
    assert chat.build_body(request)["tool_choice"] == "none"


def test_mocks_reject_tool_choice_values_the_real_apis_reject(server):
    def post(url: str, body: dict, headers: dict | None = None) -> httpx.Response:
        return httpx.post(url, json=body, headers=headers or {}, timeout=5)

    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    chat = server.base_url + "/chat/completions"
    bad = post(chat, {"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": tools,
                      "tool_choice": "never"})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "tool_choice"
    no_tools = post(chat, {"model": "m", "messages": [{"role": "user", "content": "x"}], "tool_choice": "none"})
    assert no_tools.status_code == 400 and "only allowed when 'tools'" in no_tools.json()["error"]["message"]
    assert not server.remaining and len(server.requests) == 2  # rejected before any script step was used

    base = {"model": "m", "input": [], "store": False}
    assert mock_responses.validate_request({**base, "tool_choice": "never"})[0] == 400
    assert mock_responses.validate_request({**base, "tool_choice": {"type": "none"}})[0] == 400
    assert mock_responses.validate_request({**base, "tool_choice": {"type": "function", "name": "f"}}) is None
    assert mock_responses.validate_request({**base, "tool_choice": "none"}) is None

    body = {"model": "c", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}],
            "tools": [{"name": "f", "input_schema": {"type": "object"}}]}
    headers = {"anthropic-version": "2023-06-01"}
    assert "valid dictionary" in mock_anthropic.validate_request({**body, "tool_choice": "none"}, headers)
    assert mock_anthropic.validate_request({**body, "tool_choice": {"type": "never"}}, headers)
    assert mock_anthropic.validate_request({**body, "tool_choice": {"type": "tool"}}, headers)
    assert mock_anthropic.validate_request({**body, "tool_choice": {"type": "none"}}, headers) is None


# -- an empty or call-only summary ---------------------------------------------------------------

def test_a_call_only_summary_is_asked_again(project, server):
    from tests.support.harness import run_session

    server.add(Reply(text="hello"), Reply(tool_calls=[ToolCall("read_file", {"path": "x"})]),
               Reply(text="SUMMARY on the second try"))
    run = run_session(project, server, "hi", on_event=compact_after_first_turn, turns=2)
    (compacted,) = run.of(ev.ContextCompacted)
    assert compacted.summary == "SUMMARY on the second try"
    assert [is_summary_request(r.body) for r in server.chat_requests] == [False, True, True]
    assert not server.remaining


def test_a_summary_still_empty_after_the_retry_is_built_from_the_record(project, server):
    from tests.support.harness import run_session

    (project / "notes.txt").write_text("alpha\n")
    plan = [{"step": "fix the parser", "status": "in_progress"}]
    server.add(Reply(tool_calls=[ToolCall("update_plan", {"plan": plan})]),
               Reply(tool_calls=[ToolCall("read_file", {"path": "notes.txt"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": "exit 3"})]),
               Reply(tool_calls=[ToolCall("read_file", {"path": "missing.py"})]),
               Reply(text="done"),
               Reply(tool_calls=[ToolCall("shell", {"command": "rm -rf /"})]), Reply(text="   "),
               Reply(text="after"))
    run = run_session(project, server, "work", "next", on_event=compact_after_first_turn, turns=3)
    (compacted,) = run.of(ev.ContextCompacted)
    summary = compacted.summary
    assert summary.startswith(RECORD_SUMMARY_NOTE) and "empty summary" not in summary
    assert "notes.txt (read_file)" in summary and "missing.py (read_file)" in summary
    assert "`exit 3` -> Exit code: 3" in summary
    assert "Last errors:" in summary and "missing.py" in summary.split("Last errors:")[1]
    assert "[>] fix the parser" in summary
    assert "rm -rf" not in summary  # the refused call-only replies are not part of the record
    last = server.chat_requests[-1].body
    assert not is_summary_request(last) and any(RECORD_SUMMARY_NOTE in str(m["content"]) for m in last["messages"])


# -- the context estimate counts what the prompt carries ------------------------------------------

def test_large_reads_in_a_small_window_compact_every_few_reads_and_lose_nothing(project, server):
    from tests.support.harness import run_session

    reads = 24
    (project / "big.py").write_text("".join(f"value_{i} = {i}  # {'=' * 50}\n" for i in range(3000)))
    replies = [Reply(tool_calls=[ToolCall("read_file", {"path": "big.py", "offset": 1 + n})]) for n in range(reads)]
    replies.append(Reply(text="all read"))
    summaries = []

    def step(body):
        if is_summary_request(body):
            summaries.append(f"SUMMARY-{len(summaries) + 1}")
            return Reply(text=f"{summaries[-1]}: reading big.py page by page.")
        return replies.pop(0)

    server.add(*[step] * (3 * reads))
    run = run_session(project, server, "Read big.py from each offset.",
                      overrides=("model_context_window=8000", "max_model_calls_per_turn=200"))
    assert run.ended.reason == "complete" and not replies  # every scripted step was served
    assert len([e for e in run.of(ev.ToolCallEnded) if e.ok]) == reads
    compactions = run.of(ev.ContextCompacted)
    assert 1 <= len(compactions) <= reads // 3, f"{len(compactions)} compactions for {reads} reads"
    answered = 0  # summary requests so far; each later request must carry the newest summary
    for request in server.chat_requests:
        if is_summary_request(request.body):
            answered += 1
        elif answered:
            assert summaries[answered - 1] in str(request.body["messages"]), "a request lost its summary"
    assert answered == len(summaries) == len(compactions)
