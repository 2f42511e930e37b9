"""A reply's tool calls as they arrive while it streams, and the reads among them that start at once.

A read the policy lets run unasked (`ToolRuntime.starts_early`) starts as soon as its arguments are
complete, through the same pipeline as every call (`ToolRuntime.run`), instead of after the whole reply:
in a reply with five reads of large files, the first reads are done while the last ones still stream.
Only the leading run of such calls starts early. From the first call that may change something, or
would be asked about, that call and every one after it wait for the reply's end and run in its order
(engine/turn/turn.py), so a read never overtakes a write it comes after.

The turn's durable order holds all the same (turn.py): what an early call announces is held back until
`release`, which the turn calls once the reply's items are recorded, and a question it would ask waits
for that too; its output is recorded by the turn, in the reply's order. A reply that is dropped — retried,
failed, interrupted — takes its early calls with it (`discard`, `cancel`): they are cancelled and what they
found is never recorded nor shown.

Call ids are made unique in the session here, as each call arrives (some local servers reuse ids across
replies), so an early call runs under the id it is recorded with.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from auger.engine.turn.host import CallHost, TurnHost
from auger.engine.turn.tool_runtime import Outcome, ToolRuntime
from auger.models.base import ToolCallReady
from auger.protocol.events import Event
from auger.protocol.items import ToolCall
from auger.protocol.ops import ApprovalDecision


class ReplyCalls:
    """One model call's tool calls, attempt by attempt (a retried attempt starts afresh)."""

    def __init__(self, runtime: ToolRuntime, host: TurnHost, turn_id: str) -> None:
        self._runtime = runtime
        self._host = host
        self._turn_id = turn_id
        self._dropped: set[asyncio.Task[Outcome]] = set()
        self._start_attempt()

    def _start_attempt(self) -> None:
        self.calls: list[ToolCall] = []  # in the reply's order, ids unique in the session
        self._known = self._host.history.call_ids()
        self._held = _HeldHost(self._host)
        self._early: dict[str, tuple[asyncio.Task[Outcome], float]] = {}  # call id -> its run, started when
        self._leading = True  # every call so far started early

    def arrived(self, ready: ToolCallReady) -> None:
        """A call of the reply is complete: note it, and start it if it may (a ModelCall `on_call`)."""
        call_id = ready.call_id
        if call_id in self._known:
            call_id = f"{call_id}_{len(self._known)}"
        self._known.add(call_id)
        call = ToolCall(call_id, ready.name, ready.arguments)
        self.calls.append(call)
        self._leading = self._leading and self._runtime.starts_early(call)
        if self._leading:
            task = asyncio.create_task(self._runtime.run(call, self._held, turn_id=self._turn_id),
                                       name=f"early-{call_id}")
            self._early[call_id] = (task, time.monotonic())

    def started(self, call_id: str) -> tuple[asyncio.Task[Outcome], float] | None:
        """The run of a call that started early, and when it started (monotonic); None for the others."""
        return self._early.get(call_id)

    def release(self) -> None:
        """The reply's items are recorded: the early calls' announcements go out, in the order made."""
        self._held.release()

    def discard(self) -> None:
        """The attempt is dropped (a retry follows): cancel its early calls; what they did is not told."""
        for task, _ in self._early.values():
            task.cancel()
            self._dropped.add(task)
        self._start_attempt()

    async def cancel(self) -> None:
        """The reply ended without its calls being run (a failure, an interrupt): cancel what started early
        and wait until it has stopped, with the runs of dropped attempts."""
        self.discard()
        dropped, self._dropped = self._dropped, set()
        await asyncio.gather(*dropped, return_exceptions=True)


class _HeldHost:
    """A call's host until the reply is recorded: events are kept (then emitted in order), a question
    waits; after `release` both go straight to the turn's host."""

    def __init__(self, host: CallHost) -> None:
        self._host = host
        self._kept: list[tuple[Event, str | None]] | None = []
        self._released = asyncio.Event()

    def emit(self, event: Event) -> None:
        self.emit_for(event, None)

    def emit_for(self, event: Event, parent_call_id: str | None) -> None:
        if self._kept is not None:
            self._kept.append((event, parent_call_id))
        elif parent_call_id is None:
            self._host.emit(event)
        else:
            self._host.emit_for(event, parent_call_id)

    async def ask(self, *, turn_id: str, kind: str, message: str, options: list[str], headless_default: str,
                  details: dict[str, Any] | None = None) -> ApprovalDecision:
        await self._released.wait()
        return await self._host.ask(turn_id=turn_id, kind=kind, message=message, options=options,
                                    headless_default=headless_default, details=details)

    def release(self) -> None:
        kept, self._kept = self._kept or [], None
        for event, parent_call_id in kept:
            self.emit_for(event, parent_call_id)
        self._released.set()
