"""Built-in providers and how to build a client for one.

A provider is a wire API plus where it lives and which env var holds its key.
Local servers need no key. Building a client never imports a vendor SDK.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from typing import TYPE_CHECKING

from auger.models.base import ModelClient

if TYPE_CHECKING:
    from auger.config import Config


class ProviderError(Exception):
    """A provider that cannot be used as configured; the message says what to do."""


@dataclass(frozen=True)
class Provider:
    name: str
    wire: str  # "openai_chat"
    base_url: str
    key_env: str | None  # where the API key is read from; None: never send one
    default_model: str | None = None
    label: str = ""
    key_required: bool = False  # hosted APIs: refuse to start without a key rather than fail remotely


BUILTIN: dict[str, Provider] = {p.name: p for p in (
    Provider("openai", "openai_chat", "https://api.openai.com/v1", "OPENAI_API_KEY", "gpt-5", "OpenAI", True),
    Provider("openrouter", "openai_chat", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", None, "OpenRouter",
             True),
    Provider("ollama", "openai_chat", "http://localhost:11434/v1", None, None, "Ollama (local)"),
    Provider("vllm", "openai_chat", "http://localhost:8000/v1", None, None, "vLLM (local)"),
    Provider("lmstudio", "openai_chat", "http://localhost:1234/v1", None, None, "LM Studio (local)"),
    Provider("llamacpp", "openai_chat", "http://localhost:8080/v1", None, None, "llama.cpp server (local)"),
    Provider("openai-compatible", "openai_chat", "", "OPENAI_API_KEY", None, "any OpenAI-compatible server"),
    # ^ sends OPENAI_API_KEY when it is set; self-hosted servers often need none
)}


@dataclass(frozen=True)
class ModelInfo:
    """What the engine must know about a model. Prices are USD per million tokens; None = unknown."""

    name: str
    context_window: int = 128_000
    max_output_tokens: int = 16_384
    input_price: float | None = None
    cached_input_price: float | None = None
    output_price: float | None = None


# Known models; anything else gets the defaults above (override with model_context_window).
MODELS: dict[str, ModelInfo] = {m.name: m for m in (
    ModelInfo("gpt-5", 400_000, 128_000, 1.25, 0.125, 10.0),
    ModelInfo("gpt-5-mini", 400_000, 128_000, 0.25, 0.025, 2.0),
    ModelInfo("gpt-4.1", 1_047_576, 32_768, 2.0, 0.5, 8.0),
    ModelInfo("gpt-4.1-mini", 1_047_576, 32_768, 0.4, 0.1, 1.6),
    ModelInfo("gpt-4o", 128_000, 16_384, 2.5, 1.25, 10.0),
    ModelInfo("o4-mini", 200_000, 100_000, 1.1, 0.275, 4.4),
    ModelInfo("claude-sonnet-4-5", 200_000, 64_000, 3.0, 0.3, 15.0),
    ModelInfo("claude-opus-4-1", 200_000, 32_000, 15.0, 1.5, 75.0),
    ModelInfo("claude-haiku-4-5", 200_000, 64_000, 1.0, 0.1, 5.0),
)}


def model_info(model: str) -> ModelInfo:
    """Exact name, else the longest known name the model starts with (dated snapshots), else defaults."""
    if model in MODELS:
        return MODELS[model]
    base = model.split("/")[-1]
    matches = [name for name in MODELS if base.startswith(name)]
    return MODELS[max(matches, key=len)] if matches else ModelInfo(model)


def resolve_provider(name: str, base_url: str | None = None, key_env: str | None = None) -> Provider:
    provider = BUILTIN.get(name)
    if provider is None:
        raise ProviderError(f"unknown provider '{name}'; known providers: {', '.join(BUILTIN)}")
    if base_url:
        provider = replace(provider, base_url=base_url)
    if key_env:
        provider = replace(provider, key_env=key_env)
    if not provider.base_url:
        raise ProviderError(f"provider '{name}' needs a base URL: pass --base-url URL or -c base_url=URL")
    return provider


def create_client(provider: Provider, model: str | None, *, idle_timeout: float = 300.0,
                  env: dict[str, str] | None = None) -> ModelClient:
    """A ready client, or ProviderError naming exactly what is missing."""
    env = os.environ if env is None else env
    model = model or provider.default_model
    if not model:
        raise ProviderError(f"no model chosen for provider '{provider.name}': pass --model NAME or -c model=NAME")
    api_key = env.get(provider.key_env) if provider.key_env else None
    if not api_key and provider.key_required:
        local = provider.base_url.startswith(("http://localhost", "http://127.", "http://[::1]"))
        if not local:
            raise ProviderError(
                f"{provider.key_env} is not set: export it with your {provider.label or provider.name} API key, "
                "or use a local server (--provider ollama, or --base-url http://localhost:PORT/v1)"
            )
    if provider.wire == "openai_chat":
        from auger.models.openai_chat import OpenAIChatClient

        return OpenAIChatClient(provider=provider.name, model=model, base_url=provider.base_url,
                                api_key=api_key, key_env=provider.key_env, idle_timeout=idle_timeout)
    raise ProviderError(f"provider '{provider.name}' uses wire API '{provider.wire}', which this build cannot speak")


def client_for(config: Config, env: dict[str, str] | None = None) -> ModelClient:
    """The client the configuration asks for (provider, base URL, key env, model, timeouts)."""
    provider = resolve_provider(config.provider, config.base_url, config.api_key_env)
    return create_client(provider, config.model, idle_timeout=config.stream_idle_timeout, env=env)
