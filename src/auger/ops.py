"""The ops a client sends a session — what `Session.submit` takes — as every front end sends them.

These are the protocol's own classes (docs/protocol.md; `auger schema` prints their JSON Schema), the
same ones the terminal, the web UI, ACP and `auger serve` send, so a program drives a session exactly as
they do. `Session.run` is the way for a prompt whose result you want; `submit` is for the rest, or for a
client that follows the session with `Session.follow`:

    await session.submit(auger.ops.SetMode(auger.events.Mode("plan")))
    await session.submit(auger.ops.ApprovalDecision(request.request_id, auger.events.ApprovalOption("approve")))

Each op has a `type` tag (`op.TYPE`, and `to_json()["type"]`).
"""

from auger.protocol.ops import (
    AddMcpServer, ApprovalDecision, CancelAgents, Compact, Interrupt, Op, PendingApply, PendingDiscard, PendingRewind,
    Redo, RemoveMcpServer, Rollback, RunShell, SetBackend, SetMode, SetModel, SetTurnContext, Shutdown, Undo,
    UserTurn,
)

__all__ = [
    "AddMcpServer", "ApprovalDecision", "CancelAgents", "Compact", "Interrupt", "Op", "PendingApply",
    "PendingDiscard", "PendingRewind", "Redo", "RemoveMcpServer", "Rollback", "RunShell", "SetBackend", "SetMode",
    "SetModel", "SetTurnContext", "Shutdown", "Undo", "UserTurn",
]
