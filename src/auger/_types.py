"""The plain values of the public API: what a run leaves (`Result`), what a session changed (`Diff`), and
how an approval is answered (`Decision`, `Approver`). Pure data over the protocol's records, no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Literal

from auger.protocol.events import ApprovalRequest, Event, GoalEnded, Usage
from auger.protocol.items import ChangedFile

__all__ = ["Approver", "Decision", "Diff", "Result", "Task", "TurnChange"]

Answer = Literal["approve", "approve_session", "deny", "abort"]

# What each kind of answer means for each kind of request, most specific first: a tool approval offers
# approve/approve_session/deny/abort, the loop guard continue/stop, an MCP server's question
# accept/decline/cancel. A callback answers in one vocabulary whatever it was asked.
_OPTIONS: dict[str, tuple[str, ...]] = {
    "approve": ("approve", "continue", "accept"),
    "approve_session": ("approve_session", "approve", "continue", "accept"),
    "deny": ("deny", "stop", "decline"),
    "abort": ("abort", "stop", "cancel", "deny", "decline"),
}


@dataclass(frozen=True)
class Decision:
    """An answer to an approval request. `approve` runs the call once; `approve_session` also lets the
    same action run unasked for the rest of the session; `deny` refuses it and the model is told (with
    `feedback`, when given: why, or what to do instead); `abort` refuses it and ends the turn. To an
    MCP server's question, `approve` accepts it with `feedback` as the JSON answer."""

    answer: Answer
    feedback: str | None = None

    @classmethod
    def approve(cls, feedback: str | None = None) -> Decision:
        return cls("approve", feedback)

    @classmethod
    def approve_for_session(cls) -> Decision:
        return cls("approve_session")

    @classmethod
    def deny(cls, feedback: str | None = None) -> Decision:
        return cls("deny", feedback)

    @classmethod
    def abort(cls, feedback: str | None = None) -> Decision:
        return cls("abort", feedback)

    def option(self, request: ApprovalRequest) -> str:
        """The request's own option this answer stands for (its most cautious one if none fits)."""
        offered = [str(option) for option in request.options]
        for option in _OPTIONS[self.answer]:
            if option in offered:
                return option
        return cautious(request)


def cautious(request: ApprovalRequest) -> str:
    """The option that approves nothing and ends the most: what a failed callback answers."""
    offered = [str(option) for option in request.options]
    return next((option for option in _OPTIONS["abort"] if option in offered), offered[-1] if offered else "deny")


# An approval callback: given the request (what the call is, why the policy asks, a diff for file tools),
# a Decision, or True (approve) / False (deny); synchronous or a coroutine.
Approver = Callable[[ApprovalRequest], Decision | bool | Awaitable[Decision | bool]]


@dataclass(frozen=True)
class Result:
    """What one run did. `text` is the model's last reply; `output` the value an `output_schema` asked
    for (checked against it; None without one); `diff` and `files` what the turn changed in the project,
    whatever tool or command changed it; `usage` and `cost` (USD, None when a price is unknown) the
    turn's model calls, its sub-agents' included; `events` everything the session emitted meanwhile."""

    session_id: str
    turn_id: str
    reason: str  # complete | cancelled | error
    message: str | None
    text: str
    output: Any
    diff: str
    files: list[ChangedFile]
    usage: Usage
    cost: float | None
    events: list[Event] = field(repr=False)
    goal: GoalEnded | None = None  # how a goal run (`run(until=…, goal=…)`) ended: reason, attempts, message


@dataclass(frozen=True)
class TurnChange:
    """One turn that changed files: its number among them (1 for the first), the unified diff, the files.
    `complete` is False for a turn cut short by the end of its process (what it changed is unknown)."""

    number: int
    turn_id: str
    files: list[ChangedFile]
    diff: str
    complete: bool = True


@dataclass(frozen=True)
class Diff:
    """What a session's turns changed, turn by turn (those that changed nothing are left out)."""

    turns: list[TurnChange]

    @property
    def text(self) -> str:
        """The turns' unified diffs, oldest first."""
        return "".join(turn.diff for turn in self.turns)

    @property
    def files(self) -> list[str]:
        """Every path a turn changed, once each, in the order first changed."""
        return list(dict.fromkeys(change.path for turn in self.turns for change in turn.files))


@dataclass(frozen=True)
class Task:
    """A fleet task as `auger serve` reports it (`Client.submit`, `Client.task`): its id and state
    (`queued`, `running`, `waiting` for an approval, `done`, `failed`, `cancelled`), what it runs, who
    submitted it, and — once it ran — its session and why it ended. `record` is the server's whole record."""

    id: str
    state: str
    prompt: str
    repo: str
    ref: str
    submitted_by: str
    session_id: str | None
    exit_reason: str | None
    error: str | None
    record: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, record: dict[str, Any]) -> Task:
        spec = record.get("spec") or {}
        return cls(str(record["id"]), str(record["state"]), str(spec.get("prompt", "")), str(spec.get("repo", "")),
                   str(spec.get("ref", "")), str(record.get("submitted_by") or ""), record.get("session_id"),
                   record.get("exit_reason"), record.get("error"), dict(record))
