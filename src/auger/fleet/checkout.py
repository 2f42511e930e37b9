"""A task's fresh checkout: a clone of its repository at the base ref, in the worker's data dir, removed
after the task. Every attempt starts from the base again — a retry never sees what a dead attempt left.

The clone runs git in a scrubbed environment (no hooks of the user's global config run: `core.hooksPath`
is empty for it), `--no-checkout` first so the ref may be a branch, a tag or a commit of the source, and
a local path is cloned `--shared` (objects borrowed, nothing copied)."""

from __future__ import annotations

import asyncio
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from auger.fleet.policy import is_remote

_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C",
            "GIT_AUTHOR_NAME": "auger", "GIT_AUTHOR_EMAIL": "auger@localhost",
            "GIT_COMMITTER_NAME": "auger", "GIT_COMMITTER_EMAIL": "auger@localhost"}


class CheckoutError(Exception):
    """The repository or the ref could not be checked out (the message says which and why)."""


@dataclass(frozen=True)
class Checkout:
    path: Path
    base: str  # the commit the ref named

    async def diff(self) -> str:
        """Everything the task changed against the base — new files included — as `git diff --binary`."""
        await git(self.path, "add", "-A")
        return await git(self.path, "diff", "--cached", "--binary", self.base)

    async def apply(self, diff: str) -> None:
        """Bring the tree to where an earlier attempt left it: `diff` as `diff()` gave it (a parked task
        resumed on another machine)."""
        if diff:
            await git(self.path, "apply", "--binary", "--index", "-", input=diff)

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


async def checkout(repo: str, ref: str, where: Path) -> Checkout:
    """Clone `repo` (a local path or a git URL) into `where` and detach HEAD at `ref` — fetched by name when
    the clone's branches and tags do not hold it (a pull request's `refs/pull/N/head`, a commit of one)."""
    where.parent.mkdir(parents=True, exist_ok=True)
    source = repo
    shared: list[str] = []
    if not is_remote(repo):
        source = os.path.abspath(os.path.expanduser(repo))
        if not os.path.isdir(source):
            raise CheckoutError(f"repository {repo} is not a directory")
        shared = ["--shared"]
    try:
        await git(None, *transports(repo), "clone", "--quiet", "--no-checkout", *shared, source, str(where))
        try:
            base = await _commit(where, ref)
        except CheckoutError as missing:
            try:
                await git(where, *transports(repo), "fetch", "--quiet", "--no-tags", "origin", ref)
            except CheckoutError:
                raise missing from None  # what the ref is not says more than the fetch's failure
            base = await _commit(where, "FETCH_HEAD")
        await git(where, "checkout", "--quiet", "--detach", base)
    except CheckoutError:
        shutil.rmtree(where, ignore_errors=True)
        raise
    return Checkout(where, base)


def transports(repo: str) -> list[str]:
    """Only the transport the repository names, no redirect to another host, no submodule fetched: what the
    operator's --allow-repo matched is what is cloned, fetched and pushed to (fleet/policy.py has refused
    every other form)."""
    allowed = ("file",) if not is_remote(repo) else ("https", "http", "ssh", "git")
    return ["-c", "protocol.allow=never", "-c", "http.followRedirects=false",
            *(arg for name in allowed for arg in ("-c", f"protocol.{name}.allow=always"))]


async def _commit(where: Path, ref: str) -> str:
    return (await git(where, "rev-parse", "--verify", "--end-of-options", f"{ref}^{{commit}}")).strip()


async def resolve_branch(where: Path, name: str) -> str:
    """The commit a branch of the clone's origin (or any ref) names: `origin/NAME` first."""
    try:
        return await _commit(where, f"refs/remotes/origin/{name}")
    except CheckoutError:
        return await _commit(where, name)


async def default_branch(where: Path) -> str:
    """The name of the origin's default branch, as the clone recorded it (main when it did not)."""
    try:
        ref = (await git(where, "symbolic-ref", "--quiet", "refs/remotes/origin/HEAD")).strip()
    except CheckoutError:
        return "main"
    return ref.removeprefix("refs/remotes/origin/") or "main"


async def git(cwd: Path | None, *args: str, input: str | None = None,
              config: list[tuple[str, str]] | None = None) -> str:
    """Run git in the scrubbed environment; `config` adds settings through the environment
    (GIT_CONFIG_COUNT…), never the command line (where other users see it) nor a file."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, **_GIT_ENV}
    for i, (key, value) in enumerate(config or ()):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
    if config:
        env["GIT_CONFIG_COUNT"] = str(len(config))
    proc = await asyncio.create_subprocess_exec(
        "git", "-c", "core.hooksPath=", "-c", "advice.detachedHead=false", *args, cwd=cwd, env=env,
        stdin=asyncio.subprocess.DEVNULL if input is None else asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate(None if input is None else input.encode("utf-8", "surrogateescape"))
    if proc.returncode != 0:
        said = err.decode(errors="replace").strip() or proc.returncode
        raise CheckoutError(f"git {args[_verb(args)]} failed: {said}")
    return out.decode("utf-8", "surrogateescape")


def _verb(args: tuple[str, ...]) -> int:
    """Where the git command's own name is in `args` (after any `-c key=value`)."""
    i = 0
    while i < len(args) - 1 and args[i] == "-c":
        i += 2
    return i


