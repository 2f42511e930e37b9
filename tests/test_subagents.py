"""Sub-agents end to end against the mock Chat Completions server: parallel foreground children,
background children delivered between turns, the result cache, depth, mode and tool narrowing,
approvals routed to the parent's client, cancellation killing a child's commands, and resume after
the process was killed while a child ran."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from auger.protocol import events as ev
from auger.protocol.ops import ApprovalDecision, Shutdown, UserTurn
from auger.store.sqlite import SqliteStore
from tests.support.harness import dies_soon, is_context, open_session, process_alive, run_session
from tests.support.mock_openai import Reply, ToolCall


class Routes:
    """Answers each request by the conversation it belongs to: the first user message (the user's prompt
    for the parent, the spawn prompt for a child) picks a queue of replies, consumed in order."""

    def __init__(self, routes: dict[str, list[Reply]]) -> None:
        self.routes = {key: list(replies) for key, replies in routes.items()}
        self.seen: list[tuple[str, dict]] = []
        self._lock = threading.Lock()

    def __call__(self, body: dict) -> Reply:
        first = first_user_text(body["messages"])
        with self._lock:
            self.seen.append((first, body))
            queue = self.routes.get(first)
            assert queue, f"no reply left for the conversation starting {first!r}"
            return queue.pop(0)

    def install(self, server, count: int = 40) -> Routes:
        server.add(*[self] * count)
        return self

    def bodies(self, first: str) -> list[dict]:
        return [body for key, body in self.seen if key == first]


def first_user_text(messages: list[dict]) -> str:
    for message in messages:
        if message["role"] == "user" and not is_context(message.get("content")) \
                and not str(message.get("content")).startswith("<agent"):
            return message["content"]
    return ""


def spawn(prompt: str, **extra) -> ToolCall:
    return ToolCall("spawn_agent", {"prompt": prompt, **extra})


def tool_messages(body: dict) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def child_envelopes(store_path: Path, session_id: str) -> list:
    async def load():
        store = SqliteStore(store_path)
        try:
            return await store.load_events(session_id)
        finally:
            await store.aclose()

    return asyncio.run(load())


def test_foreground_children_in_one_reply_run_in_parallel_and_answer(project, server):
    routes = Routes({
        "go": [Reply(tool_calls=[spawn("find A", agent="explore"), spawn("find B", agent="explore"),
                                 spawn("find C", agent="explore")]),
               Reply(text="all found")],
        "find A": [Reply(text="A is in a.py", delay=1.0)],
        "find B": [Reply(text="B is in b.py", delay=1.0)],
        "find C": [Reply(text="C is in c.py", delay=1.0)],
    }).install(server)
    started = time.monotonic()
    run = run_session(project, server, "go")
    elapsed = time.monotonic() - started
    assert run.ended.reason == "complete", run.ended.message
    outputs = tool_messages(routes.bodies("go")[-1])
    assert [o.splitlines()[1] for o in outputs] == ["A is in a.py", "B is in b.py", "C is in c.py"]
    assert all(o.startswith("Agent explore (") for o in outputs)
    assert elapsed < 2.6, f"three 1 s children took {elapsed:.1f} s: they did not overlap"
    # each child got the agent's instructions and only read-only tools
    child = routes.bodies("find A")[0]
    assert any(str(m.get("content", "")).startswith("<agent name='explore'>") for m in child["messages"])
    names = {t["function"]["name"] for t in child["tools"]}
    assert "read_file" in names and "shell" not in names and "write_file" not in names


def test_child_events_reach_the_parent_stream_with_the_spawn_call_id(project, server):
    Routes({"go": [Reply(tool_calls=[ToolCall("spawn_agent", {"prompt": "look"}, id="call_spawn")]),
                   Reply(text="ok")],
            "look": [Reply(tool_calls=[ToolCall("list_dir", {"path": "."})]), Reply(text="seen")]}).install(server)
    envelopes = []

    async def main():
        session, store = await open_session(project, server, project.parent / "s.db")
        from auger.engine.sessions import run_prompt

        try:
            await run_prompt(session, "go", on_envelope=envelopes.append)
        finally:
            await store.aclose()

    asyncio.run(main())
    child = [e for e in envelopes if e.parent_call_id == "call_spawn"]
    kinds = [e.event.TYPE for e in child]
    assert kinds[0] == "turn_started" and kinds[-1] == "turn_ended"
    assert "tool_call_started" in kinds and "tool_call_ended" in kinds and "agent_message" in kinds
    assert "token_usage" in kinds
    parent_ends = [e for e in envelopes if isinstance(e.event, ev.TurnEnded) and e.parent_call_id is None]
    assert len(parent_ends) == 1 and parent_ends[0].event.reason == "complete"
    # the child's usage rolled up into the parent's turn total
    usage = [e.event for e in envelopes if isinstance(e.event, ev.TokenUsage) and e.parent_call_id is None]
    child_usage = [e.event for e in child if isinstance(e.event, ev.TokenUsage)]
    own = sum(u.last.input_tokens for u in usage)
    assert usage[-1].turn.input_tokens == own + sum(u.last.input_tokens for u in child_usage)
