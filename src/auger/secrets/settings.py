"""The `[secrets]` section of the configuration, as every part of auger reads it.

    [secrets]
    files = ["*.kdbx", "config/prod/*"]   # more protected files (gitignore-style patterns); user and project
    allow = [".env.test"]                 # files the defaults protect that the agent may read (user config only)
    env = ["*_PAT", "*KEY*"]              # names of environment variables whose values are secrets (user only;
                                          # default: DEFAULT_ENV_PATTERNS)
    redact = true                         # redact secret values from tool output and what is sent (user only)

A project's `.auger/config.toml` may add to `files` — a team's own list — and nothing else: it can never
allow a protected file, change which variables are secret, or turn redaction off (config.py keeps its
table apart as `project_secrets`). `.augerignore` in the project adds gitignore-syntax patterns the same
way. Problems in the section are diagnostics; a bad entry is skipped, never fatal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from auger.config import Config

# Files a user expects kept from the model: gitignore-style patterns matched against paths relative to the
# project root (a pattern without '/' matches the name in any directory).
DEFAULT_FILES = (
    ".env", ".env.*", "!.env.example", "!.env.sample", "!.env.template",
    "*.pem", "*.key", "*.p12", "*.pfx", "id_rsa*", "id_ed25519*", "id_ecdsa*", "id_dsa*",
    ".netrc", ".pypirc", ".npmrc", "*.tfstate", "*.tfstate.*", "credentials*.json", ".git-credentials",
)
# Environment variables whose values are secrets, by name (fnmatch, case-insensitive).
DEFAULT_ENV_PATTERNS = ("*KEY*", "*TOKEN*", "*SECRET*", "*PASSWORD*", "*PASSWD*", "*CREDENTIAL*", "*_PAT",
                        "*AUTH*")
MIN_VALUE_CHARS = 8  # a known value shorter than this is not redacted (it would match too much)
IGNORE_FILE = ".augerignore"
# Where a protected-file pattern comes from (`auger secrets check` says so)
DEFAULT_LAYER, USER_LAYER, PROJECT_LAYER = "default", "user config", "project config"


@dataclass(frozen=True)
class SecretsSettings:
    """What the configuration says about secrets, merged across its layers."""

    files: tuple[str, ...] = DEFAULT_FILES  # protected-file patterns: defaults, user's, project's (in order)
    # where each of `files` comes from, in the same order: DEFAULT_LAYER, USER_LAYER or PROJECT_LAYER
    file_sources: tuple[str, ...] = (DEFAULT_LAYER,) * len(DEFAULT_FILES)
    allow: tuple[str, ...] = ()  # patterns the user unprotected (user config only)
    env_patterns: tuple[str, ...] = DEFAULT_ENV_PATTERNS
    redact: bool = True
    diagnostics: tuple[str, ...] = field(default=(), compare=False)


def secrets_settings(config: Config) -> SecretsSettings:
    """The merged `[secrets]` settings of `config` (cached on it: a config is frozen once loaded)."""
    cached = getattr(config, "_secrets", None)
    if cached is None:
        cached = _merge(config.tables.get("secrets"), config.tables.get("project_secrets"))
        object.__setattr__(config, "_secrets", cached)
    return cached


def _merge(user: Any, project: Any) -> SecretsSettings:
    problems: list[str] = []
    user = _table(user, "[secrets]", problems)
    project = _table(project, "the project's [secrets]", problems)
    for key in sorted(set(project) - {"files"}):
        problems.append(f"the project's [secrets]: '{key}' ignored: a project may only add protected files")
    for key in sorted(set(user) - {"files", "allow", "env", "redact"}):
        problems.append(f"[secrets]: unknown key '{key}' ignored (files, allow, env, redact)")
    project_files = []
    for pattern in _strings(project.get("files"), "the project's [secrets] files", problems):
        if pattern.startswith("!"):  # it would unprotect: a project may only add
            problems.append(f"the project's [secrets] files: '{pattern}' ignored: a project may only add protected "
                            "files")
        else:
            project_files.append(pattern)
    layered = [*((p, DEFAULT_LAYER) for p in DEFAULT_FILES),
               *((p, USER_LAYER) for p in _strings(user.get("files"), "[secrets] files", problems)),
               *((p, PROJECT_LAYER) for p in project_files)]
    env = _strings(user.get("env"), "[secrets] env", problems) if "env" in user else DEFAULT_ENV_PATTERNS
    redact = user.get("redact", True)
    if not isinstance(redact, bool):
        problems.append(f"[secrets] redact must be true or false, not {redact!r} (redaction stays on)")
        redact = True
    return SecretsSettings(files=tuple(p for p, _ in layered), file_sources=tuple(source for _, source in layered),
                           allow=_strings(user.get("allow"), "[secrets] allow", problems),
                           env_patterns=tuple(env), redact=redact, diagnostics=tuple(problems))


def _table(value: Any, where: str, problems: list[str]) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.append(f"{where} must be a table (ignored)")
        return {}
    return value


def _strings(value: Any, where: str, problems: list[str]) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        problems.append(f"{where} must be a list of patterns (ignored)")
        return ()
    return tuple(v.strip() for v in value)
