"""Forges: where a task's result goes past the database — a pull request, a comment in an issue's thread,
a pull request review — through one small interface (`Forge`) that GitHub's REST API implements first
and other forges can implement the same way.

A forge is the worker's operator's: a `[forge]` table in the worker's own config (never a project's, never
a task's), with the API's address (`api_url`: GitHub, or a GitHub Enterprise Server's
`https://HOST/api/v3`), the variable holding its token (`token_env`, read by the worker process alone: a
session's commands run with the allow-listed environment of policy/env.py, which never carries it), the
hosts whose repository URLs are the forge's, and names for repositories reached another way (a mirror, a
local path: `[forge.repos] "/srv/git/app.git" = "org/app"`). A task only ever says *what* to deliver; the
forge repository it goes to is derived from the task's repository — which the operator's `--allow-repo`
admitted — never named by the task, so no task can point the operator's token at another repository.

Every write is idempotent for its task: a pull request is looked for by its head branch before one is
opened, and a comment or review carries a marker (`<!-- auger-task:ID -->`) looked for before one is
posted — a delivery repeated (a retried attempt, a replayed webhook) opens and posts nothing twice.
"""

from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol
from urllib.parse import urlsplit

from auger.fleet.policy import canonical_repo, is_remote

API_VERSION = "2022-11-28"
GITHUB_API = "https://api.github.com"
MAX_PAGES = 10
_REPO_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}")


class ForgeError(Exception):
    """The forge refused or could not be reached; one line saying which request and why."""


@dataclass(frozen=True)
class PullRequest:
    number: int
    url: str
    head: str
    base: str


@dataclass(frozen=True)
class LineComment:
    """A review comment on one line of the pull request's new side."""

    path: str
    line: int
    body: str


def marker(task_id: str) -> str:
    """The text a task's comment or review carries, so a repeated delivery finds it and posts nothing."""
    return f"<!-- auger-task:{task_id} -->"


class Forge(Protocol):
    """What a delivery asks of a forge. `repository` names the forge's repository for a task's (None: not
    this forge's); `push_config` gives the git settings that push there with the operator's credentials."""

    @property
    def name(self) -> str: ...

    def repository(self, repo: str) -> str | None: ...
    def push_config(self, repo: str) -> list[tuple[str, str]]: ...
    async def find_pull(self, repository: str, branch: str) -> PullRequest | None: ...
    async def open_pull(self, repository: str, branch: str, base: str, title: str, body: str) -> PullRequest: ...
    async def comment(self, repository: str, number: int, body: str, task_id: str) -> str: ...
    async def review(self, repository: str, number: int, commit: str, body: str, comments: list[LineComment],
                     task_id: str) -> str: ...


class ForgeConfigError(ValueError):
    """The operator's `[forge]` table cannot be used (the message names the key)."""


@dataclass(frozen=True)
class GitHub:
    """GitHub's REST API (api.github.com, or a GitHub Enterprise Server's `/api/v3`)."""

    token: str
    api_url: str = GITHUB_API
    hosts: tuple[str, ...] = ("github.com",)
    repos: Mapping[str, str] = field(default_factory=dict)  # canonical repository -> owner/name
    name: str = "github"

    def repository(self, repo: str) -> str | None:
        try:
            canonical = canonical_repo(repo)
        except ValueError:
            return None
        if canonical in self.repos:
            return self.repos[canonical]
        if not is_remote(repo):
            return None
        parts = urlsplit(canonical)
        if (parts.hostname or "") not in self.hosts:
            return None
        path = parts.path.strip("/").removesuffix(".git")
        return path if _REPO_NAME.fullmatch(path) else None

    def push_config(self, repo: str) -> list[tuple[str, str]]:
        """An `Authorization` header for https pushes to this forge's hosts (git's http.<url>.extraHeader),
        nothing for any other address: the token never goes to a host that is not the forge's."""
        try:
            parts = urlsplit(canonical_repo(repo))
        except ValueError:
            return []
        if parts.scheme != "https" or (parts.hostname or "") not in self.hosts:
            return []
        basic = base64.b64encode(f"x-access-token:{self.token}".encode()).decode()
        return [(f"http.https://{parts.netloc}/.extraheader", f"AUTHORIZATION: basic {basic}")]

    # -- the REST API ----------------------------------------------------------------------
    async def _call(self, method: str, path: str, json: Any = None, params: dict[str, Any] | None = None) -> Any:
        import httpx

        headers = {"accept": "application/vnd.github+json", "authorization": f"Bearer {self.token}",
                   "x-github-api-version": API_VERSION, "user-agent": "auger"}
        try:
            async with httpx.AsyncClient(base_url=self.api_url.rstrip("/"), timeout=30, follow_redirects=False,
                                         trust_env=False) as client:
                response = await client.request(method, path, json=json, params=params, headers=headers)
        except httpx.HTTPError as exc:
            raise ForgeError(f"{method} {path}: {type(exc).__name__}: {exc}") from None
        if response.status_code >= 300:
            try:
                said = response.json().get("message", "")
            except ValueError:
                said = response.text[:200]
            raise ForgeError(f"{method} {path}: {response.status_code} {said}".strip())
        return response.json() if response.content else None

    async def _pages(self, path: str, params: dict[str, Any] | None = None) -> list[Any]:
        found: list[Any] = []
        for page in range(1, MAX_PAGES + 1):
            batch = await self._call("GET", path, params={**(params or {}), "per_page": 100, "page": page})
            found += batch or []
            if not batch or len(batch) < 100:
                break
        return found

    async def find_pull(self, repository: str, branch: str) -> PullRequest | None:
        owner = repository.split("/")[0]
        for pull in await self._pages(f"/repos/{repository}/pulls", {"head": f"{owner}:{branch}", "state": "all"}):
            if pull.get("head", {}).get("ref") == branch:
                return _pull(pull)
        return None

    async def open_pull(self, repository: str, branch: str, base: str, title: str, body: str) -> PullRequest:
        return _pull(await self._call("POST", f"/repos/{repository}/pulls",
                                      json={"title": title, "head": branch, "base": base, "body": body}))

    async def comment(self, repository: str, number: int, body: str, task_id: str) -> str:
        mark = marker(task_id)
        for existing in await self._pages(f"/repos/{repository}/issues/{number}/comments"):
            if mark in (existing.get("body") or ""):
                return str(existing.get("html_url", ""))
        posted = await self._call("POST", f"/repos/{repository}/issues/{number}/comments",
                                  json={"body": f"{body}\n\n{mark}"})
        return str(posted.get("html_url", ""))

    async def review(self, repository: str, number: int, commit: str, body: str, comments: list[LineComment],
                     task_id: str) -> str:
        mark = marker(task_id)
        for existing in await self._pages(f"/repos/{repository}/pulls/{number}/reviews"):
            if mark in (existing.get("body") or ""):
                return str(existing.get("html_url", ""))
        posted = await self._call("POST", f"/repos/{repository}/pulls/{number}/reviews", json={
            "commit_id": commit, "body": f"{body}\n\n{mark}", "event": "COMMENT",
            "comments": [{"path": c.path, "line": c.line, "side": "RIGHT", "body": c.body} for c in comments]})
        return str(posted.get("html_url", ""))


def _pull(data: Any) -> PullRequest:
    try:
        return PullRequest(int(data["number"]), str(data.get("html_url", "")), str(data["head"]["ref"]),
                           str(data["base"]["ref"]))
    except (KeyError, TypeError, ValueError):
        raise ForgeError("the forge answered with something that is not a pull request") from None


_FORGE_KEYS = {"kind", "api_url", "token_env", "hosts", "repos"}


def forge_from_config(tables: Mapping[str, Any], env: Mapping[str, str] | None = None) -> GitHub | None:
    """The operator's `[forge]` table as a Forge (None: there is none); ForgeConfigError when it is unusable."""
    table = tables.get("forge")
    if table is None:
        return None
    if not isinstance(table, Mapping):
        raise ForgeConfigError("[forge] must be a table")
    unknown = sorted(set(table) - _FORGE_KEYS)
    if unknown:
        raise ForgeConfigError(f"[forge]: unknown key(s) {', '.join(unknown)}")
    if table.get("kind", "github") != "github":
        raise ForgeConfigError("[forge]: kind must be github (the one adapter so far)")
    api_url = str(table.get("api_url", GITHUB_API)).rstrip("/")
    parts = urlsplit(api_url)
    if parts.scheme not in ("https", "http") or not parts.hostname or parts.query or parts.fragment:
        raise ForgeConfigError(f"[forge]: api_url {api_url!r} is not an http(s) URL")
    token_env = table.get("token_env", "GITHUB_TOKEN")
    token = (os.environ if env is None else env).get(str(token_env), "")
    if not token:
        raise ForgeConfigError(f"[forge]: the variable {token_env} holding its token is not set")
    default_host = "github.com" if api_url == GITHUB_API else parts.hostname
    hosts = table.get("hosts", [default_host])
    if not isinstance(hosts, list) or not all(isinstance(h, str) and h for h in hosts):
        raise ForgeConfigError("[forge]: hosts must be a list of host names")
    repos: dict[str, str] = {}
    raw = table.get("repos", {})
    if not isinstance(raw, Mapping):
        raise ForgeConfigError("[forge.repos] must be a table of repository = \"owner/name\"")
    for repo, name in raw.items():
        if not isinstance(name, str) or not _REPO_NAME.fullmatch(name):
            raise ForgeConfigError(f"[forge.repos]: {name!r} is not an owner/name")
        try:
            repos[canonical_repo(repo)] = name
        except ValueError as exc:
            raise ForgeConfigError(f"[forge.repos]: {exc}") from None
    return GitHub(token, api_url, tuple(h.lower() for h in hosts), repos)
