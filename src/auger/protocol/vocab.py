"""The protocol's closed vocabularies: trust modes, effects, turn-end reasons, approval options, severities.

They are `StrEnum`s so the JSON form is the plain string it always was and a member still equals its
string (`Mode.AUTO == "auto"`): code that compares strings keeps working while the schema can list
the allowed values. They live here, at the bottom of the import graph, so policy/ and tools/ can
share one definition with the protocol instead of each spelling the strings.
"""

from __future__ import annotations

from enum import StrEnum


class Mode(StrEnum):
    """How much the agent may do without asking (see docs/safety.md)."""

    PLAN = "plan"
    SAFE = "safe"
    AUTO = "auto"


class Effect(StrEnum):
    """What a tool call can do to the world, from harmless to irreversible."""

    READ_ONLY = "read_only"
    LOCAL_MUTATION = "local_mutation"
    REMOTE_ACTION = "remote_action"
    DESTRUCTIVE = "destructive"


class TurnEndReason(StrEnum):
    """Why a turn ended: it finished, the user (or a signal) stopped it, or it failed."""

    COMPLETE = "complete"
    CANCELLED = "cancelled"
    ERROR = "error"


class ApprovalOption(StrEnum):
    """The answers an approval request may offer; each request lists the ones that apply."""

    APPROVE = "approve"
    APPROVE_SESSION = "approve_session"
    APPROVE_ALWAYS = "approve_always"
    APPROVE_WRITABLE_ROOT = "approve_writable_root"  # approve, and let commands write beneath the details' root
    DENY = "deny"
    ABORT = "abort"
    CONTINUE = "continue"  # the loop guard's question
    STOP = "stop"
    ACCEPT = "accept"  # an MCP server's elicitation: answer it (the answer goes in the decision's feedback)
    DECLINE = "decline"
    CANCEL = "cancel"


class Refusal(StrEnum):
    """Why a tool call never ran. Only `unapproved` is a question nobody answered yes to: a headless run
    has nobody to ask, so approving what would be asked (`approve_all`) changes it; the others are the
    user's own policy at work."""

    POLICY = "policy"  # a rule or the trust mode forbids it
    HOOK = "hook"  # a before_tool hook blocked it
    UNAPPROVED = "unapproved"  # it needed approval and got none: nobody to ask (headless), or the user said no


class PlanStatus(StrEnum):
    """Where one step of the model's plan stands."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"


class Severity(StrEnum):
    """How serious a language server says a problem is (LSP's DiagnosticSeverity, by name)."""

    ERROR = "error"
    WARNING = "warning"
    INFORMATION = "information"
    HINT = "hint"
