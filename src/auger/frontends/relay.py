"""Ops left in the store for the process that runs a session, as `auger serve` writes them and a terminal
handing its session over (tui/handoff.py) or the server adopting it (server/sessions.py) reads them.

A session handed from a terminal to a server runs in the terminal's process until its turn ends; meanwhile
the server takes every op its clients send for it and leaves it in the store's `session_ops`, with the
submission id it was sent under (so the events it causes carry it), and the terminal's process takes
them and applies them. What is left when the terminal lets go, the server applies as it opens the session.
When the server is asked to take over a session another process holds, it also leaves a `handoff` note
naming itself, so a terminal that did not ask (`auger handoff ID` from elsewhere) hands it over too.

Rows written before this format — a bare op (what the server leaves for a fleet worker's session) — are
read as an op without a submission id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from auger.protocol.jsontext import dumps
from auger.protocol.ops import ApprovalDecision, Op

if TYPE_CHECKING:
    from auger.engine.session.session import Session

HANDOFF = "handoff"


@dataclass(frozen=True)
class Relayed:
    """One row of `session_ops`: an op and its submission id, or a note that a server takes the session
    over (`handoff`: its URL)."""

    op: Op | None = None
    submission_id: str | None = None
    handoff: str | None = None


def relayed_op(op: Op, submission_id: str) -> str:
    return dumps({"relayed": op.to_json(), "submission_id": submission_id})


def handoff_note(url: str) -> str:
    return dumps({HANDOFF: url})


def read(text: str) -> Relayed | None:
    """The row, or None when it is neither (the table is not trusted: it is skipped)."""
    try:
        data = json.loads(text)
        if not isinstance(data, dict):
            return None
        if isinstance(data.get(HANDOFF), str) and len(data) == 1:
            return Relayed(handoff=data[HANDOFF])
        if "relayed" in data:
            submission_id = data.get("submission_id")
            return Relayed(Op.from_json(data["relayed"]), submission_id if isinstance(submission_id, str) else None)
        return Relayed(Op.from_json(data))
    except (ValueError, KeyError, TypeError):
        return None


def apply(session: Session, relayed: Relayed, *, always: bool = True) -> str | None:
    """Apply a relayed op to a live engine session, as the server does: an approval answered at once (the
    first answer wins), anything else submitted. Without `always`, an "always" answer is not taken (in a
    terminal's session it would save a rule in its user's rules.toml, and an answer that comes through a
    server never does). None when applied, else why not, in one line."""
    op = relayed.op
    if op is None:
        return None
    if isinstance(op, ApprovalDecision):
        if op.decision == "approve_always" and not always:
            return ("an 'always' answer sent through the server is not taken (it would save a rule in your "
                    "rules.toml): answer once or for the session")
        return session.decide(op, relayed.submission_id)
    try:
        session.submit(op, relayed.submission_id)
    except RuntimeError:
        return "the session is shutting down"
    return None
