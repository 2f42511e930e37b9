"""The context window a server really gives a model, asked of the server itself.

Why: a model nobody described gets ModelInfo's 128k default, but Ollama runs models with a few thousand
tokens unless told otherwise and silently drops what overflows, so auger would never compact and the
model would lose the start of the conversation without a word. A session therefore asks the server as it
opens:

* Ollama: `POST /api/show` gives the trained length (`model_info["<arch>.context_length"]`) and any
  `num_ctx` in the model's parameters; `GET /api/ps` gives the length a loaded model actually runs with.
  Without either, the server's documented default (4096 on small machines) is what it will use.
* any OpenAI-compatible server: `GET /v1/models`, where it reports a length for the model
  (`loaded_context_length` from LM Studio, `max_model_len` from vLLM, `context_length` from OpenRouter and
  llama.cpp, `context_window`).

Explicit configuration (`model_context_window`, a model table) wins and is never probed. A failed probe
is a quiet fallback to what the registry says, never an error. Answers are kept per client and model
(a server restarted with another context length is asked again by the next client).
"""

from __future__ import annotations

import re
import weakref
from typing import Any, TypeGuard

from auger.models.base import ModelClient
from auger.models.registry import LOCAL_PREFIXES

OLLAMA_DEFAULT_CONTEXT = 4096  # what Ollama runs a model with when neither num_ctx nor the server says more
PROBE_TIMEOUT = 3.0  # seconds per request: a session must not wait long for an answer it can do without
FILL_WARNING = 0.9  # the first request filling this much of the window is worth a warning
_MODEL_KEYS = ("loaded_context_length", "max_model_len", "context_length", "context_window", "max_context_length")
_SANE = range(256, 100_000_001)  # a server's number outside this is not believed
_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)

_answers: weakref.WeakKeyDictionary[ModelClient, dict[str, int | None]] = weakref.WeakKeyDictionary()


async def probe_context_window(client: ModelClient, explicit: bool) -> int | None:
    """The window the client's server reports for its model, or None (explicit config, not a Chat
    Completions server, or nothing learned). Never raises."""
    base_url = getattr(client, "base_url", None)
    http = getattr(client, "_http", None)
    if explicit or not base_url or http is None:
        return None
    answers = _answers.setdefault(client, {})
    if client.model not in answers:
        try:
            answers[client.model] = await _ask(http, base_url, client.model, ollama=_looks_like_ollama(client))
        except Exception:  # noqa: BLE001 - any failure of a best-effort probe is a quiet fallback
            answers[client.model] = None
    return answers[client.model]


def fill_warning(used: int, window: int, model: str) -> str | None:
    """A warning when the first request already fills most of the window, saying how to get more."""
    if window <= 0 or used < FILL_WARNING * window:
        return None
    return (f"the first request already fills {100 * used // window}% of {model}'s {window:,}-token context "
            "window; the model may lose the start of the conversation. Give it a larger context (Ollama: "
            "OLLAMA_CONTEXT_LENGTH=32768 ollama serve, or a Modelfile with PARAMETER num_ctx 32768) or set "
            "model_context_window")


async def _ask(http: Any, base_url: str, model: str, *, ollama: bool) -> int | None:
    window = await _from_model_list(http, base_url, model)
    if window is None and ollama:
        window = await _from_ollama(http, base_url.rstrip("/").removesuffix("/v1"), model)
    return window


def _looks_like_ollama(client: ModelClient) -> bool:
    """Ollama's own API is asked only of a server that may be one: the `ollama` provider, its port, or any
    local server (a remote API would only answer 404, after a round trip the session waits for)."""
    base_url = str(getattr(client, "base_url", ""))
    return client.provider == "ollama" or ":11434" in base_url or base_url.startswith(LOCAL_PREFIXES)


async def _get_json(http: Any, method: str, url: str, body: Any = None) -> Any:
    response = await http.request(method, url, json=body, headers={"accept": "application/json"},
                                  timeout=PROBE_TIMEOUT)
    if response.status_code != 200:
        return None
    return response.json()


async def _from_model_list(http: Any, base_url: str, model: str) -> int | None:
    data = await _get_json(http, "GET", base_url.rstrip("/") + "/models")
    entries = data.get("data") if isinstance(data, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("id") == model:
            for key in _MODEL_KEYS:
                if _sane(entry.get(key)):
                    return int(entry[key])
    return None


async def _from_ollama(http: Any, root: str, model: str) -> int | None:
    shown = await _get_json(http, "POST", root + "/api/show", {"model": model})
    if not isinstance(shown, dict):
        return None
    info = found if isinstance(found := shown.get("model_info"), dict) else {}
    arch = info.get("general.architecture")
    length = info.get(f"{arch}.context_length")
    trained = length if _sane(length) else None
    match = _NUM_CTX.search(shown.get("parameters") or "") if isinstance(shown.get("parameters"), str) else None
    used = int(match.group(1)) if match and _sane(int(match.group(1))) else await _ollama_loaded(http, root, model)
    used = used or OLLAMA_DEFAULT_CONTEXT
    return min(used, trained) if trained else used


async def _ollama_loaded(http: Any, root: str, model: str) -> int | None:
    """The context a loaded model runs with (`/api/ps`, newer servers), which reflects OLLAMA_CONTEXT_LENGTH."""
    data = await _get_json(http, "GET", root + "/api/ps")
    models = data.get("models") if isinstance(data, dict) else None
    for entry in models if isinstance(models, list) else []:
        if isinstance(entry, dict) and model in (entry.get("name"), entry.get("model")) \
                and _sane(entry.get("context_length")):
            return int(entry["context_length"])
    return None


def _sane(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value in _SANE
