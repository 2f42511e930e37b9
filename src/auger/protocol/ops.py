"""Operations a client submits to a Session."""

from __future__ import annotations

from dataclasses import field

from auger.protocol._data import Record, family, tag


@family
class Op(Record):
    pass


@tag("user_turn")
class UserTurn(Op):
    text: str
    images: list[str] = field(default_factory=list)


@tag("interrupt")
class Interrupt(Op):
    pass


@tag("approval_decision")
class ApprovalDecision(Op):
    """Answers an ApprovalRequest event. `decision` is one of the request's `options`."""

    request_id: str
    decision: str
    feedback: str | None = None


@tag("set_mode")
class SetMode(Op):
    """Switch the trust mode (plan | safe | auto); applies from the next tool call."""

    mode: str


@tag("shutdown")
class Shutdown(Op):
    pass
