"""The events a session emits — what `Session.run` yields — and the records they carry.

These are the protocol's own classes (docs/protocol.md; `auger schema` prints their JSON Schema), the
same ones `auger exec --json`, the terminal, ACP and `auger serve` speak, so a program reads exactly
what every other client reads. Match them with `isinstance`:

    async for event in session.run("run the tests"):
        if isinstance(event, auger.events.ToolCallStarted):
            print("running", event.name, event.arguments)
        elif isinstance(event, auger.events.MessageDelta):
            print(event.delta, end="")

Each event has a `type` tag (`event.TYPE`, and `to_json()["type"]`). Readers meet new event types as
auger grows (adding one is a compatible change): ignore the ones you do not know. `Run.envelopes()`
gives each event in its `Envelope` (seq, submission id, the spawn call of a sub-agent's event).
"""

from auger.protocol.envelope import Envelope
from auger.protocol.events import (
    AgentMessage, ApprovalDetails, ApprovalRequest, ApprovalResolved, BackendChanged, ContextCompacted, Diagnostic,
    ElicitationForm, EnteredReviewMode, Event, ExitedReviewMode, ItemEnded, ItemStarted, LoopDetected, MessageDelta,
    ModeChanged, ModelChanged,
    PendingChanged, PlanStep, PlanUpdated, RateLimits, RateLimitWindow, ReasoningDelta, Retrying, RolledBack,
    SecretRedacted, SessionConfigured, SessionTitle, ShutdownComplete, StructuredOutput, TokenUsage, ToolCallEnded,
    ToolCallStarted, ToolOutputDelta, TurnContextChanged, TurnDiff, TurnEnded, TurnStarted, TurnUndone, Usage,
    UserInputInjected, WarningEvent,
)
from auger.protocol.items import ChangedFile
from auger.protocol.vocab import ApprovalOption, Effect, Mode, PlanStatus, Refusal, Severity, TurnEndReason

__all__ = [
    "AgentMessage", "ApprovalDetails", "ApprovalOption", "ApprovalRequest", "ApprovalResolved", "BackendChanged",
    "ChangedFile", "ContextCompacted", "Diagnostic", "Effect", "ElicitationForm", "EnteredReviewMode", "Envelope",
    "Event", "ExitedReviewMode", "ItemEnded", "ItemStarted",
    "LoopDetected", "MessageDelta", "Mode", "ModeChanged", "ModelChanged", "PendingChanged", "PlanStatus",
    "PlanStep", "PlanUpdated", "RateLimitWindow", "RateLimits", "ReasoningDelta", "Refusal", "Retrying",
    "RolledBack", "SecretRedacted", "SessionConfigured", "SessionTitle", "Severity", "ShutdownComplete",
    "StructuredOutput", "TokenUsage",
    "ToolCallEnded", "ToolCallStarted", "ToolOutputDelta", "TurnContextChanged", "TurnDiff", "TurnEndReason",
    "TurnEnded", "TurnStarted", "TurnUndone", "Usage", "UserInputInjected", "WarningEvent",
]
