"""A shell command the user runs themselves (`!cmd` in the terminal UI, the `run_shell` op).

Why an engine op and not a front-end feature: the command must take the same path as the model's
(classifier, rules, approvals, sandbox, the before-mutation snapshot that makes it undoable), be
interruptible like a turn, and end up in the conversation so the model knows what the user saw. The
session runs it as a turn without a model call: `turn_started`, the shell call's events, `turn_ended`.
The call itself is not recorded as a tool call (the model did not make it); its command and output are
recorded as a user message.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Callable

from auger.engine.turn.tool_runtime import Ran
from auger.ids import new_hex
from auger.protocol import events as ev
from auger.protocol.items import ToolCall, UserMessage

if TYPE_CHECKING:
    from auger.engine.turn.host import TurnHost
    from auger.engine.turn.tool_runtime import ToolRuntime


async def run_user_shell(runtime: ToolRuntime, host: TurnHost, *, turn_id: str, command: str,
                         interrupt_reason: Callable[[], str]) -> tuple[str, str | None]:
    """Run `command` through the tool runtime's `shell`; return the turn's (end reason, message)."""
    call = ToolCall("user-" + new_hex(10), "shell", json.dumps({"command": command}))
    started = time.monotonic()
    try:
        outcome = await runtime.run(call, host, turn_id=turn_id)
    except asyncio.CancelledError:
        reason = interrupt_reason()
        host.emit(ev.ToolCallEnded(turn_id, call.call_id, "shell", False, f"interrupted: {reason}",
                                   int((time.monotonic() - started) * 1000)))
        await host.record(turn_id, UserMessage(f"I ran this shell command myself and interrupted it "
                                               f"({reason}):\n$ {command}"))
        return "cancelled", reason
    ok = isinstance(outcome, Ran) and outcome.result.ok
    output = outcome.result.output if isinstance(outcome, Ran) else outcome.message
    host.emit(ev.ToolCallEnded(turn_id, call.call_id, "shell", ok, output, int((time.monotonic() - started) * 1000)))
    await host.record(turn_id, UserMessage(f"I ran this shell command myself:\n$ {command}\n{output}"))
    for event in outcome.result.events if isinstance(outcome, Ran) else ():  # secret_redacted, when it was
        host.emit(event)
    return "complete", None
