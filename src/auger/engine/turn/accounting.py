"""What a session has used: how full the context window is, and what the model calls cost.

Turns read these and add to them; they do not own them. The session keeps one meter and
one ledger for its lifetime, so budgets span turns and compaction sees the same count the
turn saw. Everything here is arithmetic over values passed in: no I/O, no Session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from auger.engine.turn.history import History, to_prompt
from auger.engine.turn.tokens import estimate_items, estimate_request
from auger.models.base import ToolSchema
from auger.models.registry import add_cost
from auger.protocol.events import TokenUsage, Usage

COMPACT_SHARE = 0.85  # compact automatically once the next request would fill this share of the window
OUTPUT_SHARE = 0.05  # each tool output in the prompt keeps at most this share of the window (head and tail)


@dataclass(frozen=True)
class ContextLimits:
    window: int  # tokens the model accepts
    compact_at: int  # tokens at which a turn compacts before its next request
    output_cap_chars: int  # characters of one tool output kept in the prompt
    provisional: bool = False  # the window may still change: a local server's answer is awaited

    @classmethod
    def of(cls, window: int, compact_limit: int | None = None, *, provisional: bool = False) -> ContextLimits:
        return cls(window, compact_limit or int(window * COMPACT_SHARE), int(window * OUTPUT_SHARE) * 4,
                   provisional)


@dataclass(frozen=True)
class Budgets:
    tokens: int | None = None  # input + output tokens over the whole session
    cost: float | None = None  # USD over the whole session


class ContextMeter:
    """Tokens the next request will occupy: the provider's last count plus an estimate of what came since.

    What came since is estimated in its prompt form (long tool outputs capped to head and tail), not as
    recorded: the full output of one large read would otherwise count many times what is sent."""

    def __init__(self, history: History) -> None:
        self._history = history
        self._mark: tuple[int, int] | None = None  # (history length, tokens the provider counted)
        self._fill_checked = False

    def mark(self, tokens: int) -> None:
        """The conversation as it stands now occupies `tokens` (a provider's count or an estimate)."""
        self._mark = (len(self._history), tokens)

    def reset(self) -> None:
        """Forget the last count (the model or the view changed): estimate from scratch next time."""
        self._mark = None

    def estimate(self, instructions: str, tools: Sequence[ToolSchema], limits: ContextLimits) -> int:
        if self._mark is None:
            return estimate_request(instructions, self._history.for_prompt(limits.output_cap_chars), tools)
        length, tokens = self._mark
        return tokens + estimate_items(to_prompt(list(self._history.items[length:]), limits.output_cap_chars))

    def first_check(self) -> bool:
        """True once per session: the first request's fill of the window is looked at, then never again."""
        first, self._fill_checked = not self._fill_checked, True
        return first


@dataclass
class UsageLedger:
    """Tokens and cost of the session, and of the turn running now. Cost is None once any call had an
    unknown price: a total that silently leaves calls out would be worse than none.

    A fork starts with what its history had cost up to the fork point (`inherited`), kept apart from
    its own calls so both can be shown; budgets count both, or forking would reset them."""

    usage: Usage = field(default_factory=Usage)
    cost: float | None = 0.0
    turn_usage: Usage = field(default_factory=Usage)
    turn_cost: float | None = 0.0
    inherited: Usage = field(default_factory=Usage)
    inherited_cost: float | None = 0.0

    def begin_turn(self) -> None:
        self.turn_usage, self.turn_cost = Usage(), 0.0

    def add(self, usage: Usage, cost: float | None) -> None:
        self.usage = self.usage + usage
        self.turn_usage = self.turn_usage + usage
        self.cost = add_cost(self.cost, cost)
        self.turn_cost = add_cost(self.turn_cost, cost)

    def exhausted(self, budgets: Budgets) -> str | None:
        """Why the session may not call the model again, if a budget is used up (inherited usage included)."""
        total = self.usage + self.inherited
        used = total.input_tokens + total.output_tokens
        if budgets.tokens and used >= budgets.tokens:
            inherited = self.inherited.input_tokens + self.inherited.output_tokens
            return (f"session token budget reached: {used:,} of {budgets.tokens:,} tokens used"
                    + (f" ({inherited:,} of them before the fork)" if inherited else ""))
        spent = add_cost(self.cost, self.inherited_cost)
        if budgets.cost is not None and spent is not None and spent >= budgets.cost:
            return (f"session cost budget reached: ${spent:.4f} of ${budgets.cost:.2f} spent"
                    + (f" (${self.inherited_cost:.4f} of it before the fork)" if self.inherited_cost else ""))
        return None

    def report(self, turn_id: str, last: Usage, context_used: int, context_window: int, *, model: str = "",
               duration_ms: int = 0, finish_reason: str = "") -> TokenUsage:
        """The token_usage event after a model call that used `last` (already added)."""
        left = round(max(0.0, 100.0 * (1 - context_used / context_window)), 1) if context_window else 100.0
        return TokenUsage(turn_id, last, self.turn_usage, self.usage, context_used, context_window, left,
                          self.turn_cost, self.cost, inherited=self.inherited, inherited_cost=self.inherited_cost,
                          model=model, duration_ms=duration_ms, finish_reason=finish_reason)
