"""One resume policy for every front end: which provider and model a stored session continues with.

A session continues on the provider and model it was recorded with. When that provider cannot be
used here (no key, disabled, unknown), resuming is refused with a message that names it and says how
to continue elsewhere: silently answering with another model would change the conversation's author.
Another provider or model is used only when the caller names it explicitly; the switch is then
recorded (session record, environment item, `model_changed` event).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Mapping

from auger.models.registry import ProviderError

if TYPE_CHECKING:
    from auger.config import Config
    from auger.models.base import ModelClient
    from auger.store.base import SessionRecord

SWITCH_HINT = ("continue it with another provider only by asking for the switch explicitly "
               "(auger: pass --provider NAME --model NAME; library: auger.resume(ID, provider=NAME, model=NAME))")


class ResumeRefused(ProviderError):
    """The stored session cannot continue as asked; the message names its provider and the way out."""


def resume_config(record: SessionRecord, config: Config, *, provider: str | None = None,
                  model: str | None = None) -> Config:
    """The configuration to continue `record` with: the recorded provider and model, except what the
    caller names explicitly (a provider alone takes the configured model; a model alone stays on the
    recorded provider). The configured base URL and key variable apply only when that is the provider
    the user's settings chose (models/registry.py `provider_for`): another one uses its own."""
    if provider is None:
        return dataclasses.replace(config, provider=record.provider, model=model or record.model)
    return dataclasses.replace(config, provider=provider, model=model or config.model)


def resume_client(record: SessionRecord, config: Config, env: Mapping[str, str] | None = None) -> ModelClient:
    """The client for `resume_config`'s answer; ResumeRefused when the recorded provider is unusable here."""
    from auger.models.registry import client_for

    try:
        return client_for(config, env)
    except ResumeRefused:
        raise
    except ProviderError as exc:
        if config.provider != record.provider:
            raise  # a provider the caller chose: its own error says what is wrong
        raise ResumeRefused(f"session {record.id[:8]} was recorded with provider '{record.provider}' (model "
                            f"'{record.model}'), which cannot be used here: {exc}; {SWITCH_HINT}") from None


def check_client(record: SessionRecord, client: ModelClient, *, switch: bool) -> bool:
    """Whether resuming `record` with `client` is a switch; ResumeRefused when it is one nobody asked for."""
    switching = (client.provider, client.model) != (record.provider, record.model)
    if switching and not switch:
        raise ResumeRefused(f"session {record.id[:8]} was recorded with provider '{record.provider}' (model "
                            f"'{record.model}'), not '{client.provider}' (model '{client.model}'); {SWITCH_HINT}")
    return switching
