"""The last check on what leaves for a model: a request body that carries a value auger knows is secret is
not sent.

Every wire client serialises its request in one place (models/http.py `SseModelClient.stream`); the check
runs on those bytes, whatever built them, so no path into a request — the history, the instructions, a tool
schema an MCP server wrote, a part added later — is left out. It looks for the values secrets/known.py lists
(provider keys, MCP credentials, secret variables), as written and in the forms a value takes inside JSON
or after a command encoded it; the turn then ends with an error that says which variable's value it was
(never the value), and nothing is sent.

It does not look for shapes: a request carries what the model wrote and what the user typed, and a token the
user gave the model on purpose, or a made-up example key in a test the model writes, is theirs to send
(docs/safety.md). Text from outside reaches the conversation only through redaction (secrets/scrub.py), so
this check finds something only when a known value got around it.
"""

from __future__ import annotations

from typing import Sequence

from auger.secrets.known import KnownSecret
from auger.secrets.redact import Needles


class OutgoingCheck:
    """Called with a request body about to be sent: None, or why it is not sent."""

    def __init__(self, known: Sequence[KnownSecret]) -> None:
        self._known = known
        self._labels = {secret.kind: secret.label for secret in known}
        self._needles: Needles | None = None  # built at the first request

    def __bool__(self) -> bool:
        return bool(self._known)

    def __call__(self, body: str) -> str | None:
        if self._needles is None:
            self._needles = Needles()
            for secret in self._known:
                self._needles.add(secret.kind, secret.value)
        kind = self._needles.first(body)
        if kind is None:
            return None
        label = self._labels.get(kind.split(".")[0], "a secret auger knows")
        return (f"request not sent: it carries {label}, which auger never sends to a model. Nothing was sent; "
                "rewind the conversation past the message that holds it (/rollback), or start a new session")
