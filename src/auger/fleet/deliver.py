"""What becomes of a finished task's result past the database, as its spec asks (`deliver`) and the
worker's forge allows (fleet/forge.py): a branch, a pull request, a comment in a thread, a review.

**A branch** (`deliver = "branch"` or `"pr"`): the task's diff against its base is committed on
`auger/<task>-<title>` and pushed to the task's repository. Not from the session's checkout: the model
could write there, `.git/config` included (a redirect of the remote, a credential helper, a hook), so the
commit is made in a fresh clone at the same base that no session ever touched, with the diff as data
(`git apply`). The push uses the worker's credentials — its forge's token as an HTTP header given through
the environment to this one git process, only for the forge's own hosts; for ssh, the worker's own keys —
never anything of the model's: the session's sandbox sees neither. A branch of that name already there
with the same tree is a repeated delivery (nothing pushed); with another tree it is left alone, and the
delivery fails saying so.

**A pull request** (`"pr"`): from that branch into `base` (or the task's ref when it names a branch, or
the repository's default branch), titled after the task; one per task — the forge is asked for a pull
request from the branch before one is opened.

**A comment** (`"comment"` on `issue`): the final message, in the issue's or pull request's thread; a
review task's is a pull request review whose findings land as line comments on the lines the pull
request adds, the others listed in the review's body. Marked with the task's id, posted once.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from auger.fleet.checkout import CheckoutError, checkout, default_branch, git, transports
from auger.fleet.forge import Forge, ForgeError, LineComment, marker
from auger.ids import new_hex

if TYPE_CHECKING:
    from auger.changes.review_change import Change
    from auger.engine.agents.review import ReviewResult
    from auger.fleet.policy import TaskSpec

MAX_SLUG = 40
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")


class DeliveryError(Exception):
    """The result could not be delivered as asked (one line: what and why)."""


def branch_name(task_id: str, title: str) -> str:
    """`auger/<task>-<slug>`: the task's id (its first 12 hex digits) and a slug of its title."""
    slug = "-".join(re.findall(r"[a-z0-9]+", title.lower()))[:MAX_SLUG].strip("-") or "task"
    return f"auger/{task_id[:12]}-{slug}"


def title_of(spec: TaskSpec) -> str:
    """The task's title: its own, or its prompt's first line, cut short."""
    if spec.title:
        return spec.title
    first = next((line.strip() for line in spec.prompt.splitlines() if line.strip()), "auger task")
    return first if len(first) <= 72 else first[:71].rstrip() + "…"


@dataclass
class Delivery:
    forge: Forge
    repository: str  # the forge's name for the task's repository
    data_dir: Path

    async def change(self, spec: TaskSpec, task_id: str, base_commit: str, diff: str, final: str) -> dict[str, Any]:
        """Deliver a change task's result; what was delivered (DeliveryError when it could not be)."""
        out: dict[str, Any] = {"forge": self.forge.name, "repository": self.repository}
        try:
            if spec.deliver == "comment":
                assert spec.issue is not None, "fleet/policy.py requires it"
                out["comment"] = await self.forge.comment(self.repository, spec.issue, final or "(no answer)", task_id)
                return out
            if not diff.strip():
                out["note"] = "the task changed nothing: no branch was pushed"
                return out
            title = title_of(spec)
            branch = branch_name(task_id, title)
            out["branch"], out["commit"], base = branch, *await self._push(spec, task_id, base_commit, diff, branch,
                                                                           title)
            if spec.deliver == "pr":
                pull = await self.forge.find_pull(self.repository, branch)
                if pull is None:
                    body = f"{final.strip() or title}\n\n---\nOpened by auger task `{task_id}`.\n\n{marker(task_id)}"
                    pull = await self.forge.open_pull(self.repository, branch, base, title, body)
                out["pull_request"] = {"number": pull.number, "url": pull.url, "base": pull.base}
            return out
        except (ForgeError, CheckoutError) as exc:
            raise DeliveryError(str(exc)) from None

    async def _push(self, spec: TaskSpec, task_id: str, base_commit: str, diff: str, branch: str, title: str
                    ) -> tuple[str, str]:
        """Commit the diff on `branch` in a fresh clone and push it; (the commit, the pull request's base)."""
        where = self.data_dir / "deliveries" / f"{task_id}-{new_hex(6)}"
        tree = await checkout(spec.repo, base_commit, where)
        try:
            await tree.apply(diff)
            await git(where, "commit", "--quiet", "--no-verify", "-m", f"{title}\n\nauger task {task_id}")
            commit = (await git(where, "rev-parse", "HEAD")).strip()
            named = spec.ref != "HEAD" and await _is_branch(where, spec.ref)
            base = spec.base or (spec.ref if named else await default_branch(where))
            auth = self.forge.push_config(spec.repo)
            there = (await git(where, *transports(spec.repo), "ls-remote", "origin", f"refs/heads/{branch}",
                               config=auth)).split()
            if there:
                await git(where, *transports(spec.repo), "fetch", "--quiet", "--no-tags", "origin",
                          f"refs/heads/{branch}", config=auth)
                theirs = (await git(where, "rev-parse", "FETCH_HEAD^{tree}")).strip()
                if theirs != (await git(where, "rev-parse", "HEAD^{tree}")).strip():
                    raise DeliveryError(f"branch {branch} exists with other changes: it was left as it is")
                return there[0], base  # pushed before: a repeated delivery
            await git(where, *transports(spec.repo), "push", "--quiet", "origin", f"HEAD:refs/heads/{branch}",
                      config=auth)
            return commit, base
        finally:
            shutil.rmtree(where, ignore_errors=True)

    async def review(self, spec: TaskSpec, task_id: str, head: str, result: ReviewResult, change: Change
                     ) -> dict[str, Any]:
        """Post a review task's findings as a pull request review: line comments on added lines, the rest in
        its body."""
        out: dict[str, Any] = {"forge": self.forge.name, "repository": self.repository}
        if spec.deliver != "comment" or spec.issue is None:
            return out
        added = added_lines(change.text)
        comments: list[LineComment] = []
        elsewhere: list[str] = []
        for finding in result.findings:
            text = f"**{finding.title}** (P{finding.priority})\n\n{finding.body}".strip()
            line = _landing(finding, added)
            if line is not None and finding.file is not None:
                comments.append(LineComment(finding.file, line, text))
            else:
                where = f"{finding.file}:{finding.line_start}" if finding.file and finding.line_start else \
                    finding.file or "general"
                elsewhere.append(f"- `{where}` — {finding.title}: {finding.body}")
        body = f"**{result.verdict}** — {result.summary}".strip()
        if elsewhere:
            body += "\n\nFindings outside the lines this pull request adds:\n" + "\n".join(elsewhere)
        try:
            out["review"] = await self.forge.review(self.repository, spec.issue, head, body, comments, task_id)
        except ForgeError as exc:
            raise DeliveryError(str(exc)) from None
        out["line_comments"] = len(comments)
        return out


async def _is_branch(where: Path, ref: str) -> bool:
    try:
        await git(where, "rev-parse", "--verify", "--quiet", f"refs/remotes/origin/{ref}")
    except CheckoutError:
        return False
    return True


def added_lines(diff: str) -> dict[str, set[int]]:
    """File -> the new-side numbers of the lines the diff adds (where a review comment lands on a change)."""
    files: dict[str, set[int]] = {}
    current: set[int] | None = None
    line = 0
    for text in diff.splitlines():
        if text.startswith("+++ "):
            path = text[4:].strip()
            current = None if path == "/dev/null" else files.setdefault(path.removeprefix("b/"), set())
        elif text.startswith("diff --git "):
            current = None
        elif (m := _HUNK.match(text)) is not None:
            line = int(m.group(1))
        elif current is not None and text.startswith("+"):
            current.add(line)
            line += 1
        elif current is not None and not text.startswith("-") and not text.startswith("\\"):
            line += 1
    return files


def _landing(finding: Any, added: dict[str, set[int]]) -> int | None:
    """The first added line within the finding's lines, None when it names none."""
    if finding.file is None or finding.line_start is None:
        return None
    lines = added.get(finding.file, set())
    end = finding.line_end or finding.line_start
    return next((n for n in range(finding.line_start, end + 1) if n in lines), None)
