"""The models a session calls: its own model, the fallback chain its turns' calls move along, and the small
model the small jobs run on.

* The session's model (`client`) is the one it was opened or switched to (`set_model`): what it records, tells
  the model in its environment and shows in `session_configured`.
* Its turns call through the fallback chain when one is configured (engine/turn/fallback.py): a chain starts
  at the session's model and stays on a fallback once it moved, for later turns too, until its cool-down.
* The small jobs — titles, compaction summaries, the goal checker — run on the small model when one is
  configured (`small_model` in the provider's table, or the global key: models/registry.py `small_model`),
  else on the session's model; the goal checker on `goal_model` where that is set. Each client is made at
  its first use, with its provider's own address and key.
  A small model that cannot be set up is said once, and the job runs on the session's model.

Every call's usage is charged with the model that made it (`token_usage.model`, the store's usage rows), so
`auger sessions --cost` shows what each model cost.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from auger.engine.turn.fallback import ModelChain, chain_for
from auger.models.base import ModelClient

if TYPE_CHECKING:
    from auger.config import Config


class SessionModels:
    def __init__(self, config: Config, client: ModelClient, warnings: list[str]) -> None:
        self.config = config
        self.client = client
        self.chain: ModelChain | None = chain_for(config, client, warnings)
        self._asides: dict[tuple[str, str], ModelClient] = {}  # (provider, model) -> the small or checker model
        self._refused: set[tuple[str, str]] = set()  # those that could not be set up (said once)

    @property
    def for_turns(self) -> ModelClient:
        """What a turn calls: the fallback chain, or the session's model."""
        return self.chain if self.chain is not None else self.client

    def small(self) -> tuple[ModelClient | None, str | None]:
        """The small jobs' client — None when no small model is configured, or it cannot be set up: the job then
        runs on the session's model — and a warning to show the first time it could not be."""
        from auger.models.registry import small_model

        return self._aside("small model", small_model(self.config, self.client.provider))

    def checker(self) -> tuple[ModelClient, str | None]:
        """The client that judges a goal in words: `goal_model`, else the small model, else the session's."""
        from auger.models.registry import parse_model_ref, registry_for

        chosen = parse_model_ref(self.config.goal_model or "", self.client.provider,
                                 list(registry_for(self.config).providers))
        client, problem = self._aside("goal model", chosen) if chosen is not None else self.small()
        return client or self.client, problem

    def _aside(self, what: str, chosen: tuple[str, str] | None) -> tuple[ModelClient | None, str | None]:
        """The client of a model other than the session's, made once (None: `chosen` is none, the session's
        own, or cannot be set up — said once, as the second value)."""
        from auger.models.registry import ProviderError, client_for

        if chosen is None or chosen == (self.client.provider, self.client.model):
            return None, None
        if chosen in self._asides:
            return self._asides[chosen], None
        if chosen in self._refused:
            return None, None
        provider, model = chosen
        try:  # its own address and key (registry.provider_for), never the session's provider's
            self._asides[chosen] = client_for(dataclasses.replace(self.config, provider=provider, model=model))
        except ProviderError as exc:
            self._refused.add(chosen)
            return None, (f"{what} {provider}:{model} cannot be used ({exc}); its jobs run on "
                          f"{self.client.provider}:{self.client.model}")
        return self._asides[chosen], None

    async def switch(self, client: ModelClient, warnings: list[str]) -> ModelClient:
        """The session's model is `client` from now on (its chain made anew); the previous one, for its owner to
        close once nothing uses it."""
        previous, self.client = self.client, client
        if self.chain is not None:
            await self.chain.aclose()
        self.chain = chain_for(self.config, client, warnings)
        self._refused.clear()  # the small model may be another provider's now
        return previous

    async def aclose(self) -> None:
        """Close the fallbacks' and the small model's clients (the session's own is closed by the session)."""
        if self.chain is not None:
            await self.chain.aclose()
        for client in self._asides.values():
            await client.aclose()
        self._asides.clear()
