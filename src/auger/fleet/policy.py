"""What a task may carry, and what a worker's operator decides: the fleet's trust boundary.

Whoever submits a task is not whoever runs the worker. A task is **data**: a prompt, a repository and
a base ref, a provider and model *by name*, a mode, budgets, an approval timeout, labels (priority,
queue and attempts travel beside it, in the task's row). It never carries configuration: no `-c`
settings, no base URL, no key variable, no command — those are the worker's own, and always win.

The check runs three times, because neither the submitter nor the database is trusted:

1. at `auger submit` and at `POST /api/fleet/tasks`, where a refused field is the submitter's error;
2. by the worker, on the record it reads from the database (`check_spec`): a row someone wrote by hand
   with `overrides` or `base_url` in it is refused, not run;
3. by the worker again against its operator's ceilings (`WorkerPolicy.admit`): the repository must match
   an `--allow-repo` pattern, the mode must be within `--mode` (refused, or capped with `--cap-mode`),
   the provider must be one the operator configured, and it must resolve to the very endpoint and key
   variable the operator's own configuration gives it (`check_endpoint`), so no layer — the task, the
   repository's `.auger/config.toml` — can send the worker's key elsewhere.

Repositories are matched by a canonical form (`canonical_repo`): URLs of the network transports only
(https, http, ssh, git, and scp-like `user@host:path`), with the host lower-cased, no credentials, query,
fragment or dot segments; local paths resolved. In a pattern `*` stays within one path segment and `**`
crosses them. Without `--allow-repo`, a worker takes remote repositories and no local path: a path on
the worker's machine is its operator's to offer.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import urlsplit

MODES = ("plan", "safe", "auto")  # from the strictest
KINDS = ("change", "review")
DELIVERIES = ("none", "branch", "pr", "comment")
MAX_TITLE_CHARS = 200
MAX_PROMPT_CHARS = 1 << 20
MAX_LABELS = 16
MAX_APPROVAL_TIMEOUT_S = 7 * 86400.0
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # a provider's name
_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/=+-]{0,63}")
_REMOTE_SCHEMES = ("https", "http", "ssh", "git")
_SCP_LIKE = re.compile(r"(?P<user>[A-Za-z0-9._-]+)@(?P<host>[A-Za-z0-9.-]+):(?P<path>[^:\\]+)")


class TaskRefused(ValueError):
    """A task that may not run as given: the message says which field and why, for its submitter or its
    record."""


# -- the spec: what a task may carry ----------------------------------------------------------
@dataclass(frozen=True)
class TaskSpec:
    """What to run: the prompt, in which repository at which base, with which model, how far it may go.
    Every field is data; the worker's configuration decides everything else."""

    prompt: str
    repo: str  # a git URL, or a path on the worker's machine
    ref: str = "HEAD"
    provider: str | None = None  # a provider the worker has configured, by name
    model: str | None = None  # a model name
    mode: str | None = None  # None: the worker's --mode
    token_budget: int | None = None  # at most the worker's own budget
    cost_budget: float | None = None
    approval_timeout_s: float = 600.0  # an approval unanswered this long parks the task (fleet/worker.py)
    labels: tuple[str, ...] = ()
    # What becomes of the result (fleet/deliver.py), where the worker's operator gave it a forge: nothing past
    # the database, a branch pushed, a pull request opened, or an answer in an issue's or pull request's thread.
    kind: str = "change"  # change: a session works on the checkout | review: review `ref` against `base`
    deliver: str = "none"  # none | branch | pr | comment
    base: str | None = None  # the branch a pull request targets, or a review compares against
    issue: int | None = None  # the issue or pull request a comment (or a review) answers in
    title: str | None = None  # a short title: the pull request's, and the branch's name after the task's id

    def to_json(self) -> dict[str, Any]:
        return {"prompt": self.prompt, "repo": self.repo, "ref": self.ref, "provider": self.provider,
                "model": self.model, "mode": self.mode, "token_budget": self.token_budget,
                "cost_budget": self.cost_budget, "approval_timeout_s": self.approval_timeout_s,
                "labels": list(self.labels), "kind": self.kind, "deliver": self.deliver, "base": self.base,
                "issue": self.issue, "title": self.title}


SPEC_FIELDS = frozenset(TaskSpec.__dataclass_fields__)
# What a submitter may have meant by a field a task may not carry, for the refusal.
CONFIGURATION = {"overrides": "-c settings", "base_url": "a base URL", "api_key_env": "a key variable",
                  "api_key": "a key", "config": "configuration", "notify": "a command"}


def check_spec(data: Any) -> TaskSpec:
    """A task's spec from its JSON form, every field checked; TaskRefused for anything else (a field a
    task may not carry first: that is the submitter's mistake to hear about)."""
    if not isinstance(data, Mapping):
        raise TaskRefused("a task's spec must be a JSON object")
    extra = sorted(set(data) - SPEC_FIELDS)
    if extra:
        named = ", ".join(f"{key!r}" + (f" ({CONFIGURATION[key]})" if key in CONFIGURATION else "")
                          for key in extra)
        raise TaskRefused(f"a task carries data, never configuration: {named} may not be set by a task "
                          "(the worker's operator configures its workers)")
    prompt = data.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise TaskRefused("a task needs a prompt: non-empty text")
    if len(prompt) > MAX_PROMPT_CHARS or "\x00" in prompt:
        raise TaskRefused(f"the prompt must be at most {MAX_PROMPT_CHARS} characters, without NUL")
    repo = data.get("repo")
    if not isinstance(repo, str) or not repo:
        raise TaskRefused("a task needs a repository: a git URL or a path on the worker's machine")
    canonical_repo(repo)  # refuses transports and forms no worker checks out
    kind, deliver = data.get("kind", "change"), data.get("deliver", "none")
    if kind not in KINDS:
        raise TaskRefused(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    if deliver not in DELIVERIES:
        raise TaskRefused(f"deliver must be one of {', '.join(DELIVERIES)}, not {deliver!r}")
    base = None if data.get("base") is None else _ref(data.get("base"))
    issue = data.get("issue")
    if issue is not None and (isinstance(issue, bool) or not isinstance(issue, int) or not 1 <= issue < 2**31):
        raise TaskRefused(f"issue must be an issue or pull request number, not {issue!r}")
    if kind == "review" and base is None:
        raise TaskRefused("a review task needs a base: the branch its ref is reviewed against")
    if kind == "review" and deliver in ("branch", "pr"):
        raise TaskRefused("a review task changes nothing: it delivers none, or a comment (a pull request review)")
    if deliver == "comment" and issue is None:
        raise TaskRefused("deliver comment needs an issue: the issue or pull request number to answer in")
    return TaskSpec(prompt=prompt, repo=repo, ref=_ref(data.get("ref", "HEAD")),
                    provider=_optional_name(data.get("provider"), "provider", _NAME),
                    model=_model(data.get("model")), mode=_mode(data.get("mode")),
                    token_budget=_budget(data.get("token_budget"), "token_budget", whole=True),
                    cost_budget=_budget(data.get("cost_budget"), "cost_budget"),
                    approval_timeout_s=_approval_timeout(data.get("approval_timeout_s", 600.0)),
                    labels=_labels(data.get("labels", ())), kind=str(kind), deliver=str(deliver), base=base,
                    issue=issue, title=_title(data.get("title")))


def _ref(value: Any) -> str:
    """A branch, tag or commit: never an option (`--upload-pack=…`), never a range or a control."""
    if not isinstance(value, str) or not value or len(value) > 256:
        raise TaskRefused("ref must be a branch, tag or commit name of at most 256 characters")
    if value.startswith("-") or any(c.isspace() or ord(c) < 32 or c in "~^:?*[\\" for c in value) \
            or ".." in value or value.endswith((".", "/", ".lock")) or "@{" in value:
        raise TaskRefused(f"ref {value!r} is not a branch, tag or commit name")
    return value


def _title(value: Any) -> str | None:
    """A short line of text: no control characters, at most MAX_TITLE_CHARS."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_TITLE_CHARS \
            or any(ord(c) < 32 or c == "\x7f" for c in value):
        raise TaskRefused(f"title must be one line of at most {MAX_TITLE_CHARS} characters")
    return value.strip()


def _optional_name(value: Any, what: str, pattern: re.Pattern[str]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise TaskRefused(f"{what} must be a name (letters, digits, '.', '_', '-'), not {value!r}")
    return value


def _model(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > 200 \
            or any(ord(c) < 32 or c == "\x7f" for c in value):
        raise TaskRefused(f"model must be a model's name, not {value!r}")
    return value


def _mode(value: Any) -> str | None:
    if value is None:
        return None
    if value not in MODES:
        raise TaskRefused(f"mode must be one of {', '.join(MODES)}, not {value!r}")
    return str(value)


def _budget(value: Any, what: str, whole: bool = False) -> Any:
    if value is None:
        return None
    number = isinstance(value, int) if whole else isinstance(value, (int, float))
    if isinstance(value, bool) or not number or not math.isfinite(value) or value <= 0:
        raise TaskRefused(f"{what} must be a {'whole ' if whole else ''}number above 0, not {value!r}")
    return value


def _approval_timeout(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 1 <= value <= MAX_APPROVAL_TIMEOUT_S:
        raise TaskRefused(f"approval_timeout_s must be between 1 and {int(MAX_APPROVAL_TIMEOUT_S)} seconds, "
                          f"not {value!r}")
    return float(value)


def _labels(value: Any) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or len(value) > MAX_LABELS:
        raise TaskRefused(f"labels must be a list of at most {MAX_LABELS} names")
    for label in value:
        if not isinstance(label, str) or not _LABEL.fullmatch(label):
            raise TaskRefused(f"label {label!r} must be 1-64 letters, digits or '._:/=+-'")
    return tuple(dict.fromkeys(value))


def check_row(queue: Any, priority: Any, max_attempts: Any) -> None:
    """What travels beside the spec in the task's row."""
    if not isinstance(queue, str) or not _NAME.fullmatch(queue):
        raise TaskRefused(f"queue must be a name (letters, digits, '.', '_', '-'), not {queue!r}")
    if isinstance(priority, bool) or not isinstance(priority, int) or not -1000 <= priority <= 1000:
        raise TaskRefused(f"priority must be a whole number from -1000 to 1000, not {priority!r}")
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or not 1 <= max_attempts <= 20:
        raise TaskRefused(f"max_attempts must be a whole number from 1 to 20, not {max_attempts!r}")


# -- repositories --------------------------------------------------------------------------------
def is_remote(repo: str) -> bool:
    """Whether `repo` names a repository by URL or scp-like address (else: a path)."""
    return "://" in repo or "::" in repo or _SCP_LIKE.fullmatch(repo) is not None


def canonical_repo(repo: str) -> str:
    """The form a repository is matched in: `scheme://host[:port]/path` for a URL (`ssh://user@host/path`
    for an scp-like address), the resolved absolute path for a local one. TaskRefused for anything a
    worker never checks out: other transports (`file://`, `ext::`), credentials in the URL, a query or
    fragment, dot segments, control characters."""
    if len(repo) > 2048 or any(ord(c) < 32 or c == "\x7f" for c in repo):
        raise TaskRefused("repository must be a git URL or a path, without control characters")
    if repo.startswith("-"):
        raise TaskRefused(f"repository {repo!r} is not a git URL or a path")
    if "://" in repo:
        return _canonical_url(repo)
    scp = _SCP_LIKE.fullmatch(repo)
    if scp is not None:
        path = scp.group("path")
        _no_dot_segments(path, repo)
        return f"ssh://{scp.group('user')}@{scp.group('host').lower()}/{path.lstrip('/')}"
    if "::" in repo:  # git's remote helpers: `ext::sh -c …`, `fd::…`
        raise TaskRefused(f"repository {repo!r} names a git transport no worker uses")
    if not os.path.isabs(os.path.expanduser(repo)):
        raise TaskRefused(f"repository {repo!r} must be a git URL or an absolute path")
    return os.path.realpath(os.path.expanduser(repo))


def _canonical_url(repo: str) -> str:
    try:
        parts = urlsplit(repo)
        port = parts.port
    except ValueError:
        raise TaskRefused(f"repository {repo!r} is not a URL git can use") from None
    scheme = parts.scheme.lower()
    if scheme not in _REMOTE_SCHEMES:
        raise TaskRefused(f"repository {repo!r}: the {scheme or 'empty'}:// transport is not one a worker uses "
                          f"({', '.join(_REMOTE_SCHEMES)})")
    if not parts.hostname:
        raise TaskRefused(f"repository {repo!r} names no host")
    if parts.password is not None or (parts.username is not None and scheme != "ssh"):
        raise TaskRefused(f"repository {repo!r} carries credentials: a worker uses its own")
    if parts.query or parts.fragment or "#" in repo:
        raise TaskRefused(f"repository {repo!r} has a query or fragment")
    _no_dot_segments(parts.path, repo)
    user = f"{parts.username}@" if parts.username else ""
    where = parts.hostname.lower() + (f":{port}" if port is not None else "")
    return f"{scheme}://{user}{where}{parts.path or '/'}"


def _no_dot_segments(path: str, repo: str) -> None:
    if any(segment in (".", "..") for segment in path.split("/")):
        raise TaskRefused(f"repository {repo!r} has '.' or '..' in its path")


def repo_pattern(pattern: str) -> re.Pattern[str]:
    """An --allow-repo pattern: `*` within a path segment, `**` across them, `?` one character."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))


def canonical_pattern(pattern: str) -> str:
    """An --allow-repo pattern in the form repositories are matched in (`canonical_repo`), its wildcards
    kept: scp-like addresses as ssh:// URLs, the scheme and host lower-cased, a local path's directories
    resolved up to its first wildcard."""
    scp = _SCP_LIKE.fullmatch(pattern)
    if scp is not None:
        return f"ssh://{scp.group('user')}@{scp.group('host').lower()}/{scp.group('path').lstrip('/')}"
    if "://" in pattern:
        scheme, _, rest = pattern.partition("://")
        where, slash, path = rest.partition("/")
        return f"{scheme.lower()}://{where.lower()}{slash}{path}"
    expanded = os.path.expanduser(pattern)
    cuts = [expanded.find(c) for c in "*?" if c in expanded]
    if not cuts:
        return os.path.realpath(expanded)
    head, _, tail = expanded[:min(cuts)].rpartition("/")
    return os.path.realpath(head or "/").rstrip("/") + "/" + tail + expanded[min(cuts):]


# -- the operator's ceilings -------------------------------------------------------------------
@dataclass(frozen=True)
class WorkerPolicy:
    """What the worker's operator lets a task do (`auger worker` flags)."""

    mode: str = "auto"  # the most permissive mode a task runs in (--mode)
    cap_mode: bool = False  # a task asking for more runs at `mode` (--cap-mode) instead of being refused
    allow_repos: tuple[str, ...] = ()  # --allow-repo patterns; none: remote repositories only
    providers: frozenset[str] = field(default_factory=frozenset)  # the providers a task may name

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}")

    def admit(self, spec: TaskSpec) -> str:
        """The mode the task runs in, once its repository and provider are allowed; TaskRefused with the
        reason for its record otherwise."""
        self.check_repo(spec.repo)
        if spec.provider is not None and spec.provider not in self.providers:
            raise TaskRefused(f"provider {spec.provider!r} is not one this worker offers "
                              f"({', '.join(sorted(self.providers)) or 'none'})")
        asked = spec.mode or self.mode
        if MODES.index(asked) <= MODES.index(self.mode):
            return asked
        if self.cap_mode:
            return self.mode
        raise TaskRefused(f"mode {asked!r} is more permissive than this worker allows ({self.mode!r}; "
                          "its operator may let such tasks run capped with --cap-mode)")

    def check_repo(self, repo: str) -> None:
        canonical = canonical_repo(repo)
        local = canonical.startswith("/")
        if not self.allow_repos:
            if local:
                raise TaskRefused(f"repository {repo} is a path on the worker's machine: a worker checks one out "
                                  "only when its operator allows it (auger worker --allow-repo PATH)")
            return
        if not any(repo_pattern(canonical_pattern(p)).fullmatch(canonical) for p in self.allow_repos):
            raise TaskRefused(f"repository {repo} is not one this worker may check out (its --allow-repo "
                              "patterns do not match it)")


def check_endpoint(provider: str, task_config: Any, worker_config: Any) -> None:
    """The worker's key goes only to the worker's endpoints: the provider the task's session would use
    must resolve — whatever chose it, and with every layer of the session's configuration applied — to
    exactly the base URL and key variable the worker's own configuration gives that provider."""
    import dataclasses

    from auger.models.registry import ProviderError, provider_for

    try:
        used = provider_for(task_config)
        own = provider_for(dataclasses.replace(worker_config, provider=provider))
    except ProviderError as exc:
        raise TaskRefused(str(exc)) from None
    if (used.base_url, used.key_env, used.wire) != (own.base_url, own.key_env, own.wire):
        raise TaskRefused(f"provider {provider!r} would be reached at {used.base_url or 'no address'} with "
                          f"{used.key_env or 'no key'}, not where this worker's configuration sends it: refused")
