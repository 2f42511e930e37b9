"""TurnHost: what a turn may do to the world around it, and nothing more.

A turn never sees a Session. It reads its frozen TurnContext and acts only through this
small protocol: read the history, record an item (committed before anything announces it),
emit an event, ask the user, take queued input or a compaction request, read the context
meter and the usage ledger, reach the output archive. The Session implements it for its
own turns; a sub-agent's or a fleet worker's host can implement it too, and tests use a
fake one (tests/support/fake_host.py).
"""

from __future__ import annotations

from typing import Any, Protocol

from auger.context.skills import SkillIndex
from auger.engine.turn.accounting import ContextMeter, UsageLedger
from auger.engine.turn.history import History
from auger.protocol.events import Event, Usage
from auger.protocol.items import Item
from auger.protocol.ops import ApprovalDecision, UserTurn
from auger.tools.base import OutputArchive

CONTEXT_TURN = "context"  # the turn id of items recorded outside any turn (context, notes, undo records)


class CallHost(Protocol):
    """What running one tool call needs of its host (engine/turn/tool_runtime.py): announce, and ask."""

    def emit(self, event: Event) -> None: ...

    def emit_for(self, event: Event, parent_call_id: str | None) -> None:
        """Announce an event of a call made on behalf of another (run_code's inner calls): its envelope
        names that call, as a sub-agent's names its spawn call."""

    async def ask(self, *, turn_id: str, kind: str, message: str, options: list[str], headless_default: str,
                  details: dict[str, Any] | None = None) -> ApprovalDecision:
        """The user's answer; with nobody to ask (headless), `headless_default`."""


class TurnHost(CallHost, Protocol):
    @property
    def history(self) -> History:
        """The conversation so far; a turn reads it and changes it only through `record`."""

    @property
    def meter(self) -> ContextMeter: ...

    @property
    def ledger(self) -> UsageLedger: ...

    @property
    def archive(self) -> OutputArchive: ...

    async def record(self, turn_id: str, item: Item, *, full_output: str | None = None, tool_name: str = "",
                     arguments: str = "") -> None:
        """Commit an item durably, then to the history."""

    def take_input(self) -> UserTurn | None:
        """The oldest queued user turn (possibly sent while this turn ran), or None."""

    def has_input(self) -> bool: ...

    def take_compact_request(self) -> bool:
        """True once after the user asked for compaction while a turn ran."""

    async def charge(self, turn_id: str, model: str, usage: Usage, cost: float | None,
                     purpose: str = "turn") -> None:
        """Add one model call's usage to the ledger, and store it with what it was for (`purpose`, as its
        token_usage event says)."""

    async def refresh_context(self, turn_id: str) -> SkillIndex:
        """Record what changed in the instructions and environment since they were last told; return the
        skills available now."""

    async def set_title(self, text: str) -> None:
        """A provisional title from the first prompt, when the session has none."""
