"""What one tool call came to (engine/turn/tool_runtime.py decides it), and how its end is announced.

    Ran      the tool ran; its result may still be an error the model reads
    Failed   the call could not run: unknown tool, bad arguments, a ToolError, a tool bug
    Denied   policy, a hook or the user refused it; `cause` says which kind of refusal
    Aborted  the user ended the turn at its approval

Shared by the turn (a model's call) and the calls a tool makes on its caller's behalf (engine/turn/inner_calls.py),
so both end a call the same way.
"""

from __future__ import annotations

import time

from auger.lazy_dataclass import Deferred, dataclass
from auger.protocol import events as ev
from auger.protocol.items import ToolCall
from auger.protocol.vocab import Refusal
from auger.tools.base import ToolResult


@dataclass(frozen=True)
class Ran(Deferred):
    result: ToolResult


@dataclass(frozen=True)
class Failed(Deferred):
    message: str


@dataclass(frozen=True)
class Denied(Deferred):
    message: str
    cause: Refusal  # told to clients: only an unapproved call is one a headless run could have approved


@dataclass(frozen=True)
class Aborted(Deferred):
    message: str


Outcome = Ran | Failed | Denied | Aborted


def result_of(outcome: Outcome) -> ToolResult:
    """What the caller reads: the tool's result, or the reason it did not run."""
    return outcome.result if isinstance(outcome, Ran) else ToolResult(outcome.message, ok=False)


def call_ended(turn_id: str, call: ToolCall, result: ToolResult, outcome: Outcome, started: float) -> ev.ToolCallEnded:
    """The call's `tool_call_ended` (`started`: time.monotonic() when it began)."""
    refused = outcome.cause if isinstance(outcome, Denied) else None
    return ev.ToolCallEnded(turn_id, call.call_id, call.name, result.ok, result.output,
                            int((time.monotonic() - started) * 1000), denied=refused,
                            diagnostics=list(result.diagnostics))
