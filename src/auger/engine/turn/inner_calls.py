"""Calls a tool makes on its caller's behalf: run_code's program calling the session's tools.

Each call is a real tool call of the caller's runtime: `ToolRuntime.run` takes it through the whole pipeline —
validation, `before_tool` hooks, the tool's gate, classification, the decision in the mode of that moment,
approval (headless: refused as a direct call would be), the sandbox, snapshots and the other mutation hooks,
`after_tool` hooks — so a program can do nothing its caller could not do call by call. Its events
(`tool_call_started`, output deltas, approvals, `tool_call_ended`) go out in envelopes whose
`parent_call_id` is the calling call's id, as a sub-agent's name its spawn call; nothing is recorded as a
conversation item (the model made one call: the program's). What the program gets back is what the model
would have read.

A program is bounded as a turn is by its loop guard: at most MAX_CALLS calls, and the same call made
REPEATS times in a row ends it; an abort at one of its approvals ends the turn (CallsAborted).
"""

from __future__ import annotations

import json
import time
from typing import Any, Protocol, Sequence

from auger.engine.turn.call_outcome import Aborted, Outcome, call_ended, result_of
from auger.engine.turn.host import CallHost
from auger.engine.turn.loop_guard import LoopGuard
from auger.protocol.events import Event
from auger.protocol.items import ToolCall
from auger.protocol.ops import ApprovalDecision
from auger.tools.base import CallsAborted, ToolError, ToolResult, ToolSpec
from auger.tools.router import ToolRouter

MAX_CALLS = 1000
REPEATS = 20


class Runtime(Protocol):
    """What the calls need of the tool runtime (engine/turn/tool_runtime.py's ToolRuntime, which makes them)."""

    router: ToolRouter

    async def run(self, call: ToolCall, host: CallHost, *, turn_id: str) -> Outcome: ...


class InnerCalls:
    """The `ToolCaller` one call of a tool with `calls_tools` gets (tools/base.py)."""

    def __init__(self, runtime: Runtime, host: CallHost, turn_id: str, parent: ToolCall) -> None:
        self.runtime = runtime
        self.host = _Under(host, parent.call_id)
        self.turn_id = turn_id
        self.parent = parent
        self.made = 0
        self._guard = LoopGuard(MAX_CALLS)

    def specs(self) -> Sequence[ToolSpec]:
        """The caller's catalog, but tools that run tools themselves (no program starts another)."""
        router = self.runtime.router
        return [spec for spec in map(router.get, router.names) if spec is not None and not spec.calls_tools]

    async def call(self, name: str, args: dict[str, Any]) -> ToolResult:
        spec = self.runtime.router.get(name)
        if spec is not None and spec.calls_tools:
            return ToolResult(f"Error: {name} cannot be called from a program", ok=False)
        if self.made >= MAX_CALLS:
            raise ToolError(f"the program made {MAX_CALLS} tool calls, the most one may; it was stopped")
        arguments = json.dumps(args, ensure_ascii=False)
        repeats = self._guard.note_tool_call(name, arguments)
        if repeats >= REPEATS:
            raise ToolError(f"the program called {name} with the same arguments {repeats} times in a row; the "
                            "loop guard stopped it")
        self.made += 1
        call = ToolCall(f"{self.parent.call_id}.{self.made}", name, arguments)
        started = time.monotonic()
        outcome = await self.runtime.run(call, self.host, turn_id=self.turn_id)
        result = result_of(outcome)
        self.host.emit(call_ended(self.turn_id, call, result, outcome, started))
        for event in result.events:
            self.host.emit(event)
        if isinstance(outcome, Aborted):
            raise CallsAborted(outcome.message)
        return result


class _Under:
    """The caller's host, with every event in an envelope naming the calling call."""

    def __init__(self, host: CallHost, parent_call_id: str) -> None:
        self._host = host
        self._parent = parent_call_id

    def emit(self, event: Event) -> None:
        self._host.emit_for(event, self._parent)

    def emit_for(self, event: Event, parent_call_id: str | None) -> None:
        self._host.emit_for(event, parent_call_id or self._parent)

    async def ask(self, *, turn_id: str, kind: str, message: str, options: list[str], headless_default: str,
                  details: dict[str, Any] | None = None) -> ApprovalDecision:
        return await self._host.ask(turn_id=turn_id, kind=kind, message=message, options=options,
                                    headless_default=headless_default, details=details)
