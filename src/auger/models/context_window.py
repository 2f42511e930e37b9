"""The context window a local server really gives a model, asked of the server itself.

Why: a model nobody described gets ModelInfo's 128k default, but Ollama runs models with a few thousand
tokens unless told otherwise and silently drops what overflows, so auger would never compact and the
model would lose the start of the conversation without a word. A session therefore asks the server:

* Ollama: `POST /api/show` gives the trained length (`model_info["<arch>.context_length"]`) and any
  `num_ctx` in the model's parameters; `GET /api/ps` gives the length a loaded model actually runs with.
  Without either, the server's documented default (4096 on small machines) is what it will use.
* any OpenAI-compatible server: `GET /v1/models`, where it reports a length for the model
  (`loaded_context_length` from LM Studio, `max_model_len` from vLLM, `context_length` from llama.cpp,
  `context_window`).

Only a local server is asked (a loopback or private address, a `.local` name, or a provider that runs on
the user's machine: `local_server`): a hosted API's models are described in the registry, and a round
trip to it would only slow the start. Explicit configuration (`model_context_window`, a model table) wins
and is never probed. The question never delays a request: `learn_window` asks in the background while the
session goes on with the registry's window, and the answer applies from the next use of the window on
(engine/turn/turn_context.py reads it live); sessions asking the same server at once share one question.
Answers are kept per server and model in the cache directory for
CACHE_TTL (a server restarted with another context length is asked again after that), so most sessions
have the real window before their first request; a failed probe is a quiet fallback, never an error, and
is not kept.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import time
import weakref
from pathlib import Path
from typing import Any, TypeGuard
from urllib.parse import urlsplit

from auger import json_cache
from auger.lazy_regex import lazy_compile
from auger.models.base import ModelClient
from auger.models.registry import BUILTIN, LOCAL_PREFIXES

OLLAMA_DEFAULT_CONTEXT = 4096  # what Ollama runs a model with when neither num_ctx nor the server says more
PROBE_TIMEOUT = 3.0  # seconds per request: an answer that takes longer is not worth the wait
FILL_WARNING = 0.9  # the first request filling this much of the window is worth a warning
CACHE_FILE = "context-windows.json"  # in the cache directory: {"<base url> <model>": {"window": N|null, "at": t}}
CACHE_TTL = 3600.0  # seconds an answer is believed
_MODEL_KEYS = ("loaded_context_length", "max_model_len", "context_length", "context_window", "max_context_length")
_SANE = range(256, 100_000_001)  # a server's number outside this is not believed
_NUM_CTX = lazy_compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)
# providers whose server runs on the user's machine, wherever the user points them
_LOCAL_PROVIDERS = frozenset(p.name for p in BUILTIN.values() if p.base_url.startswith(LOCAL_PREFIXES))

_answers: weakref.WeakKeyDictionary[ModelClient, dict[str, int | None]] = weakref.WeakKeyDictionary()
_in_flight: dict[tuple[asyncio.AbstractEventLoop, str], asyncio.Task[int | None]] = {}  # (loop, key): see _asking


class LearnedWindow:
    """The window a session's model runs with on its server, as far as known now: `window` (None: the
    server said nothing, or was not asked), `settled` once no answer is awaited any more."""

    def __init__(self, model: str, window: int | None = None, asking: asyncio.Task[int | None] | None = None):
        self.model = model
        self.window = window
        self._asking = asking
        if asking is not None:
            asking.add_done_callback(self._answered)

    @property
    def settled(self) -> bool:
        return self._asking is None

    def for_model(self, model: str) -> int | None:
        """The window learned for `model` (None for another model: the session switched)."""
        return self.window if model == self.model else None

    async def wait(self) -> int | None:
        """The window once the server's answer is in (at once when none is awaited)."""
        if self._asking is not None:
            await asyncio.gather(self._asking, return_exceptions=True)
        return self.window

    async def aclose(self) -> None:
        """Stop asking (the session ends, or its model changed)."""
        if self._asking is not None:
            self._asking.cancel()
            await asyncio.gather(self._asking, return_exceptions=True)
            self._asking = None

    def _answered(self, task: asyncio.Task[int | None]) -> None:
        if not task.cancelled() and task.exception() is None:
            self.window = task.result()
        self._asking = None


def learn_window(client: ModelClient, *, explicit: bool, cache_dir: Path | None) -> LearnedWindow:
    """What `client`'s server says of its model's window: at once from the cache, else asked in the
    background (call within a running event loop). Nothing is asked when the window is `explicit`
    (configured or described) or the server is not local."""
    if explicit or not local_server(client):
        return LearnedWindow(client.model)
    key = f"{getattr(client, 'base_url', '')} {client.model}"
    found, window = _cached(cache_dir, key)
    if found:
        return LearnedWindow(client.model, window)

    asked = _asking(client, key, cache_dir)

    async def ask() -> int | None:
        return await asyncio.shield(asked)  # a session that stops waiting leaves the others their answer

    return LearnedWindow(client.model, asking=asyncio.create_task(ask(), name=f"window-{client.model}"))


def _asking(client: ModelClient, key: str, cache_dir: Path | None) -> asyncio.Task[int | None]:
    """The one question to `key`'s server in flight on this loop: sessions opened together (a server's
    many clients, a benchmark's hundred) share it instead of asking the same thing once each."""
    loop = asyncio.get_running_loop()
    found = _in_flight.get((loop, key))
    if found is not None:
        return found

    async def ask() -> int | None:
        answer = await _probe(client)
        if isinstance(answer, _Failed):
            return None
        _keep(cache_dir, key, answer)
        return answer

    task = loop.create_task(ask(), name=f"window-probe-{client.model}")
    _in_flight[(loop, key)] = task
    task.add_done_callback(lambda _: _in_flight.pop((loop, key), None))
    return task


def local_server(client: ModelClient) -> bool:
    """Whether the client talks to a server on this machine or the local network, over a client that
    can ask it (a Chat Completions one)."""
    endpoint = _endpoint(client)
    if endpoint is None:
        return False
    if client.provider in _LOCAL_PROVIDERS:
        return True
    host = (urlsplit(endpoint[1]).hostname or "").lower()
    if host == "localhost" or host.endswith((".localhost", ".local")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def fill_warning(used: int, window: int, model: str) -> str | None:
    """A warning when the first request already fills most of the window, saying how to get more."""
    if window <= 0 or used < FILL_WARNING * window:
        return None
    return (f"the first request already fills {100 * used // window}% of {model}'s {window:,}-token context "
            "window; the model may lose the start of the conversation. Give it a larger context (Ollama: "
            "OLLAMA_CONTEXT_LENGTH=32768 ollama serve, or a Modelfile with PARAMETER num_ctx 32768) or set "
            "model_context_window")


class _Failed:
    """The server could not be asked (down, too slow, garbled): nothing learned, nothing to keep."""


_FAILED = _Failed()


async def _probe(client: ModelClient) -> int | None | _Failed:
    """The server's answer, asked once per client and model; _FAILED when it could not be had."""
    answers = _answers.setdefault(client, {})
    endpoint = _endpoint(client)
    if endpoint is None:
        return None
    if client.model not in answers:
        try:
            answers[client.model] = await _ask(*endpoint, client.model)
        except Exception:  # noqa: BLE001 - any failure of a best-effort probe is a quiet fallback
            return _FAILED
    return answers[client.model]


def _endpoint(client: ModelClient) -> tuple[Any, str] | None:
    """The client's HTTP client and base URL, when it has both (a Chat Completions client)."""
    base_url = getattr(client, "base_url", None)
    http = getattr(client, "_http", None)
    return (http, str(base_url)) if base_url and http is not None else None


def _cached(cache_dir: Path | None, key: str) -> tuple[bool, int | None]:
    """(found, window) for `key`, if kept less than CACHE_TTL ago."""
    entry = _read_cache(cache_dir).get(key)
    if not isinstance(entry, dict) or not isinstance(entry.get("at"), (int, float)):
        return False, None
    if not 0 <= time.time() - entry["at"] < CACHE_TTL:
        return False, None
    window = entry.get("window")
    return True, int(window) if _sane(window) else None


def _keep(cache_dir: Path | None, key: str, window: int | None) -> None:
    """Remember an answer (replacing the file whole, so a reader never sees half of it); never raises."""
    if cache_dir is None:
        return
    now = time.time()
    entries = {k: v for k, v in _read_cache(cache_dir).items()
               if isinstance(v, dict) and isinstance(v.get("at"), (int, float)) and now - v["at"] < CACHE_TTL}
    entries[key] = {"window": window, "at": now}
    json_cache.write(cache_dir / CACHE_FILE, entries)


def _read_cache(cache_dir: Path | None) -> dict[str, Any]:
    return {} if cache_dir is None else json_cache.read(cache_dir / CACHE_FILE)


async def _ask(http: Any, base_url: str, model: str) -> int | None:
    """The model list, then Ollama's own API (any local server may be one; another only answers 404)."""
    window = await _from_model_list(http, base_url, model)
    if window is None:
        window = await _from_ollama(http, base_url.rstrip("/").removesuffix("/v1"), model)
    return window


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
