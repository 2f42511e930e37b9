"""Driving sub-agents in tests: a mock model that answers each conversation (the parent's, each child's) from
its own script, a session run to the end with every envelope kept, and small readers of what came out."""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
from pathlib import Path

from auger.protocol import events as ev
from tests.support.harness import is_context, open_session, process_alive
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
            step = queue.pop(0)
        return step(body) if inspect.isfunction(step) else step  # a function answers from the request

    def install(self, server, count: int = 40) -> Routes:
        server.add(*[self] * count)
        return self

    def bodies(self, first: str) -> list[dict]:
        return [body for key, body in self.seen if key == first]


class Envelopes(list):
    """The envelopes of one run (a sub-agent's carry its spawn call id)."""

    def parent_ends(self) -> list[ev.TurnEnded]:
        return [e.event for e in self if isinstance(e.event, ev.TurnEnded) and e.parent_call_id is None]

    @property
    def ended(self) -> ev.TurnEnded:
        return self.parent_ends()[-1]

    def events(self, kind: type) -> list:
        return [e.event for e in self if isinstance(e.event, kind)]


def run_parent(project: Path, server, *prompts: str, overrides: tuple[str, ...] = (), interactive: bool = False,
               on_envelope=None, db: Path | None = None, tables: dict | None = None) -> Envelopes:
    """Run the prompts in a new session (each after the previous turn ended) and shut it down; `tables` are
    config tables such as `hooks`."""
    from auger.engine.session.sessions import run_prompt

    seen = Envelopes()

    async def main():
        session, store = await open_session(project, server, db or project.parent / "sessions.db", *overrides,
                                            interactive=interactive, tables=tables)

        def collect(envelope):
            seen.append(envelope)
            if on_envelope is not None:
                on_envelope(session, envelope)

        try:
            await asyncio.wait_for(run_prompt(session, *prompts, on_envelope=collect), 60)
        finally:
            await store.aclose()

    asyncio.run(main())
    return seen


def first_user_text(messages: list[dict]) -> str:
    for message in messages:
        if message["role"] == "user" and not is_context(message.get("content")) \
                and not str(message.get("content")).startswith("<agent"):
            return message["content"]
    return ""


def pids_of(marker: str) -> list[int]:
    """Host pids of processes whose command line contains `marker` (a command's own `$$` is the sandbox's
    pid namespace, not ours)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmdline and process_alive(int(entry)):
                found.append(int(entry))
    return found


WAIT_FOR_FILE = "for i in $(seq 100); do [ -s {0} ] && break; sleep 0.05; done; cat {0}"


def spawn(prompt: str, **extra) -> ToolCall:
    return ToolCall("spawn_agent", {"prompt": prompt, **extra})


def tool_messages(body: dict) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


async def follow(session, until, *, on_envelope=None) -> list:
    """Envelopes of `session` until `until(envelope)` is true (inclusive)."""
    seen = []
    async for envelope in session.subscribe():
        seen.append(envelope)
        if on_envelope is not None:
            on_envelope(envelope)
        if until(envelope):
            return seen
    return seen


def parent_turn_ended(envelope) -> bool:
    return isinstance(envelope.event, ev.TurnEnded) and envelope.parent_call_id is None
