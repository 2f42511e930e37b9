"""A stand-in for auger's own model in a session another agent runs (a backend, auger/backends).

Such a session needs no model of auger's for its turns, so one that cannot be set up here (no API
key, no base URL) must not stop it from opening. The stand-in is recorded as the session's model;
whatever would call it — a turn after switching back to auger's own loop, a compaction, a title —
fails with the reason it could not be set up, which is what the user has to fix.
"""

from __future__ import annotations

from typing import AsyncIterator

from auger.models.base import ModelError, ModelRequest, StreamEvent


class UnconfiguredClient:
    def __init__(self, provider: str, model: str, reason: str) -> None:
        self.provider = provider
        self.model = model
        self.reason = reason

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        raise ModelError(f"auger's own model is not set up: {self.reason}", retryable=False)
        yield  # an async generator, like every client's stream

    async def aclose(self) -> None:
        pass
