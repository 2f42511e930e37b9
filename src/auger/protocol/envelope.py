"""The envelope every event travels in: which session, where in its stream, and what caused it.

A session numbers its events 1, 2, 3… (`seq`, contiguous, persisted with the event), so a client
that saw up to N can ask for exactly what came after N, even after the process restarted. The
`submission_id` names the op (returned by `Session.submit`) whose handling emitted the event (None
when the engine acted on its own, e.g. `session_configured`); `parent_call_id` names the tool call
an event belongs under: the parent agent's spawn call for a sub-agent's events, the `run_code` call for
the calls its program makes.

On the wire (`auger exec --json`, the store) an envelope is ONE flat JSON object: the event's own
fields, `type` first, then the envelope's fields. Older readers that only know events keep working;
no event may have a field named like an envelope field (`session_configured.session_id` is the same
value, so it is the one allowed overlap).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from auger.protocol.events import Event
from auger.protocol.jsontext import dumps

ENVELOPE_FIELDS = ("session_id", "seq", "submission_id", "parent_call_id", "time")


@dataclass(frozen=True)
class Envelope:
    session_id: str
    seq: int
    event: Event
    submission_id: str | None = None
    parent_call_id: str | None = None
    time: float = 0.0  # Unix seconds when the event was emitted

    def to_json(self) -> dict[str, Any]:
        return {**self.event.to_json(), "session_id": self.session_id, "seq": self.seq,
                "submission_id": self.submission_id, "parent_call_id": self.parent_call_id, "time": self.time}

    def text(self) -> str:
        """The envelope as its one JSON line (`jsontext.dumps` of `to_json`), encoded at the first call and
        kept: the store, every SSE client of the session and `exec --json` write the same text, and an
        envelope never changes (its event is frozen too)."""
        found: str | None = self.__dict__.get("_text")
        if found is None:
            found = dumps(self.to_json())
            object.__setattr__(self, "_text", found)  # a cache beside the fields, not one of them
        return found

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Envelope:
        """The envelope a flat JSON line holds; ValueError when it is not one."""
        seq, session_id = data.get("seq"), data.get("session_id")
        if not isinstance(seq, int) or isinstance(seq, bool) or not isinstance(session_id, str):
            raise ValueError("not an event envelope: needs an integer 'seq' and a string 'session_id'")
        time = data.get("time", 0.0)
        return cls(session_id, seq, Event.from_json(data), _optional_str(data.get("submission_id")),
                   _optional_str(data.get("parent_call_id")), float(time) if isinstance(time, (int, float)) else 0.0)


def _optional_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
