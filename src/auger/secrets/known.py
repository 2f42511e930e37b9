"""The secret values auger knows before any text arrives: checked first, exactly, everywhere.

    its provider keys        the value of each configured provider's key variable (`key_env`), and the
                             user's `api_key_env`: what auger itself sends as a credential
    MCP credentials          `[mcp_servers.NAME]` env entries and headers whose names mark them secret
                             (the `[secrets] env` patterns, and Authorization/Cookie headers, their scheme
                             word left out), and the value of each `bearer_token_env`
    secret variables         the value of every environment variable whose name matches the `[secrets] env`
                             patterns (`*KEY*`, `*TOKEN*`, `*SECRET*`, …)

A value shorter than MIN_VALUE_CHARS is left out: it would match too much ordinary text. Each value is
labelled by where it came from (`env-github-token`, `mcp-tracker`), which names its marker's kind.

The provider key variables are passed in (models/registry.py knows the providers; this package sits below
it), so reading them never imports a wire client.
"""

from __future__ import annotations

import fnmatch
import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from auger.lazy_dataclass import Deferred, dataclass
from auger.lazy_regex import lazy_compile
from auger.secrets.settings import DEFAULT_ENV_PATTERNS, MIN_VALUE_CHARS, secrets_settings

if TYPE_CHECKING:
    from auger.config import Config

_AUTH_HEADERS = ("authorization", "proxy-authorization", "cookie", "x-api-key", "api-key")
_SCHEME = lazy_compile(r"^(?:bearer|basic|token|digest)\s+", re.I)


@dataclass(frozen=True)
class KnownSecret(Deferred):
    kind: str  # the marker's kind: env-<name>, mcp-<server>
    value: str
    label: str  # what it is, in words: "the value of $GITHUB_TOKEN", "a credential of the MCP server x"


def known_secrets(config: Config | None, env: Mapping[str, str], key_envs: Iterable[str] = ()) -> list[KnownSecret]:
    """Every secret value `config` and `env` reveal (see the module docstring), each once, longest first
    (a value containing another is found whole)."""
    patterns = secrets_settings(config).env_patterns if config is not None else DEFAULT_ENV_PATTERNS
    found: dict[str, tuple[str, str]] = {}  # value -> (kind, label)

    def add(kind: str, label: str, value: Any) -> None:
        if isinstance(value, str) and len(value.strip()) >= MIN_VALUE_CHARS:
            found.setdefault(value.strip(), (kind, label))

    def add_variable(name: str) -> None:
        add(env_kind(name), f"the value of ${name}", env.get(name))

    for name in [*key_envs, *([config.api_key_env] if config is not None and config.api_key_env else [])]:
        add_variable(name)
    if config is not None:
        for server, table in _mcp_tables(config):
            label = f"a credential of the MCP server {server}"
            for name, value in _table(table.get("env")).items():
                if secret_name(name, patterns):
                    add(f"mcp-{_slug(server)}", label, value)
            for name, value in _table(table.get("headers")).items():
                if name.lower() in _AUTH_HEADERS or secret_name(name, patterns):
                    add(f"mcp-{_slug(server)}", label, _SCHEME.sub("", value) if isinstance(value, str) else value)
            bearer = table.get("bearer_token_env")
            if isinstance(bearer, str) and bearer:
                add_variable(bearer)
    for name in env:
        if secret_name(name, patterns):
            add_variable(name)
    return [KnownSecret(kind, value, label)
            for value, (kind, label) in sorted(found.items(), key=lambda kv: -len(kv[0]))]


def secret_name(name: str, patterns: Iterable[str]) -> bool:
    """Whether a variable (or setting) named `name` holds a secret, by the `[secrets] env` patterns."""
    return _secret_name(name, tuple(patterns))


@lru_cache(maxsize=4096)
def _secret_name(name: str, patterns: tuple[str, ...]) -> bool:
    """Kept per name and patterns: every session of a process asks it of each variable of the same
    environment, against the same patterns."""
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, p.upper()) for p in patterns)


def env_kind(name: str) -> str:
    """The marker kind of a variable's value: `env-` and its name in lower case, `_` as `-`."""
    return f"env-{_slug(name)}"


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40] or "value"


def _mcp_tables(config: Config) -> list[tuple[str, dict[str, Any]]]:
    tables = []
    for key in ("mcp_servers", "project_mcp_servers"):
        servers = config.tables.get(key)
        if isinstance(servers, dict):
            tables += [(name, table) for name, table in servers.items() if isinstance(table, dict)]
    return tables


def _table(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
