"""Layered configuration: defaults < user config file < environment < flags (`-c key=value`).

Bad user input never raises: an unknown key, a wrong type or an unreadable file is
reported as a warning (what, where) and the previous layer's value is kept. A
relative path in a config file means a path next to that file, wherever auger runs.

`base_url` and `api_key_env` say where a provider lives and which variable holds its key, so they
belong to one provider: the one the user's own settings choose (`endpoint_provider`). A base URL
given without a provider beside it (in the same file, the environment, or the command line) means
an OpenAI-compatible server, wherever it is given. A provider picked by anything else — a project's
config, an agent definition, a model switch, a resumed session — uses its own settings
(models/registry.py `provider_for`), so only the user decides where the user's key is sent.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from auger.home import home_dirs as home_dirs  # (where it is asked for by most)


@dataclass
class Config:
    """Every setting and its default; `load_config` lays the files, the environment and the flags over these."""

    provider: str = "openai"
    model: str | None = None
    review_model: str | None = None  # the model reviews (`auger review`, /review) run with; None: `model`
    base_url: str | None = None
    api_key_env: str | None = None
    mode: str = "auto"
    max_model_calls_per_turn: int = 200
    agents_max_depth: int = 2  # sub-agents may start sub-agents this many levels deep
    agents_max_concurrent: int = 4  # sub-agents running at once per level of a session; more wait their turn
    agents_max_per_turn: int = 16  # sub-agents one turn (of the session or of an agent) may start
    # Models a call goes on with when the provider fails in a way no retry mends (engine/turn/fallback.py):
    # "provider:model" (or a model of the session's provider), in order; a model's own `fallback` in its
    # [providers.NAME.models.MODEL] table wins. `fallback_cooldown`: seconds after a switch before the first
    # model is tried again (0: the session stays on the fallback).
    fallback: list[str] = field(default_factory=list)
    fallback_cooldown: float = 0.0
    # The small jobs' model (titles, compaction summaries, the goal checker, `model: small` sub-agents) where the
    # session's provider names none in its table (`small_model` in [providers.NAME]): "provider:model" or a model
    # of the session's provider. None: they run on the session's model.
    small_model: str | None = None
    goal_model: str | None = None  # the model that judges a goal in words (--goal); None: the small model
    goal_max_turns: int = 10  # a goal run's most turns unless it names its own (--max-turns)
    model_max_attempts: int = 5
    model_retry_base_delay: float = 1.0
    model_retry_max_delay: float = 60.0
    stream_idle_timeout: float = 300.0
    db_path: str | None = None
    approve_all: bool = False  # headless: approve what would be asked instead of denying it
    sandbox: str = "auto"  # auto | bwrap | landlock | off
    sandbox_network: str = "proxy"  # none | proxy (allowlist) | full
    sandbox_idle_timeout: float = 300.0  # seconds an idle sandbox lives on (then stops; 0: until the session ends)
    egress_allow: list[str] = field(default_factory=list)  # added to the default development allowlist
    egress_hosts: dict[str, str] = field(default_factory=dict)  # static name -> IP entries for the proxy
    web_fetch: bool = True  # offer web_fetch (tools/web_fetch.py): allowlisted hosts unasked, others ask
    web_fetch_any_url: bool = False  # web_fetch may fetch URLs the model wrote, not only ones that reached it
    web_search: bool = False  # the provider's hosted web search, where its wire API has one
    web_search_url: str | None = None  # a search service instead: "https://…/search?q={query}&format=json"
    shell_env_include: list[str] = field(default_factory=list)
    shell_env_exclude: list[str] = field(default_factory=list)
    shell_env_set: dict[str, str] = field(default_factory=dict)
    trust_project_rules: bool = False
    model_context_window: int | None = None  # overrides the model registry
    model_auto_compact_token_limit: int | None = None  # default: 85% of the window
    generate_titles: bool = True
    snapshots: bool = True  # snapshot the tree before each turn's first change: per-turn diffs and undo
    snapshot_max_file_bytes: int = 10 << 20  # larger files are left out of snapshots (an undo never touches them)
    snapshot_max_dir_files: int = 5000  # a directory with more new files than this (a generated tree) too
    snapshot_retention_days: float = 30.0  # a session idle this long keeps only its latest turns' snapshots
    snapshot_keep_turns: int = 5  # ...these many changing turns, for undo
    snapshot_gc_interval_hours: float = 24.0  # how often sessions prune snapshots in the background; 0: never
    worktree: bool = False  # new sessions work in a copy of the project (changes/worktree.py), applied on request
    pending: bool = False  # queue file changes for review (`auger pending`) instead of writing them
    project_doc_fallback_filenames: list[str] = field(default_factory=list)  # e.g. ["CLAUDE.md"]
    project_doc_max_bytes: int = 32_768
    # Read the project's AGENTS.md (and its fallbacks) as instructions. Off where the repository is not the
    # user's to trust (the GitHub Action on a pull request's text: its AGENTS.md is then untrusted data).
    project_docs: bool = True
    developer_instructions: str | None = None  # added to every session's instructions (user config only)
    base_instructions: str | None = None  # replaces the packaged base prompt, at the user's own risk
    compact_prompt: str | None = None  # replaces the request for a hand-off summary when compacting
    memory: bool = False  # offer the `remember` tool; its notes go to .auger/memory.md, read as instructions
    exec_sessions: bool = True  # offer exec_command/write_stdin: interactive processes (tools/exec_command.py)
    exec_sessions_max: int = 8  # interactive processes kept per session (or sub-agent); the oldest idle one ends
    exec_session_idle_timeout: float = 600.0  # seconds an unused interactive process is kept
    code_mode: bool = False  # offer run_code: a Python program calling the session's tools (tools/code_mode.py)
    # After an edit, what the language servers found that it broke (lsp/): the errors it introduced, told with
    # the tool's result. Servers come from [lsp.NAME] tables and the defaults found on the machine.
    diagnostics: bool = True
    diagnostics_wait: float = 2.0  # seconds an edit's result waits for the servers (then it says it gave up)
    lsp_idle_timeout: float = 600.0  # seconds an unused language server is kept (0: until the session ends)
    code_nav: bool = True  # offer code_nav: definitions, references, types, symbols, rename previews (lsp/)
    repo_map: str = "tool"  # off | tool (offer repo_map) | auto (also put one into an unfamiliar large project's
    repo_map_tokens: int = 1024  # first turn), of at most this many tokens
    model_reasoning_effort: str | None = None  # Responses API; checked against the model's known efforts
    model_reasoning_summary: str | None = "auto"  # Responses API reasoning summaries; "" turns them off
    thinking_budget: int | None = None  # Anthropic extended thinking, in tokens
    cassette: str | None = None  # the replay provider's recording (JSONL)
    backend: str | None = None  # an agent from [backends.NAME] (or a built-in one) runs the turns; None: auger
    backend_idle_timeout: float = 600.0  # seconds an idle backend agent process is kept warm
    session_token_budget: int | None = None  # stop cleanly once a session used this many tokens
    session_cost_budget: float | None = None  # ...or this much money (USD)
    trust_project_config: bool = False  # honour a project's [providers] and developer_instructions (.auger/config.toml)
    trust_project_mcp: bool = False  # start the MCP servers a project's .auger/config.toml defines
    trust_project_hooks: bool = False  # run the [hooks] a project's .auger/config.toml defines (engine/hooks.py)
    hooks_timeout: float = 10.0  # seconds a hook may take (a hook's own `timeout` wins)
    # A program told of each turn's end, approval request and shutdown (the event as its last argument;
    # observe/notify.py). Never from a project's config: it is a command auger starts.
    notify: list[str] = field(default_factory=list)
    tui_notifications: bool = True  # the terminal UI's desktop notification when a turn ends or an approval waits
    tables: dict = field(default_factory=dict, compare=False)  # [providers...] and other tables, for the registry
    tables_source: str = ""
    warnings: list[str] = field(default_factory=list, compare=False)  # what was wrong in the settings (ignored)
    # The provider `base_url` and `api_key_env` are for: the one the user's own settings chose (never a
    # project's choice). None when built directly: the provider it is built with.
    endpoint_provider: str | None = None
    # A trusted project's `developer_instructions` (trust_project_config): added after the user's, never
    # replacing them. Only a project's config file sets it.
    project_developer_instructions: str | None = None
    # Approvals come from clients of a server or a fleet, not from the person whose config this is: an
    # approve-always answer may not save a rule in their rules.toml (only approve once or for the session).
    # Set by `auger serve` and `auger worker`; no file, variable or -c sets it.
    remote_approvals: bool = False

    def __post_init__(self) -> None:
        if self.endpoint_provider is None:
            self.endpoint_provider = self.provider


_FIELDS = {f.name: f for f in dataclasses.fields(Config)
           if f.name not in ("warnings", "tables", "tables_source", "endpoint_provider",
                             "project_developer_instructions", "remote_approvals")}
# What a base URL given without a provider means, wherever it is given: some OpenAI-compatible server.
BASE_URL_PROVIDER = "openai-compatible"
# A project's own config file comes with the repository: it may describe models and pick among configured
# providers, but never widen trust, move an API key to another host, or change where data is stored.
PROJECT_KEYS = {"provider", "model", "review_model", "model_context_window", "model_auto_compact_token_limit",
                "project_doc_fallback_filenames", "project_doc_max_bytes", "generate_titles",
                "stream_idle_timeout", "max_model_calls_per_turn", "model_reasoning_effort",
                "model_reasoning_summary", "thinking_budget"}
_ENV = {  # environment variable -> key
    "AUGER_PROVIDER": "provider", "AUGER_MODEL": "model", "AUGER_BASE_URL": "base_url",
    "AUGER_MODE": "mode", "AUGER_DB": "db_path",
}
_PATH_KEYS = {"db_path", "cassette"}  # file paths: relative ones in a config file resolve against its directory
_CHOICES = {"mode": ("plan", "safe", "auto"), "sandbox": ("auto", "bwrap", "landlock", "off"),
            "sandbox_network": ("none", "proxy", "full"), "repo_map": ("off", "tool", "auto"),
            "model_reasoning_summary": ("", "auto", "concise", "detailed")}


def load_config(overrides: Iterable[str] = (), flags: dict[str, Any] | None = None,
                env: dict[str, str] | None = None, config_file: Path | None = None,
                project_dir: Path | None = None) -> Config:
    """Build the effective config. Never raises for user mistakes; see `Config.warnings`.

    Layers: defaults < user config.toml < the project's .auger/config.toml (limited keys) < AUGER_*
    environment variables < `-c key=value` < flags. `endpoint_provider` is the provider chosen by all
    of them but the project's file."""
    environ: Mapping[str, str] = os.environ if env is None else env
    config = Config()
    path = config_file or home_dirs()["config"] / "config.toml"
    chosen = _user_choice(config, _apply_file(config, path), config.provider)
    if project_dir is not None:  # may pick a provider; `chosen` stays the user's
        _apply_file(config, Path(project_dir) / ".auger" / "config.toml", project=True)
    from_env = {key for var, key in _ENV.items()
                if environ.get(var) and _set(config, key, environ[var], f"environment variable {var}")}
    chosen = _user_choice(config, from_env, chosen)
    given: set[str] = set()  # the command line: `-c` and flags are one place
    for raw in overrides:
        key, sep, value = raw.partition("=")
        if not sep:
            config.warnings.append(f"-c {raw!r}: expected key=value")
            continue
        key = key.strip()
        if _set(config, key, _parse_value(value.strip(), _kind(_FIELDS[key]) if key in _FIELDS else ""), f"-c {key}"):
            given.add(key)
    for key, value in (flags or {}).items():
        if value is not None and _set(config, key, value, f"--{key.replace('_', '-')}"):
            given.add(key)
    config.endpoint_provider = _user_choice(config, given, chosen)
    return config


def _user_choice(config: Config, keys: set[str], chosen: str) -> str:
    """The provider the user's own settings choose, after one place of them set `keys`: a base URL
    given there without a provider means an OpenAI-compatible server, as `--base-url` always has."""
    if "base_url" in keys and "provider" not in keys:
        config.provider = BASE_URL_PROVIDER
        return BASE_URL_PROVIDER
    return config.provider if "provider" in keys else chosen


def _apply_file(config: Config, path: Path, project: bool = False) -> set[str]:
    """Apply one config file; the keys it set."""
    applied: set[str] = set()
    try:
        raw = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):  # no such file: a component of its path is a file
        return applied
    except OSError as exc:
        config.warnings.append(f"{path}: cannot read config file ({exc.strerror or exc}); using defaults")
        return applied
    import tomllib

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        config.warnings.append(f"{path}: invalid TOML ({exc}); using defaults")
        return applied
    for key, value in data.items():
        if isinstance(value, dict) and key not in _FIELDS:  # tables for other layers (providers...)
            if project and key == "providers" and not config.trust_project_config:
                config.warnings.append(f"{path}: [providers] ignored: a project may not define where API keys "
                                       "are sent (set trust_project_config = true in your user config)")
                continue
            if project and key in ("backends", "lsp"):  # a command to run: only the user's config names one
                config.warnings.append(f"{path}: [{key}] ignored: a project may not choose commands auger "
                                       f"starts (define {key} in your user config)")
                continue
            if project and key == "mcp_servers":  # listed apart: started only with trust_project_mcp
                key = "project_mcp_servers"
            if project and key == "hooks":  # listed apart: run only with trust_project_hooks
                key = "project_hooks"
            if project and key == "secrets":  # listed apart: a project may add protected files, never remove any
                key = "project_secrets"
            if project and key == "otel":  # telemetry goes where the user sends it, with the user's headers
                config.warnings.append(f"{path}: [otel] ignored: only your user config may configure telemetry")
                continue
            if project and key in ("intake", "forge"):  # webhook secrets, push credentials: the operator's alone
                config.warnings.append(f"{path}: [{key}] ignored: only your user config may define it")
                continue
            if project and key == "plugins":
                config.warnings.append(f"{path}: [plugins] ignored: only your user config may enable a "
                                       "project's plugins")
                continue
            merged = config.tables.setdefault(key, {})
            if isinstance(merged, dict):
                merged.update(value)
            config.tables_source = ", ".join(filter(None, (config.tables_source, str(path))))
            continue
        if project and key == "developer_instructions":
            _project_developer_text(config, value, path)
            continue
        if project and key not in PROJECT_KEYS:
            config.warnings.append(f"{path}: '{key}' cannot be set by a project's config file (ignored)")
            continue
        if _set(config, key, value, str(path), relative_to=path.parent):
            applied.add(key)
    return applied


def _project_developer_text(config: Config, value: Any, path: Path) -> None:
    """A project's `developer_instructions`: text the model follows as the user's own, so only a user who
    trusts the project's config (trust_project_config) lets it in, and it adds to theirs."""
    if not config.trust_project_config:
        config.warnings.append(f"{path}: 'developer_instructions' ignored: a project adds instructions only "
                               "where you trust its config (set trust_project_config = true in your user config)")
    elif not isinstance(value, str):
        config.warnings.append(f"{path}: 'developer_instructions' expects a string, got {value!r} (ignored)")
    else:
        config.project_developer_instructions = value


def _parse_value(text: str, kind: str) -> Any:
    """`-c` values are TOML scalars when they parse as one (`5`, `true`, `"x"`), else plain strings;
    for a string key the text is the string (`-c model=3` names model "3")."""
    import tomllib

    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text
    if kind.replace(" | None", "") == "str" and not isinstance(value, str):
        return text
    return value


def _kind(f: dataclasses.Field) -> str:
    return f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))


def valid_base_url(url: str) -> bool:
    """An http(s) URL with a host: anything else can never be connected to, so it is refused early."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _set(config: Config, key: str, value: Any, where: str, relative_to: Path | None = None) -> bool:
    """Set one key; False (and a diagnostic) when the value is unusable and the previous one stays."""
    f = _FIELDS.get(key)
    if f is None:
        config.warnings.append(f"{where}: unknown config key '{key}' (ignored)")
        return False
    kind = _kind(f)
    try:
        coerced = _coerce(kind, value)
    except (TypeError, ValueError):
        expected = _DESCRIBE.get(kind.replace(" | None", ""), kind)
        config.warnings.append(f"{where}: '{key}' expects {expected}, got {value!r} (ignored)")
        return False
    if key in _CHOICES and coerced not in _CHOICES[key]:
        config.warnings.append(
            f"{where}: '{key}' must be one of {', '.join(_CHOICES[key])}, got {value!r} (ignored)")
        return False
    if key == "base_url" and not valid_base_url(coerced):
        config.warnings.append(f"{where}: 'base_url' must be an http:// or https:// URL, got {value!r} (ignored)")
        return False
    if key in _PATH_KEYS and relative_to is not None and not coerced.startswith("session:") \
            and "://" not in coerced:  # a database URL is no path
        coerced = str(relative_to / Path(coerced).expanduser())  # an absolute path stays as it is
    setattr(config, key, coerced)
    return True


_DESCRIBE = {"str": "a string", "int": "a whole number >= 1", "float": "a number >= 0", "bool": "true or false",
             "list[str]": "a list of strings", "dict[str, str]": "a table of strings"}


def _coerce(kind: str, value: Any) -> Any:
    base = kind.replace(" | None", "")
    if base == "bool":
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
        if not isinstance(value, bool):
            raise TypeError
        return value
    if base == "list[str]":
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise TypeError
        return list(value)
    if base == "dict[str, str]":
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                  for k, v in value.items()):
            raise TypeError
        return dict(value)
    if base == "str":
        if not isinstance(value, str):  # `model = 3` in TOML is a number: say so rather than guess
            raise TypeError
        return value
    if base == "int":
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise TypeError
        result = int(value)
        if result < 1:
            raise ValueError
        return result
    if base == "float":
        if isinstance(value, bool):
            raise TypeError
        number = float(value)
        if number < 0:
            raise ValueError
        return number
    raise TypeError
