"""Providers and models: built-ins, user configuration on top, and how to build a client.

A provider is a wire API plus where it lives and which env var holds its key. The
user's config file may add providers, `extends` a built-in, change a base URL or
key variable, disable one, or describe models (context window, output limit,
prices). Nothing in a config can stop the program: every problem becomes a
diagnostic naming the provider and the key, and a provider whose definition is
broken is marked "config error" while every other provider keeps working.
Building a client never imports a vendor SDK.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, TypedDict

from auger.models.base import ModelClient
from auger.protocol.events import Usage

if TYPE_CHECKING:
    from auger.config import Config

WIRES = ("openai_chat", "openai_responses", "anthropic", "replay")
LOCAL_PREFIXES = ("http://localhost", "http://127.", "http://[::1]")


class ProviderError(Exception):
    """A provider that cannot be used as configured; the message says what to do."""


@dataclass(frozen=True)
class ModelInfo:
    """What the engine must know about a model. Prices are USD per million tokens; None = unknown."""

    name: str
    context_window: int = 128_000
    max_output_tokens: int = 16_384
    input_price: float | None = None
    cached_input_price: float | None = None
    output_price: float | None = None
    supports_tools: bool = True
    supports_parallel_tools: bool = True
    supports_images: bool = True
    reasoning_efforts: tuple[str, ...] = ()  # what the API accepts as reasoning effort; () = not known
    known: bool = True  # False: defaults for a model nobody described
    # "provider:model" entries a call goes on with when this model's provider fails (engine/turn/fallback.py);
    # () = the configured `fallback`
    fallback: tuple[str, ...] = ()

    def cost(self, usage: Usage) -> float | None:
        """Money for one call's usage, or None when a needed price is unknown (never a silent zero)."""
        if self.input_price is None or self.output_price is None:
            return None
        cached = usage.cached_input_tokens
        cached_price = self.cached_input_price if self.cached_input_price is not None else self.input_price
        fresh = max(0, usage.input_tokens - cached)
        return (fresh * self.input_price + cached * cached_price + usage.output_tokens * self.output_price) / 1e6


def add_cost(total: float | None, cost: float | None) -> float | None:
    """Sum money where any unknown part makes the whole unknown: a partial sum would read as a real total."""
    return None if total is None or cost is None else total + cost


async def stored_usage(store, session_id: str, config: Config | None = None, *, inherited: bool = False
                       ) -> tuple[Usage, float | None]:
    """A stored session's own usage so far and its cost at today's prices, from one read of its usage rows;
    with `inherited`, those of what a fork took over from its source."""
    usage = Usage()
    total: float | None = 0.0
    for share in await stored_costs(store, session_id, config, inherited=inherited):
        usage += share.usage
        total = add_cost(total, share.cost)
    return usage, total


async def stored_cost(store, session_id: str, config: Config | None = None, *, inherited: bool = False
                      ) -> float | None:
    """A stored session's own cost so far (see `stored_usage`)."""
    return (await stored_usage(store, session_id, config, inherited=inherited))[1]


@dataclass(frozen=True)
class CostShare:
    """What one model's calls for one purpose (turn, title, compaction, goal_check…) used and cost."""

    model: str
    purpose: str
    usage: Usage
    cost: float | None  # USD; None when the model's price is unknown


async def stored_costs(store, session_id: str, config: Config | None = None, *, inherited: bool = False
                       ) -> list[CostShare]:
    """A stored session's usage and cost per model that made calls for it (its own, a fallback, the small
    model of its titles and summaries, a sub-agent's) and per purpose, as `stored_cost` sums them."""
    return [CostShare(model, purpose, usage, model_info(model, config).cost(usage))
            for model, purpose, usage in await store.usage_breakdown(session_id, inherited=inherited)]


def cost_breakdown(shares: Sequence[CostShare]) -> dict[str, list[tuple[str, Usage, float | None]]]:
    """`shares` summed per model and per purpose: {"model": [(model, usage, cost)…], "purpose": […]}, each
    in first-seen order (`auger sessions --cost` shows both)."""
    out: dict[str, list[tuple[str, Usage, float | None]]] = {}
    for kind in ("model", "purpose"):
        summed: dict[str, tuple[Usage, float | None]] = {}
        for share in shares:
            name = getattr(share, kind)
            usage, cost = summed.get(name, (Usage(), 0.0))
            summed[name] = (usage + share.usage, add_cost(cost, share.cost))
        out[kind] = [(name, usage, cost) for name, (usage, cost) in summed.items()]
    return out


@dataclass(frozen=True)
class Provider:
    """Where a provider's models are served: its wire (the API it speaks), address and key, and its models."""

    name: str
    wire: str
    base_url: str
    key_env: str | None  # where the API key is read from; None: never send one
    default_model: str | None = None
    label: str = ""
    key_required: bool = False  # hosted APIs: refuse to start without a key rather than fail remotely
    disabled: bool = False
    models: Mapping[str, ModelInfo] = field(default_factory=dict)
    source: str = "built-in"
    # The server takes a JSON Schema for the reply (Responses `text.format`, Chat `response_format`). OpenAI,
    # OpenRouter, vLLM, llama.cpp, Ollama and LM Studio do; `structured_output = false` in a provider's table
    # for a server that answers 400 to it (the schema is then asked for in words and checked all the same).
    # The Anthropic wire has no such parameter: it always asks in words.
    structured_output: bool = True
    # A cheaper model of this provider for the small jobs: titles, compaction summaries, the goal checker, review
    # triage (`review_model = "small"`), and the sub-agents that ask for it (`model: small`). None: the session's.
    small_model: str | None = None


# Known models; anything else gets ModelInfo defaults (override with model_context_window or config).
_GPT5_EFFORTS = ("minimal", "low", "medium", "high")
_GPT51_EFFORTS = ("none", "low", "medium", "high")
_GPT52_EFFORTS = ("none", "low", "medium", "high", "xhigh")
_O_EFFORTS = ("low", "medium", "high")
# Every effort some model accepts: a value outside it is most likely a typo, and is warned about.
KNOWN_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")

MODELS: dict[str, ModelInfo] = {m.name: m for m in (
    ModelInfo("gpt-5", 400_000, 128_000, 1.25, 0.125, 10.0, reasoning_efforts=_GPT5_EFFORTS),
    ModelInfo("gpt-5-mini", 400_000, 128_000, 0.25, 0.025, 2.0, reasoning_efforts=_GPT5_EFFORTS),
    ModelInfo("gpt-5-nano", 400_000, 128_000, 0.05, 0.005, 0.4, reasoning_efforts=_GPT5_EFFORTS),
    ModelInfo("gpt-5.1", 400_000, 128_000, 1.25, 0.125, 10.0, reasoning_efforts=_GPT51_EFFORTS),
    ModelInfo("gpt-5.1-codex-max", 400_000, 128_000, 1.25, 0.125, 10.0, reasoning_efforts=_GPT52_EFFORTS),
    ModelInfo("gpt-5.2", 400_000, 128_000, 1.75, 0.175, 14.0, reasoning_efforts=_GPT52_EFFORTS),
    ModelInfo("gpt-4.1", 1_047_576, 32_768, 2.0, 0.5, 8.0),
    ModelInfo("gpt-4.1-mini", 1_047_576, 32_768, 0.4, 0.1, 1.6),
    ModelInfo("gpt-4o", 128_000, 16_384, 2.5, 1.25, 10.0),
    ModelInfo("gpt-4o-mini", 128_000, 16_384, 0.15, 0.075, 0.6),
    ModelInfo("o3", 200_000, 100_000, 2.0, 0.5, 8.0, reasoning_efforts=_O_EFFORTS),
    ModelInfo("o4-mini", 200_000, 100_000, 1.1, 0.275, 4.4, reasoning_efforts=_O_EFFORTS),
    ModelInfo("claude-opus-4-1", 200_000, 32_000, 15.0, 1.5, 75.0),
    ModelInfo("claude-sonnet-4-5", 200_000, 64_000, 3.0, 0.3, 15.0),
    ModelInfo("claude-sonnet-4", 200_000, 64_000, 3.0, 0.3, 15.0),
    ModelInfo("claude-haiku-4-5", 200_000, 64_000, 1.0, 0.1, 5.0),
    ModelInfo("claude-3-5-haiku", 200_000, 8_192, 0.8, 0.08, 4.0),
)}

BUILTIN: dict[str, Provider] = {p.name: p for p in (
    Provider("openai", "openai_responses", "https://api.openai.com/v1", "OPENAI_API_KEY", "gpt-5", "OpenAI", True),
    Provider("anthropic", "anthropic", "https://api.anthropic.com", "ANTHROPIC_API_KEY", "claude-sonnet-4-5",
             "Anthropic", True),
    Provider("openrouter", "openai_chat", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", None, "OpenRouter",
             True),
    Provider("ollama", "openai_chat", "http://localhost:11434/v1", None, None, "Ollama (local)"),
    Provider("vllm", "openai_chat", "http://localhost:8000/v1", None, None, "vLLM (local)"),
    Provider("lmstudio", "openai_chat", "http://localhost:1234/v1", None, None, "LM Studio (local)"),
    Provider("llamacpp", "openai_chat", "http://localhost:8080/v1", None, None, "llama.cpp server (local)"),
    # sends OPENAI_API_KEY when it is set; self-hosted servers often need none
    Provider("openai-compatible", "openai_chat", "", "OPENAI_API_KEY", None, "any OpenAI-compatible server"),
    Provider("replay", "replay", "", None, "replay", "replays a recorded session (--cassette)"),
)}

_PROVIDER_KEYS = {"extends", "wire", "base_url", "key_env", "default_model", "label", "key_required", "disabled",
                  "models", "structured_output", "small_model"}
_MODEL_KEYS = {"context_window": int, "max_output_tokens": int, "input_price": float, "cached_input_price": float,
               "output_price": float, "supports_tools": bool, "supports_parallel_tools": bool,
               "supports_images": bool, "reasoning_efforts": tuple, "fallback": tuple}


class ProviderRegistry:
    def __init__(self, providers: dict[str, Provider], errors: dict[str, str], diagnostics: list[str]) -> None:
        self.providers = providers
        self.errors = errors  # provider name -> why its configuration is unusable
        self.diagnostics = diagnostics
        self._infos: dict[tuple[str, str | None], ModelInfo] = {}  # model_info's answers: a turn asks often

    def get(self, name: str) -> Provider:
        if name in self.errors:
            raise ProviderError(f"provider '{name}' has a configuration error: {self.errors[name]}")
        provider = self.providers.get(name)
        if provider is None:
            raise ProviderError(f"unknown provider '{name}'; known providers: {', '.join(self.providers)}")
        if provider.disabled:
            raise ProviderError(f"provider '{name}' is disabled in {provider.source}")
        return provider

    def status(self, name: str, env: Mapping[str, str] | None = None) -> str:
        env = os.environ if env is None else env
        if name in self.errors:
            return "config error"
        provider = self.providers[name]
        if provider.disabled:
            return "disabled"
        if provider.key_required and provider.key_env and not env.get(provider.key_env):
            return "key missing"
        if not provider.base_url and provider.wire != "replay":
            return "needs base_url"
        return "configured"

    def model_info(self, model: str, provider: str | None = None) -> ModelInfo:
        """The provider's own description, else the known models (exact, then longest prefix), else defaults
        (found once per model: the tables behind them do not change, and a turn asks at every step)."""
        found = self._infos.get((model, provider))
        if found is None:
            found = self._infos[(model, provider)] = self._model_info(model, provider)
        return found

    def _model_info(self, model: str, provider: str | None) -> ModelInfo:
        owner = self.providers.get(provider or "")
        if owner is not None and model in owner.models:
            return owner.models[model]
        for p in self.providers.values():
            if model in p.models:
                return p.models[model]
        if model in MODELS:
            return MODELS[model]
        base = model.split("/")[-1]
        matches = [name for name in MODELS if base.startswith(name)]
        if matches:
            return replace(MODELS[max(matches, key=len)], name=model)
        return ModelInfo(model, known=False)

    def all_models(self) -> list[tuple[str, ModelInfo]]:
        """(provider or "", info) for every described model."""
        rows = [(p.name, info) for p in self.providers.values() for info in p.models.values()]
        return rows + [("", info) for info in MODELS.values()]


def load_registry(tables: Mapping[str, Any] | None = None, source: str = "config") -> ProviderRegistry:
    """Built-ins plus the `[providers.NAME]` tables of a config file. Never raises."""
    providers = dict(BUILTIN)
    errors: dict[str, str] = {}
    diagnostics: list[str] = []
    raw = (tables or {}).get("providers", {})
    if not isinstance(raw, dict):
        diagnostics.append(f"{source}: 'providers' must be a table of tables; ignored")
        raw = {}
    for name, entry in raw.items():
        where = f"{source}: [providers.{name}]"
        try:
            providers[name] = _parse_provider(name, entry, providers, where, diagnostics)
            errors.pop(name, None)
        except ValueError as exc:
            errors[name] = str(exc)
            diagnostics.append(f"{where}: {exc}; this provider is unusable until it is fixed")
            providers.setdefault(name, Provider(name, "openai_chat", "", None, source=where))
    return ProviderRegistry(providers, errors, diagnostics)


def _parse_provider(name: str, entry: Any, known: Mapping[str, Provider], where: str,
                    diagnostics: list[str]) -> Provider:
    if not isinstance(entry, dict):
        raise ValueError("must be a table")
    for key in entry:
        if key not in _PROVIDER_KEYS:
            diagnostics.append(f"{where}: unknown key '{key}' ignored (known: {', '.join(sorted(_PROVIDER_KEYS))})")
    base_name = entry.get("extends", name if name in known else None)
    if base_name is not None and not isinstance(base_name, str):
        raise ValueError("'extends' must be a provider name")
    if base_name is not None and base_name not in known:
        raise ValueError(f"extends unknown provider '{base_name}'")
    base = known[base_name] if base_name else None
    if base is None and "wire" not in entry:
        raise ValueError(f"a new provider needs 'wire' ({', '.join(WIRES)}) or 'extends'")
    values: dict[str, Any] = {}
    for key, kind in (("wire", str), ("base_url", str), ("key_env", str), ("default_model", str), ("label", str),
                      ("key_required", bool), ("disabled", bool), ("structured_output", bool), ("small_model", str)):
        if key in entry:
            value = entry[key]
            if not isinstance(value, kind):
                raise ValueError(f"'{key}' must be {'true or false' if kind is bool else 'a string'}, got {value!r}")
            values[key] = value
    if "wire" in values and values["wire"] not in WIRES:
        raise ValueError(f"'wire' must be one of {', '.join(WIRES)}, got {values['wire']!r}")
    if values.get("base_url") and not values["base_url"].startswith(("http://", "https://")):
        raise ValueError(f"'base_url' must start with http:// or https://, got {values['base_url']!r}")
    if values.get("key_env") == "":
        values["key_env"] = None
    models = dict(base.models) if base else {}
    models.update(_parse_models(entry.get("models", {}), where, diagnostics))
    if base is None:
        return Provider(name, values.pop("wire"), values.pop("base_url", ""), values.pop("key_env", None),
                        models=models, source=where, **values)
    return replace(base, name=name, models=models, source=where, **values)


def _parse_models(raw: Any, where: str, diagnostics: list[str]) -> dict[str, ModelInfo]:
    if not isinstance(raw, dict):
        diagnostics.append(f"{where}: 'models' must be a table of model tables; ignored")
        return {}
    models = {}
    for model, spec in raw.items():
        if not isinstance(spec, dict):
            diagnostics.append(f"{where}: model '{model}' must be a table; ignored")
            continue
        fields: dict[str, Any] = {}
        for key, value in spec.items():
            kind = _MODEL_KEYS.get(key)
            if kind is tuple:  # a list of names: reasoning_efforts = ["none", "low", "high"], fallback = [...]
                ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
            else:
                ok = kind is not None and isinstance(value, (int, float) if kind is float else kind) and not (
                    kind is not bool and (isinstance(value, bool) or (isinstance(value, (int, float)) and value < 0)))
            if not ok:
                diagnostics.append(f"{where}: model '{model}' key '{key}' = {value!r} ignored"
                                   + ("" if kind else f" (known: {', '.join(_MODEL_KEYS)})"))
                continue
            fields[key] = float(value) if kind is float else tuple(value) if kind is tuple else value
        base = MODELS.get(model, ModelInfo(model))
        models[model] = replace(base, name=model, known=True, **fields)
    return models


def registry_for(config: Config) -> ProviderRegistry:
    """The registry the configuration describes (built-ins + its provider tables), built once per config."""
    cached = getattr(config, "_registry", None)
    if cached is None:
        cached = load_registry(config.tables, config.tables_source or "config")
        object.__setattr__(config, "_registry", cached)
    return cached


def model_info(model: str, config: Config | None = None, provider: str | None = None) -> ModelInfo:
    registry = registry_for(config) if config is not None else load_registry()
    return registry.model_info(model, provider)


def effort_problem(config: Config) -> str | None:
    """Why the configured reasoning effort may not be accepted, or None. Checked against the model's known
    efforts, never a fixed list: providers add efforts (`none`, `xhigh`) faster than a client is released,
    so an unexpected value is warned about and still sent."""
    effort = config.model_reasoning_effort
    if effort is None:
        return None
    registry = load_registry(config.tables, config.tables_source or "config")  # not cached: config is still loading
    provider = registry.providers.get(config.provider)
    model = config.model or (provider.default_model if provider else None)
    if not model:
        return None
    allowed = registry.model_info(model, config.provider).reasoning_efforts
    if allowed and effort not in allowed:
        return (f"model_reasoning_effort {effort!r} is not one {model} is known to accept "
                f"({', '.join(allowed)}); it is sent anyway")
    if not allowed and effort not in KNOWN_EFFORTS:
        return (f"model_reasoning_effort {effort!r} is not a known effort ({', '.join(KNOWN_EFFORTS)}); "
                "it is sent anyway")
    return None


def small_model(config: Config, provider: str) -> tuple[str, str] | None:
    """(provider, model) of the small model for a session on `provider`: the provider's own `small_model`, else
    the configured `small_model` ("provider:model", or a model of `provider`); None when neither is set."""
    registry = registry_for(config)
    own = registry.providers.get(provider)
    if own is not None and own.small_model:
        return provider, own.small_model
    return parse_model_ref(config.small_model or "", provider, list(registry.providers))


def parse_model_ref(text: str, provider: str, known: Sequence[str]) -> tuple[str, str] | None:
    """(provider, model) a setting names: `provider:model` (a known provider's name before the first colon), or
    a model of `provider` (an Ollama name like `qwen2.5-coder:14b` keeps its colon); None for an empty one."""
    text = text.strip()
    head, sep, tail = text.partition(":")
    if sep and head in known and tail.strip():
        return head, tail.strip()
    return (provider, text) if text else None


def resolve_provider(name: str, base_url: str | None = None, key_env: str | None = None,
                     registry: ProviderRegistry | None = None) -> Provider:
    provider = (registry or load_registry()).get(name)
    if base_url:
        provider = replace(provider, base_url=base_url)
    if key_env:
        provider = replace(provider, key_env=key_env)
    if not provider.base_url and provider.wire != "replay":
        raise ProviderError(f"provider '{name}' needs a base URL: pass --base-url URL or -c base_url=URL")
    return provider


def provider_for(config: Config) -> Provider:
    """The provider `config.provider` names, with where it lives and which key it sends.

    The top-level `base_url` and `api_key_env` are the user's settings for the provider the user's own
    settings chose (`config.endpoint_provider`). Any other provider — picked by a project's config, an
    agent definition, a model switch, a session resumed with its recorded provider — uses its own
    `[providers.NAME]` table or the built-in entry, never those: a key set up for one host is never sent
    to another because something else named another provider."""
    own = config.provider == config.endpoint_provider
    return resolve_provider(config.provider, config.base_url if own else None, config.api_key_env if own else None,
                            registry_for(config))


class _ClientArgs(TypedDict):
    """What every wire client's constructor takes, whatever its wire."""

    provider: str
    model: str
    base_url: str
    api_key: str | None
    key_env: str | None
    idle_timeout: float


def create_client(provider: Provider, model: str | None, *, idle_timeout: float = 300.0,
                  env: Mapping[str, str] | None = None, config: Config | None = None) -> ModelClient:
    """A ready client, or ProviderError naming exactly what is missing."""
    env = os.environ if env is None else env
    model = model or provider.default_model
    if not model:
        raise ProviderError(f"no model chosen for provider '{provider.name}': pass --model NAME or -c model=NAME")
    api_key = env.get(provider.key_env) if provider.key_env else None
    if not api_key and provider.key_required and not provider.base_url.startswith(LOCAL_PREFIXES):
        raise ProviderError(
            f"{provider.key_env} is not set: export it with your {provider.label or provider.name} API key, "
            "or use a local server (--provider ollama, or --base-url http://localhost:PORT/v1)")
    common = _ClientArgs(provider=provider.name, model=model, base_url=provider.base_url, api_key=api_key,
                         key_env=provider.key_env, idle_timeout=idle_timeout)
    info = (registry_for(config) if config is not None else load_registry()).model_info(model, provider.name)
    if provider.base_url.startswith("https:"):
        from auger.models import tls

        try:
            tls.context()  # made once here, so a broken SSL_CERT_FILE is this one line, not a traceback
        except tls.TlsError as exc:
            raise ProviderError(str(exc)) from None
    client = _wire_client(provider, model, common, info, config)
    from auger.models.http import SseModelClient  # loaded by the wire client already

    if isinstance(client, SseModelClient):
        client.outgoing = outgoing_check(config, env)
    return client


def _wire_client(provider: Provider, model: str, common: _ClientArgs, info: ModelInfo, config: Config | None
                 ) -> ModelClient:
    if provider.wire == "openai_chat":
        from auger.models.openai_chat import OpenAIChatClient

        return OpenAIChatClient(**common, structured_output=provider.structured_output)
    if provider.wire == "openai_responses":
        from auger.models.openai_responses import OpenAIResponsesClient

        effort = config.model_reasoning_effort if config is not None else None
        summary = config.model_reasoning_summary if config is not None else "auto"
        return OpenAIResponsesClient(**common, reasoning_effort=effort, reasoning_summary=summary or None,
                                     structured_output=provider.structured_output,
                                     web_search=hosted_search(config))
    if provider.wire == "anthropic":
        from auger.models.anthropic import AnthropicClient

        budget = config.thinking_budget if config is not None else None
        output = min(info.max_output_tokens, 32_000)
        if budget:
            output = max(1_024, min(output, info.max_output_tokens - budget))
        return AnthropicClient(**common, max_output_tokens=output, thinking_budget=budget,
                               web_search=hosted_search(config))
    if provider.wire == "replay":
        return _replay_client(provider, model, config)
    raise ProviderError(f"provider '{provider.name}' uses wire API '{provider.wire}', which this build cannot speak")


def secret_key_envs(config: Config | None) -> list[str]:
    """The variables every configured provider reads its key from: their values are secrets auger knows
    (secrets/known.py)."""
    registry = registry_for(config) if config is not None else load_registry()
    return sorted({p.key_env for p in registry.providers.values() if p.key_env})


def outgoing_check(config: Config | None, env: Mapping[str, str]) -> Callable[[str], str | None] | None:
    """The last check on a model request's body (secrets/outgoing.py): None when redaction is off."""
    from auger.secrets.known import known_secrets
    from auger.secrets.outgoing import OutgoingCheck
    from auger.secrets.settings import secrets_settings

    if config is not None and not secrets_settings(config).redact:
        return None
    check = OutgoingCheck(known_secrets(config, env, secret_key_envs(config)))
    return check if check else None


def hosted_search(config: Config | None) -> bool:
    """Whether a wire client offers its provider's hosted web search: `web_search = true`, and no search
    service of the user's own (`web_search_url`, the `web_search` tool then) takes its place."""
    return config is not None and config.web_search and not config.web_search_url


def _replay_client(provider: Provider, model: str, config: Config | None) -> ModelClient:
    from auger.models.replay import ReplayClient, ReplayError, load_cassette

    cassette = config.cassette if config is not None else None
    if not cassette:
        raise ProviderError("the replay provider needs a cassette: pass --cassette FILE (a JSONL recording)")
    try:
        replies = load_cassette(cassette)
    except ReplayError as exc:  # names the file (and line) itself
        raise ProviderError(f"cannot load the cassette: {exc}") from None
    return ReplayClient(replies=replies, provider=provider.name, model=model)


def prepare_tls(config: Config) -> None:
    """Start building the TLS context now when the configured provider is an HTTPS one (models/tls.py):
    front ends call this first, so it overlaps their imports. Any problem is left for client_for."""
    from auger.models import tls

    try:
        provider = provider_for(config)
    except Exception:  # an unknown provider, a broken table: client_for says so in its own words
        return
    tls.prepare(provider.base_url)


def client_for(config: Config, env: Mapping[str, str] | None = None) -> ModelClient:
    """The client the configuration asks for (provider, base URL, key env, model, timeouts). When another
    agent runs the turns (`backend`), a model that cannot be set up is a stand-in that says why when
    called (models/unconfigured.py) rather than a ProviderError: the agent does not need it."""
    try:
        provider = provider_for(config)
        return create_client(provider, config.model, idle_timeout=config.stream_idle_timeout, env=env,
                             config=config)
    except ProviderError as exc:
        if not config.backend:
            raise
        from auger.models.unconfigured import UnconfiguredClient

        return UnconfiguredClient(config.provider, config.model or "none", str(exc))
