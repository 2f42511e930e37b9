"""The fallback chain: when a provider fails in a way no retry mends, the call goes on with the next model of
the chain (`fallback = ["provider:model", ...]`, per model or for every model), and the session stays there
— or, with `fallback_cooldown`, tries the first one again once that many seconds have passed.

Which failures move a call (`switch_reason`), and why only those:

* an overloaded provider (HTTP 529, `overloaded_error`, a 503 that says it is overloaded) and a 429 that says
  its quota is used up without a Retry-After: moved at once, without the retry policy's waits, since no wait
  the client can afford mends them (`give_up`);
* a key the provider refuses (401, 403): the same key is refused again;
* anything retryable that still fails once the retry policy is spent (5xx, 429, a dropped connection).

Never an error in the request itself (400 and the other 4xx, a context window exceeded, an image refused):
another provider would be sent the same request, and it is the request that must change.

The next model gets the same conversation: a request is wire-neutral items (models/base.py) that each wire
client writes in its own format, as a session resumed on another provider is (engine/session/resume.py);
reasoning only its own wire can verify is left out by the others. The caller discarded the failed attempt's
partial reply (engine/turn/model_call.py), so nothing is lost or sent twice. A model's client is made when the
chain first reaches it, with that provider's own address and key (models/registry.py `provider_for`): a key
set up for one host never goes to another. A fallback that cannot be set up (its key is not set) is passed
over, and said so.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, AsyncIterator, Callable, Sequence

from auger.models.base import ContextWindowExceeded, ImageRejected, ModelClient, ModelError, ModelRequest, StreamEvent
from auger.models.registry import ProviderError

if TYPE_CHECKING:
    from auger.config import Config

_OVERLOADED_CODES = ("overloaded_error", "overloaded", "server_is_overloaded")


@dataclass(frozen=True)
class Switch:
    """The chain moved from one model to another (`provider:model` each), why, and the error that moved it
    ("" for the return to the first model after the cool-down)."""

    from_: str
    to: str
    reason: str
    error: str = ""


def immediate_reason(error: ModelError) -> str | None:
    """Why `error` moves a call to the next model without waiting for the retry policy, or None."""
    if isinstance(error, (ContextWindowExceeded, ImageRejected)):
        return None
    status, code = error.status, (error.code or "").lower()
    text = f"{code} {error}".lower()
    if status in (401, 403):
        return f"authentication failed (HTTP {status})"
    if status == 429 and error.retry_after is None and "quota" in text:
        return "quota exhausted"
    if status == 529 or code in _OVERLOADED_CODES or (status == 503 and "overloaded" in text):
        return "overloaded" + (f" (HTTP {status})" if status else "")
    return None


def switch_reason(error: ModelError, attempts: int) -> str | None:
    """Why `error`, as the retry policy left it, moves a call to the next model; None: it is the request's
    fault (a 400), and the call fails here."""
    reason = immediate_reason(error)
    if reason is not None:
        return reason
    if error.retryable:  # the retry policy is spent: the provider is down for as long as it waited
        return f"still failing after {attempts} attempt{'s' if attempts > 1 else ''}" + (
            f" (HTTP {error.status})" if error.status else "")
    return None


def label(provider: str, model: str) -> str:
    return f"{provider}:{model}"


class ModelChain:
    """A session's model and the models it falls back to. It is a ModelClient (the model it is on now
    answers `stream`), so a turn and its sub-agents use it as their client; `call_model` moves along it."""

    def __init__(self, first: ModelClient, entries: Sequence[tuple[str, str]],
                 make: Callable[[str, str], ModelClient], *, cooldown: float = 0.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._entries = [(first.provider, first.model)]
        self._entries += [e for e in dict.fromkeys(entries) if e != self._entries[0]]
        self._clients: dict[int, ModelClient] = {0: first}
        self._make = make
        self._cooldown = cooldown
        self._clock = clock
        self._index = 0
        self._since = 0.0  # when the chain left the first model
        self.passed_over: list[str] = []  # fallbacks that could not be set up, and why

    @property
    def client(self) -> ModelClient:
        """The model the chain is on now."""
        return self._clients[self._index]

    @property
    def provider(self) -> str:
        return self.client.provider

    @property
    def model(self) -> str:
        return self.client.model

    @property
    def labels(self) -> list[str]:
        return [label(*entry) for entry in self._entries]

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        return self.client.stream(request)

    def give_up(self, error: ModelError) -> bool:
        """Whether a retry of `error` should not be waited for: another model can take the call now."""
        return self._index + 1 < len(self._entries) and immediate_reason(error) is not None

    def fail_over(self, error: ModelError, attempts: int) -> Switch | None:
        """Move to the next model that can be set up, after `error`; None when `error` is the request's own
        fault or no model is left (the call then fails with it)."""
        reason = switch_reason(error, attempts)
        if reason is None:
            return None
        previous = label(self.provider, self.model)
        for index in range(self._index + 1, len(self._entries)):
            if self._usable(index):
                self._index, self._since = index, self._clock()
                return Switch(previous, label(self.provider, self.model), reason, str(error))
        return None

    def back_to_first(self) -> Switch | None:
        """After the cool-down, the first model again (it is tried: failing, the chain moves on again)."""
        if self._index == 0 or not self._cooldown or self._clock() - self._since < self._cooldown:
            return None
        previous = label(self.provider, self.model)
        self._index = 0
        return Switch(previous, label(self.provider, self.model), f"the {self._cooldown:g}s cool-down is over")

    def _usable(self, index: int) -> bool:
        if index in self._clients:
            return True
        provider, model = self._entries[index]
        try:
            self._clients[index] = self._make(provider, model)
        except ProviderError as exc:
            self.passed_over.append(f"{label(provider, model)}: {exc}")
            return False
        return True

    async def aclose(self) -> None:
        """Close the fallbacks' clients (the first one is its owner's to close)."""
        for index, client in list(self._clients.items()):
            if index:
                await client.aclose()
                del self._clients[index]


def chain_for(config: Config, client: ModelClient, warnings: list[str]) -> ModelChain | None:
    """The session's fallback chain for `client`: its model's own `fallback` (in `[providers.NAME.models.MODEL]`),
    else the configured `fallback`; None without one. What may not be meant as written goes to `warnings`."""
    from auger.models.registry import client_for, model_info, parse_model_ref, registry_for

    registry = registry_for(config)
    names = list(model_info(client.model, config, client.provider).fallback) or list(config.fallback)
    entries = []
    for text in names:
        entry = parse_model_ref(text, client.provider, list(registry.providers))
        if entry is None:
            continue
        head, sep, _ = text.strip().partition(":")
        if sep and entry[0] != head:
            warnings.append(f"fallback: {head!r} is no provider: {text.strip()!r} is read as model {entry[1]!r} of "
                            f"provider {entry[0]!r} (`auger providers` lists them)")
        entries.append(entry)
    if not entries:
        return None

    def make(provider: str, model: str) -> ModelClient:
        # its own address and key (registry.provider_for), never the session's provider's
        return client_for(dataclasses.replace(config, provider=provider, model=model))

    chain = ModelChain(client, entries, make, cooldown=config.fallback_cooldown)
    if len(chain.labels) == 1:
        warnings.append(f"fallback: every entry names the session's own model ({chain.labels[0]}); no fallback")
        return None
    return chain
