"""The errors the public API raises. Every one is an `AugerError`:

* AugerError
  + ConfigError ........ the provider, model, base URL, key, mode or project directory cannot be used
  + SessionNotFound .... no stored session has that id (or the prefix names several)
  + SessionBusy ........ the session is open elsewhere: in this process, another process, a server
  + SessionClosed ...... the session was shut down before it could do what was asked
  + Refused ............ the session refused an action and said why (undo with nothing to undo, …)
  + StoreError ......... the session store cannot be read or written (a full disk)
  + RemoteError ........ `auger serve` cannot be reached, or answered in a way no other error names
  + TurnError .......... a turn ended without completing; `.result` holds what it did
    - TurnFailed ....... it ended in error: the model, a budget, the store (the message says which)
    - TurnInterrupted .. it was interrupted: by you, another client, a server shutting down
    - ApprovalFailed ... your approval callback raised: nothing was approved, the turn was aborted,
                         and your exception is the `__cause__`

Failures of the model (a rejected key, an unknown model, a rate limit that outlasted the retries) are not
an exception of their own: the engine reports them as the end of a turn, so they are a `TurnFailed`
whose message is the provider's. Calls the policy or your callback denied are no error at all: the
model is told and carries on, and the `tool_call_ended` event says `denied`.

This module imports nothing of the engine: the engine's own exceptions are mapped to these where the
API calls it (auger/_local.py, auger/_remote.py), so they never leak to a caller.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from auger._types import Result

__all__ = [
    "AugerError", "ConfigError", "SessionNotFound", "SessionBusy", "SessionClosed", "Refused", "StoreError",
    "RemoteError", "TurnError", "TurnFailed", "TurnInterrupted", "ApprovalFailed",
]


class AugerError(Exception):
    """Base class of every error the public API raises; its message is one line for a person."""


class ConfigError(AugerError):
    """What the session was asked to run with cannot be used; the message says what to change."""


class SessionNotFound(AugerError):
    """No stored session has this id, or the prefix given matches more than one."""


class SessionBusy(AugerError):
    """The session is already open: in this process, in another auger process, or in the server."""


class SessionClosed(AugerError):
    """The session was shut down (closed, or by a server) before it did what was asked."""


class Refused(AugerError):
    """The session refused an action (undo, redo, a fork's cut, a server's limits); the message says why."""


class StoreError(AugerError):
    """The session store cannot be used; the message names the file and the cause."""


class RemoteError(AugerError):
    """The server could not be reached or answered an error no other class names; `status` is its HTTP
    status (None when there was no answer)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class TurnError(AugerError):
    """A turn ended without completing. `reason` is the turn's end reason (`error`, `cancelled`), and
    `result` what it did up to then: its events, the text of its last reply, the files it changed."""

    def __init__(self, message: str, result: Result) -> None:
        super().__init__(message)
        self.result = result

    @property
    def reason(self) -> str:
        return self.result.reason


class TurnFailed(TurnError):
    """The turn ended in error; the message is the engine's (or the provider's) reason."""


class TurnInterrupted(TurnError):
    """The turn was interrupted before it completed."""


class ApprovalFailed(TurnError):
    """The approval callback raised. The request was answered with its most cautious option (nothing was
    approved, the turn aborted); the callback's exception is `__cause__`."""
