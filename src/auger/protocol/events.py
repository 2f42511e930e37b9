"""Events a Session emits. Every front end renders exactly these."""

from __future__ import annotations

from dataclasses import field
from typing import Any

from auger.lazy_dataclass import Deferred, dataclass
from auger.protocol._data import Record, family, tag
from auger.protocol.items import ChangedFile
from auger.protocol.vocab import (
    ApprovalOption, Effect, GoalEndReason, Mode, PlanStatus, Refusal, Severity, TurnEndReason,
)

PROTOCOL_VERSION = 1  # bumped when an event, op or item changes incompatibly; sent in session_configured


@dataclass
class Usage(Deferred):
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.cached_input_tokens + other.cached_input_tokens,
            self.output_tokens + other.output_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@family
class Event(Record):
    pass


@tag("session_configured")
class SessionConfigured(Event):
    session_id: str
    model: str
    provider: str
    cwd: str
    mode: Mode
    resumed: bool = False
    history_items: int = 0
    sandbox: str = "none"  # "bwrap" | "landlock" | "none"
    protocol_version: int = PROTOCOL_VERSION


@tag("turn_started")
class TurnStarted(Event):
    turn_id: str


@tag("item_started")
class ItemStarted(Event):
    """A streamed message or reasoning begins: its deltas carry `item_id` until `item_ended` names it, so a
    client draws each piece apart (two replies in one turn never run together)."""

    turn_id: str
    item_id: str
    kind: str  # "message" | "reasoning"


@tag("message_delta")
class MessageDelta(Event):
    turn_id: str
    delta: str
    item_id: str = ""  # the message this text belongs to (announced by item_started)


@tag("reasoning_delta")
class ReasoningDelta(Event):
    turn_id: str
    delta: str
    item_id: str = ""  # the reasoning this text belongs to (announced by item_started)


@tag("item_ended")
class ItemEnded(Event):
    """The streamed item `item_id` is complete; `discarded` when it will not be kept (a retry threw the
    attempt away, or the turn was interrupted mid-reply): a client removes what it drew of it."""

    turn_id: str
    item_id: str
    kind: str
    discarded: bool = False


@tag("agent_message")
class AgentMessage(Event):
    """The complete text of one model reply (deltas may have been retried; this is final). `item_id` is the
    streamed message it completes (empty when its text was not streamed)."""

    turn_id: str
    text: str
    item_id: str = ""


@tag("user_input_injected")
class UserInputInjected(Event):
    """Input submitted mid-turn has been added to the conversation before the next model call."""

    turn_id: str
    text: str


@tag("tool_call_started")
class ToolCallStarted(Event):
    turn_id: str
    call_id: str
    name: str
    arguments: Any


@tag("tool_output_delta")
class ToolOutputDelta(Event):
    turn_id: str
    call_id: str
    stream: str  # "stdout" | "stderr"
    text: str


DIAGNOSTICS_MARK = "\n\nDiagnostics"  # where the text about a call's diagnostics begins in its output


@dataclass
class Diagnostic(Deferred):
    """One problem a language server found in a file (lsp/: the session's servers, after a change)."""

    path: str  # relative to the project root
    line: int  # 1-based
    column: int  # 1-based, in characters
    severity: Severity
    message: str
    source: str = ""  # who reported it: the server's own name for itself (Pyright, Ruff, typescript)
    code: str = ""  # its rule or error code, when it has one


@tag("tool_call_ended")
class ToolCallEnded(Event):
    turn_id: str
    call_id: str
    name: str
    ok: bool
    output: str
    duration_ms: int = 0
    denied: Refusal | None = None  # why it never ran, when it was refused (the output says it in words)
    # The problems the language servers found that this call's change introduced (the output tells them, and
    # those it fixed, in words); also those of an earlier change the servers finished checking only now.
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def plain_output(self) -> str:
        """`output` without the diagnostics text the model read at its end, for a front end that shows
        `diagnostics` apart."""
        if self.diagnostics and DIAGNOSTICS_MARK in self.output:
            return self.output[:self.output.rindex(DIAGNOSTICS_MARK)]
        return self.output


@tag("retrying")
class Retrying(Event):
    turn_id: str
    attempt: int
    max_attempts: int
    delay_s: float
    reason: str


@dataclass
class RateLimitWindow(Deferred):
    """One limit a provider enforces, as its response headers state it."""

    name: str  # "requests" | "tokens" | "input_tokens" | "output_tokens"
    limit: int | None = None
    remaining: int | None = None
    reset_s: float | None = None  # seconds until it refills, counted from when the response came


@tag("rate_limits")
class RateLimits(Event):
    """The provider's rate limits as a response stated them (a 429's too, before the wait): each window,
    and the headers as sent. Emitted after each model request whose response carried them."""

    turn_id: str
    windows: list[RateLimitWindow] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    status: int = 200  # the response's HTTP status; 429 when a limit was hit


@tag("token_usage")
class TokenUsage(Event):
    """After every model call: what it used, the turn and session totals, and how full the context is.
    A fork also carries what its history had used up to the fork point (`inherited`), apart from its own
    (`session`): budgets count both."""

    turn_id: str
    last: Usage = field(default_factory=Usage)
    turn: Usage = field(default_factory=Usage)
    session: Usage = field(default_factory=Usage)  # this session's own calls
    context_used: int = 0  # tokens the conversation occupies after this call
    context_window: int = 0
    context_left_percent: float = 100.0
    turn_cost: float | None = None  # USD; None when a price is unknown
    session_cost: float | None = None
    inherited: Usage = field(default_factory=Usage)  # a fork's: the source's usage up to the fork point
    inherited_cost: float | None = 0.0
    model: str = ""  # the model that made this call (a sub-agent's may differ from the session's)
    duration_ms: int = 0  # how long the call took, retries included (its span ends when this event is sent)
    finish_reason: str = ""  # why the reply ended: stop, tool_calls, length, content_filter
    # what the call was for: "turn" (the model's reply), "compaction" (a hand-off summary), "title", "goal_check"
    # (the checker model judging a goal in words); the small jobs run on the small model where one is set
    purpose: str = "turn"


@tag("model_switched")
class ModelSwitched(Event):
    """The session goes on with another model of its fallback chain (`fallback`): the one it used failed in a
    way no retry mends — overloaded, out of quota, its key refused, or still failing after the retry policy —
    or, after the cool-down, the first one is used again. The same conversation goes to the new model (each
    wire sends it in its own format); nothing of the reply that failed was kept, nothing is sent twice. `from`
    and `to` are `provider:model`."""

    from_: str = field(metadata={"json": "from"})
    to: str
    reason: str
    turn_id: str | None = None


@tag("context_compacted")
class ContextCompacted(Event):
    turn_id: str
    reason: str  # "auto" | "manual"
    tokens_before: int
    tokens_after: int
    items_archived: int
    user_messages_kept: int
    user_messages_dropped: int
    summary: str


@tag("rolled_back")
class RolledBack(Event):
    turns: int
    user_messages_left: int


@dataclass
class PlanStep(Deferred):
    step: str
    status: PlanStatus


@tag("plan_updated")
class PlanUpdated(Event):
    turn_id: str
    plan: list[PlanStep] = field(default_factory=list)
    explanation: str | None = None


@tag("session_title")
class SessionTitle(Event):
    title: str


@dataclass
class ApprovalDetails(Deferred):
    """What a tool approval is about, so a front end can show it without parsing `message`."""

    call_id: str
    tool: str
    effect: Effect
    subject: str  # the command line, or the path a file tool changes
    reason: str  # why the policy asks
    findings: list[str] = field(default_factory=list)  # what the command analysis noticed
    outside_paths: list[str] = field(default_factory=list)  # paths outside the project it touches
    diff: str | None = None  # the change a file tool would make, when it can be previewed
    # The directory `approve_writable_root` would let commands write beneath for the rest of the session
    # (offered only with that option).
    writable_root: str | None = None


@dataclass
class ElicitationForm(Deferred):
    """What an MCP server asks the user to fill in mid-call; the answer is a JSON object matching
    `schema`, sent as the decision's feedback with `accept`."""

    server: str
    schema: dict[str, Any] = field(default_factory=dict)


@tag("approval_request")
class ApprovalRequest(Event):
    """The engine waits for an ApprovalDecision op naming `request_id`."""

    turn_id: str
    request_id: str
    # "tool" | "unsandboxed" | "protected_read" (one call may read protected files) | "continue" (loop guard) |
    # "elicitation" (an MCP server asks)
    kind: str
    message: str
    options: list[ApprovalOption] = field(default_factory=list)
    details: ApprovalDetails | None = None  # for "tool", "unsandboxed" and "protected_read"
    form: ElicitationForm | None = None  # for "elicitation"


@tag("approval_resolved")
class ApprovalResolved(Event):
    """An approval request is settled: answered with `decision` by the client `by` (the first valid answer
    wins; later ones are refused), or withdrawn (`decision` null) because its turn ended unanswered."""

    request_id: str
    decision: ApprovalOption | None = None
    by: str = ""


@tag("model_changed")
class ModelChanged(Event):
    provider: str
    model: str
    previous_provider: str
    previous_model: str


@tag("mode_changed")
class ModeChanged(Event):
    mode: Mode
    previous: Mode


@tag("turn_context_changed")
class TurnContextChanged(Event):
    """What the next turns run with after a `set_turn_context`: the reasoning effort and summary in force
    (null: the provider's default), and the working directory."""

    effort: str | None
    summary: str | None
    cwd: str


@tag("loop_detected")
class LoopDetected(Event):
    turn_id: str
    tool: str
    repeats: int


@tag("warning")
class WarningEvent(Event):
    message: str
    turn_id: str | None = None


@tag("secret_redacted")
class SecretRedacted(Event):
    """Secret values were replaced by markers (`[secret:KIND#N]`) before a text was recorded, shown or sent:
    in a call's output (`call_id`), or elsewhere (`where`: tool_output, message, user_message, context,
    agent, hook, diff, approval, warning, error). Never carries a value."""

    turn_id: str | None
    call_id: str | None
    kinds: list[str]  # the markers' kinds (github-token, env-openai-api-key, …), each once
    count: int  # how many values were replaced
    where: str = "tool_output"

    def describe(self) -> str:
        """One line for a person (the terminal UI, `auger exec`'s stderr, the web UI says the same)."""
        place = _REDACTED_WHERE.get(self.where, self.where.replace("_", " "))
        values = "1 secret value" if self.count == 1 else f"{self.count} secret values"
        return f"hid {values} ({', '.join(self.kinds)}) from {place}"


_REDACTED_WHERE = {"tool_output": "the output", "message": "the conversation", "user_message": "your message",
                   "context": "the context", "agent": "the agent's words", "hook": "a hook's output",
                   "diff": "the diff", "approval": "the approval", "warning": "a warning", "error": "an error"}


@tag("turn_diff")
class TurnDiff(Event):
    """Everything the turn changed in the project, whichever tool or command changed it; sent before
    turn_ended, only for a turn that changed (or tried to change) something."""

    turn_id: str
    files: list[ChangedFile]
    diff: str  # unified, as git writes it


@tag("turn_undone")
class TurnUndone(Event):
    """The project was put back as it was before `turn_id` (redo: as it was after it)."""

    turn_id: str
    redo: bool
    files: list[str]  # paths written or removed
    failed: list[str] = field(default_factory=list)  # "path: why", for paths that could not be restored


@tag("pending_changed")
class PendingChanged(Event):
    """The queue of pending changes (pending mode) changed: `paths` were queued, applied, discarded or
    rewound (`action`); `count` files now have changes waiting."""

    count: int
    paths: list[str]
    action: str = "queued"  # queued | applied | discarded | rewound


@tag("structured_output")
class StructuredOutput(Event):
    """The turn's final answer as the JSON value its `output_schema` asked for, checked against it; sent
    before turn_ended. A turn whose answer stays invalid ends with reason `error` and no such event."""

    turn_id: str
    value: Any


@tag("entered_review_mode")
class EnteredReviewMode(Event):
    """This session reviews a change (engine/agents/review.py): read-only, answering with structured findings;
    sent before the review's first turn."""

    target: str  # the change, described (`ReviewTarget.describe`): the uncommitted changes, a branch, a commit
    model: str  # the model that reviews (`review_model`, else the session's)


@tag("exited_review_mode")
class ExitedReviewMode(Event):
    """The review is over: its verdict and how many findings it has, or `error` saying why there is none."""

    target: str
    verdict: str | None = None  # "correct" | "needs changes"; None when no valid review came
    findings: int = 0
    error: str | None = None


@tag("goal_checked")
class GoalChecked(Event):
    """A goal run's check after one of its turns (`user_turn` with `until` and/or `goal`): the command ran in the
    session's sandbox under its mode and policy (`exit_code`; `output` is its output's tail, which the model
    reads next when the check fails), and/or the checker model judged the goal in words (`reason`). `attempt`
    counts the turns so far (1 after the first); `passed` ends the run."""

    turn_id: str
    attempt: int
    passed: bool
    output: str
    max_turns: int = 0
    exit_code: int | None = None  # the goal command's; None: no command, or it did not run
    reason: str | None = None  # the checker model's reason (a goal in words), when it was asked


@tag("goal_ended")
class GoalEnded(Event):
    """A goal run is over, and why (before the turn_ended of its last turn; alone, with no turn, when the goal
    command was refused before any turn ran). `attempts` is the number of turns it ran."""

    reason: GoalEndReason
    attempts: int
    message: str
    turn_id: str | None = None


@tag("turn_ended")
class TurnEnded(Event):
    turn_id: str
    reason: TurnEndReason
    message: str | None = None


@tag("shutdown_complete")
class ShutdownComplete(Event):
    pass


@tag("backend_changed")
class BackendChanged(Event):
    """Which agent runs the session's turns from now on: a backend's name, or "" for auger's own loop."""

    backend: str
    previous: str
    label: str = ""
