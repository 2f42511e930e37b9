"""The fallback chain against real loopback servers of each wire: a provider that is overloaded (529), out of
quota (429 without Retry-After) or refuses the key (401) hands the turn to the next model, which gets the same
conversation in its own wire format — the tool call and its result paired as that API demands — with one
model_switched event, the tool run once and nothing repeated; a 400 (the request's own fault) is not sent
elsewhere; a 503 on every attempt moves the call once the retry policy is spent. A goal in words is judged
on the Responses and Anthropic wires too."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time

import pytest

from auger.engine.session.sessions import SessionManager
from auger.engine.workspace import Workspace
from auger.models.registry import client_for
from auger.protocol import events as ev
from auger.store.sqlite import SqliteStore
from tests.support import mock_anthropic, mock_openai, mock_responses
from tests.support.harness import drive, make_config

QUOTA = {"error": {"message": "You exceeded your current quota, please check your plan and billing details.",
                   "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}}
COMMAND = "echo ran | tee -a log.txt"


@dataclasses.dataclass
class Wire:
    """One wire's mock server and how its script and recorded requests read."""

    name: str
    server: object

    def reply(self, text: str = "", call: bool = False):
        mod = {"anthropic": mock_anthropic, "openai_chat": mock_openai, "openai_responses": mock_responses}[self.name]
        if not call:
            return mod.Reply(text=text)
        return mod.Reply(tool_calls=[mod.ToolCall("shell", {"command": COMMAND})])

    def fault(self, code: int, body=None):
        mod = {"anthropic": mock_anthropic, "openai_chat": mock_openai, "openai_responses": mock_responses}[self.name]
        return mod.Fault.status(code, body=body)

    @property
    def requests(self) -> list:
        s = self.server
        if self.name == "anthropic":
            return s.message_requests
        if self.name == "openai_responses":
            return s.responses_requests
        return s.chat_requests

    def pairs(self, body: dict) -> tuple[list[str], list[tuple[str, str]]]:
        """(ids of the shell calls, (call id, output) of their results) in a request body, as this wire writes
        them."""
        calls, results = [], []
        if self.name == "anthropic":
            for message in body["messages"]:
                for block in message["content"] if isinstance(message["content"], list) else []:
                    if block["type"] == "tool_use" and block["name"] == "shell":
                        assert block["input"] == {"command": COMMAND}
                        calls.append(block["id"])
                    elif block["type"] == "tool_result":
                        content = block["content"]
                        text = content if isinstance(content, str) else "".join(c.get("text", "") for c in content)
                        results.append((block["tool_use_id"], text))
        elif self.name == "openai_responses":
            for item in body["input"]:
                if item.get("type") == "function_call" and item["name"] == "shell":
                    calls.append(item["call_id"])
                elif item.get("type") == "function_call_output":
                    results.append((item["call_id"], item["output"]))
        else:
            for message in body["messages"]:
                for call in message.get("tool_calls") or []:
                    if call["function"]["name"] == "shell":
                        calls.append(call["id"])
                if message["role"] == "tool":
                    results.append((message["tool_call_id"], message["content"]))
        return calls, results


def _server(wire: str):
    if wire == "anthropic":
        return mock_anthropic.MockAnthropicServer(api_key="k-anthropic")
    if wire == "openai_responses":
        return mock_responses.MockResponsesServer()
    return mock_openai.MockChatServer()


async def _run(project, db, first: Wire, second: Wire, monkeypatch, *overrides: str):
    tables = {"first": {"wire": first.name, "base_url": first.server.base_url, "key_env": "FIRST_KEY"},
              "second": {"wire": second.name, "base_url": second.server.base_url, "key_env": "SECOND_KEY"}}
    keys = {"anthropic": "k-anthropic", "openai_chat": "sk-test", "openai_responses": "sk-test"}
    monkeypatch.setenv("FIRST_KEY", keys[first.name])
    monkeypatch.setenv("SECOND_KEY", keys[second.name])
    config = make_config("provider=first", "model=first-model", "fallback=second:second-model",
                         "model_max_attempts=3", *overrides)
    config.tables["providers"] = tables
    store = SqliteStore(db)
    session = await SessionManager(Workspace.open(project, config), store).create(client_for(config))
    try:
        return await drive(session, "log it")
    finally:
        await store.aclose()


@pytest.mark.parametrize("first_wire,code,body,second_wire", [
    ("anthropic", 529, None, "openai_chat"),
    ("openai_chat", 429, QUOTA, "openai_responses"),
    ("openai_responses", 401, None, "anthropic"),
], ids=["overloaded-anthropic-to-chat", "quota-chat-to-responses", "auth-responses-to-anthropic"])
def test_the_turn_completes_on_the_next_provider_with_its_history_converted(project, tmp_path, monkeypatch,
                                                                            first_wire, code, body, second_wire):
    with _server(first_wire) as s1, _server(second_wire) as s2:
        first, second = Wire(first_wire, s1), Wire(second_wire, s2)
        s1.add(first.reply(call=True), first.fault(code, body))
        s2.add(second.reply("logged it"))
        run = asyncio.run(_run(project, tmp_path / "s.db", first, second, monkeypatch))
        assert run.ended.reason == "complete", run.ended.message
        switches = run.of(ev.ModelSwitched)
        assert [(s.from_, s.to) for s in switches] == [("first:first-model", "second:second-model")]
        assert str(code) in switches[0].reason or "quota" in switches[0].reason
        assert len(first.requests) == 2, "no retry of a failure no wait mends"
        assert len(second.requests) == 1
        calls, results = second.pairs(second.requests[0].body)
        assert len(calls) == 1 and len(results) == 1 and results[0][0] == calls[0] and "ran" in results[0][1]
        assert (project / "log.txt").read_text() == "ran\n", "the tool ran once"
        assert [m.text for m in run.of(ev.AgentMessage)] == ["logged it"]
        usage = run.of(ev.TokenUsage)
        assert [u.model for u in usage] == ["first-model", "second-model"]
        warnings = [w.message for w in run.of(ev.WarningEvent) if "going on with" in w.message]
        assert len(warnings) == 1


def test_a_400_is_the_requests_fault_and_is_not_sent_to_another_provider(project, tmp_path, monkeypatch):
    with _server("openai_chat") as s1, _server("anthropic") as s2:
        first, second = Wire("openai_chat", s1), Wire("anthropic", s2)
        s1.add(first.fault(400))
        s2.add(second.reply("never"))
        run = asyncio.run(_run(project, tmp_path / "s.db", first, second, monkeypatch))
        assert run.ended.reason == "error" and "400" in (run.ended.message or "")
        assert run.of(ev.ModelSwitched) == [] and second.requests == []
        assert len(first.requests) == 1


def test_after_the_cool_down_the_first_model_is_used_again(project, tmp_path, monkeypatch):
    with _server("openai_chat") as s1, _server("openai_chat") as s2:
        first, second = Wire("openai_chat", s1), Wire("openai_chat", s2)
        s1.add(first.fault(529), first.reply("first again"))
        s2.add(second.reply("second"))

        async def two_turns():
            tables = {"first": {"wire": "openai_chat", "base_url": s1.base_url, "key_env": "FIRST_KEY"},
                      "second": {"wire": "openai_chat", "base_url": s2.base_url, "key_env": "SECOND_KEY"}}
            monkeypatch.setenv("FIRST_KEY", "sk-test")
            monkeypatch.setenv("SECOND_KEY", "sk-test")
            config = make_config("provider=first", "model=first-model", "fallback=second:second-model",
                                 "fallback_cooldown=0.01")
            config.tables["providers"] = tables
            store = SqliteStore(tmp_path / "c.db")
            session = await SessionManager(Workspace.open(project, config), store).create(client_for(config))
            def outlast_the_cool_down(_session, event) -> None:
                # a fast machine ends the first turn within the 0.01 s; the second must start after it
                if isinstance(event, ev.TurnEnded):
                    time.sleep(0.05)

            try:
                run = await drive(session, "one", "two", on_event=outlast_the_cool_down)
            finally:
                await store.aclose()
            return run

        run = asyncio.run(two_turns())
        assert [(s.from_, s.to) for s in run.of(ev.ModelSwitched)] == [
            ("first:first-model", "second:second-model"), ("second:second-model", "first:first-model")]
        assert [m.text for m in run.of(ev.AgentMessage)] == ["second", "first again"]


UNAVAILABLE = {"error": {"message": "Service Unavailable", "type": "server_error", "param": None,
                         "code": "service_unavailable"}}  # a 503 that does not say "overloaded": retried first


def test_a_provider_failing_503_on_every_attempt_is_left_once_the_retry_policy_is_spent(project, tmp_path,
                                                                                        monkeypatch):
    with _server("openai_chat") as s1, _server("anthropic") as s2:
        first, second = Wire("openai_chat", s1), Wire("anthropic", s2)
        s1.add(*[first.fault(503, UNAVAILABLE) for _ in range(3)])
        s2.add(second.reply("done on the second"))
        run = asyncio.run(_run(project, tmp_path / "s.db", first, second, monkeypatch))
        assert run.ended.reason == "complete", run.ended.message
        assert len(first.requests) == 3, "the retry policy (model_max_attempts=3) ran its course first"
        assert len(run.of(ev.Retrying)) == 2  # the waits between the three attempts
        switches = run.of(ev.ModelSwitched)
        assert [(s.from_, s.to, s.reason) for s in switches] == [
            ("first:first-model", "second:second-model", "still failing after 3 attempts (HTTP 503)")]
        assert len(second.requests) == 1 and s2.remaining == []
        assert [m.text for m in run.of(ev.AgentMessage)] == ["done on the second"]


@pytest.mark.parametrize("wire", ["openai_responses", "anthropic"])
def test_a_goal_in_words_is_judged_on_a_wire_other_than_chat(project, tmp_path, monkeypatch, wire):
    from auger.protocol.ops import UserTurn

    with _server(wire) as s1:
        only = Wire(wire, s1)
        mod = {"anthropic": mock_anthropic, "openai_responses": mock_responses}[wire]
        s1.add(mod.Reply(text="Wrote nothing yet."), mod.Reply(text='{"met": false, "reason": "no notes"}'),
               mod.Reply(tool_calls=[mod.ToolCall("write_file", {"path": "notes.md", "content": "# notes\n"})]),
               mod.Reply(text="Wrote notes.md."), mod.Reply(text='{"met": true, "reason": "notes.md is written"}'))

        async def main():
            monkeypatch.setenv("FIRST_KEY", "k-anthropic" if wire == "anthropic" else "sk-test")
            config = make_config("provider=first", "model=first-model", "small_model=first:checker")
            config.tables["providers"] = {"first": {"wire": wire, "base_url": s1.base_url, "key_env": "FIRST_KEY"}}
            store = SqliteStore(tmp_path / "g.db")
            session = await SessionManager(Workspace.open(project, config), store).create(client_for(config))
            try:
                return await drive(session, UserTurn("write the notes", goal="notes.md is written"))
            finally:
                await store.aclose()

        run = asyncio.run(main())
        checks = [(c.attempt, c.passed, c.reason) for c in run.of(ev.GoalChecked)]
        assert checks == [(1, False, "no notes"), (2, True, "notes.md is written")]
        assert [(e.reason, e.attempts) for e in run.of(ev.GoalEnded)] == [("passed", 2)]
        assert [r.body["model"] for r in only.requests] == ["first-model", "checker", "first-model", "first-model",
                                                            "checker"]
        checker = only.requests[1].body
        assert "tools" not in checker or not checker["tools"]
        if wire == "openai_responses":  # the schema sent natively; the Anthropic wire asks for it in words
            assert checker["text"]["format"]["type"] == "json_schema"
        assert "notes.md is written" in json.dumps(checker)
        assert "no notes" in json.dumps(only.requests[2].body)  # the verdict's reason is the next prompt
        usage = [(u.model, u.purpose) for u in run.of(ev.TokenUsage)]
        assert usage.count(("checker", "goal_check")) == 2
        assert (project / "notes.md").read_text() == "# notes\n"
