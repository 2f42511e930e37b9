"""Review mode: a read-only session reviews one change and answers with structured findings.

Why it is built this way:

* The change is what git says it is, read without changing anything: the uncommitted work (staged,
  unstaged and untracked files against HEAD), a branch (from its merge base with BRANCH to HEAD) or
  one commit (against its first parent). Git runs in the scrubbed environment the snapshots use (no
  user or system configuration, no hooks, no fsmonitor, no optional index writes) and without
  external diff programs or textconv filters, so reviewing never runs what a configuration names and
  never touches the user's index, HEAD or stash. Untracked files are diffed one by one against
  /dev/null (`--no-index`), never added to any index.
* The session is an ordinary stored session in `plan` mode (no writes, every command read-only), so
  `auger sessions` lists it and `auger resume` can follow up on its findings. The model gets the review
  instructions (context/review_prompt.md), the JSON Schema of the answer and the diff in one message.
* The answer is checked against that schema (REVIEW_SCHEMA, written once: the prompt shows it and
  `schema_error` checks it). A malformed answer is sent back once with the error quoted; a second
  malformed answer is a ReviewFailed that keeps both raw replies.
* Findings are kept whatever they point at, but those naming a file or lines the diff does not touch
  are flagged (`outside_diff`): the model may be right about the surroundings, and the reader should know.
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import re
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal

from auger.protocol.events import AgentMessage, TurnEnded
from auger.protocol.ops import Shutdown, UserTurn

if TYPE_CHECKING:
    from auger.engine.sessions import SessionManager
    from auger.models.base import ModelClient
    from auger.protocol.envelope import Envelope

MAX_DIFF_CHARS = 400_000  # the diff sent to the model; past it the model is told which files to read
MAX_UNTRACKED = 300  # untracked files diffed; more are listed by name only
MAX_UNTRACKED_BYTES = 1 << 20  # a larger untracked file is named, not shown
GIT_TIMEOUT = 60.0  # seconds for one git command
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")

REVIEW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["findings", "verdict", "summary"],
    "properties": {
        "findings": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["title", "body", "priority", "confidence", "file", "line_start", "line_end"],
                "properties": {
                    "title": {"type": "string", "minLength": 1},
                    "body": {"type": "string"},
                    "priority": {"type": "integer", "minimum": 0, "maximum": 3},
                    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                    "file": {"type": ["string", "null"]},
                    "line_start": {"type": ["integer", "null"], "minimum": 1},
                    "line_end": {"type": ["integer", "null"], "minimum": 1},
                },
            },
        },
        "verdict": {"type": "string", "enum": ["correct", "needs changes"]},
        "summary": {"type": "string"},
    },
}


class ReviewError(Exception):
    """The change cannot be read (not a git repository, an unknown branch or commit); one line."""


class ReviewFailed(Exception):
    """The review did not produce a valid answer. `raw` keeps the model's replies, `session_id` the session."""

    def __init__(self, message: str, session_id: str, raw: list[str]) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.raw = raw


class ReviewInvalid(ValueError):
    """A reply that is not a valid review; the message says where and why."""


# ------------------------------------------------------------------ what to review


@dataclass(frozen=True)
class ReviewTarget:
    """What to review: `uncommitted` work, a branch against `base`, or one `commit`."""

    kind: Literal["uncommitted", "base", "commit"] = "uncommitted"
    ref: str | None = None

    def describe(self) -> str:
        if self.kind == "base":
            return f"changes on this branch since it left {self.ref}"
        if self.kind == "commit":
            return f"commit {self.ref}"
        return "uncommitted changes (staged, unstaged and untracked) against HEAD"


@dataclass
class Change:
    """The diff under review. `ranges` maps each file the diff touches to the line ranges of its new
    side that the hunks show; `revision` is the commit whose files the lines refer to (None: the
    working tree)."""

    target: ReviewTarget
    text: str
    ranges: dict[str, list[tuple[int, int]]]
    revision: str | None
    omitted: list[str] = field(default_factory=list)  # files named but not shown (too many, too big, cut)
    truncated: bool = False  # the diff was longer than MAX_DIFF_CHARS and is cut

    @property
    def empty(self) -> bool:
        return not self.ranges and not self.omitted


class _Git:
    """Read-only git in the project, in the scrubbed environment of snapshots."""

    def __init__(self, root: Path, home: str) -> None:
        from auger.changes.snapshots import GIT_HOOKS_OFF, scrubbed_git_env

        self.root = root
        self.env = scrubbed_git_env(Path(home))
        self.argv = ["git"] + [arg for item in (*GIT_HOOKS_OFF, "core.quotePath=false", "color.ui=false",
                                                "core.attributesFile=/dev/null") for arg in ("-c", item)]

    async def run(self, *args: str, ok: tuple[int, ...] = (0,)) -> bytes:
        proc = await asyncio.create_subprocess_exec(
            *self.argv, *args, cwd=self.root, env=self.env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), GIT_TIMEOUT)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise ReviewError(f"git {args[0]} took longer than {GIT_TIMEOUT:.0f} s") from None
        if proc.returncode not in ok:
            lines = err.decode("utf-8", "replace").strip().splitlines()
            said = next((x for x in lines if x.startswith(("fatal:", "error:"))), lines[-1] if lines else "")
            raise ReviewError(f"git {args[0]} failed: {said or f'exit status {proc.returncode}'}")
        return out

    async def commit(self, ref: str, what: str) -> str:
        """The commit `ref` names, or a ReviewError naming what was asked for."""
        if not ref or ref.startswith("-") or any(c in ref for c in "\0\n"):
            raise ReviewError(f"{what} {ref!r} is not a branch or commit name")
        try:
            return (await self.run("rev-parse", "--verify", "--quiet", "--end-of-options",
                                   f"{ref}^{{commit}}")).decode().strip()
        except ReviewError:
            raise ReviewError(f"{what} {ref!r} names no commit in this repository") from None

    async def empty_tree(self) -> str:
        return (await self.run("hash-object", "-t", "tree", "/dev/null")).decode().strip()

    async def diff(self, *args: str) -> bytes:
        return await self.run("diff", "--no-color", "--no-ext-diff", "--no-textconv", "--relative", "-M",
                              *args)


async def collect_change(root: Path, target: ReviewTarget) -> Change:
    """Read the diff `target` names in the git repository at (or above) `root`, changing nothing."""
    with tempfile.TemporaryDirectory(prefix="auger-review-home-") as home:
        git = _Git(Path(root), home)
        try:
            await git.run("rev-parse", "--git-dir")
        except ReviewError:
            raise ReviewError(f"{root} is not in a git repository: review reads the change from git") from None
        omitted: list[str] = []
        if target.kind == "commit":
            commit = await git.commit(target.ref or "", "--commit")
            parents = (await git.run("rev-list", "--parents", "-n", "1", commit)).decode().split()[1:]
            text = await git.diff(parents[0] if parents else await git.empty_tree(), commit)
            revision: str | None = commit
        elif target.kind == "base":
            base = await git.commit(target.ref or "", "--base")
            head = await git.commit("HEAD", "HEAD")
            fork = (await git.run("merge-base", base, head, ok=(0, 1))).decode().strip()
            if not fork:
                raise ReviewError(f"{target.ref} and HEAD have no common history")
            text, revision = await git.diff(fork, head), head
        else:
            try:
                head = await git.commit("HEAD", "HEAD")
            except ReviewError:  # a repository without commits yet: everything is new
                head = await git.empty_tree()
            text, revision = await git.diff(head) + await _untracked(git, omitted), None
    decoded = text.decode("utf-8", "replace")
    truncated = len(decoded) > MAX_DIFF_CHARS
    if truncated:  # whole files' diffs only, where possible; the others are named
        cut = decoded.rfind("\ndiff --git ", 0, MAX_DIFF_CHARS)
        shown = decoded[:cut + 1] if cut > 0 else decoded[:MAX_DIFF_CHARS]
        omitted += [p for p in _ranges(decoded[len(shown):]) if p not in _ranges(shown)]
        decoded = shown
    ranges = _ranges(decoded)
    return Change(target, decoded, {**{p: [] for p in omitted}, **ranges}, revision, omitted, truncated)


async def _untracked(git: _Git, omitted: list[str]) -> bytes:
    """Untracked files (not ignored) as diffs against /dev/null; only regular files and symlinks
    (a FIFO would block the reader), at most MAX_UNTRACKED of them, none over MAX_UNTRACKED_BYTES."""
    import stat

    listed = (await git.run("ls-files", "-z", "-o", "--exclude-standard")).split(b"\0")
    out: list[bytes] = []
    for raw in filter(None, listed):
        path = os.fsdecode(raw)
        if path.endswith("/"):
            continue  # a nested repository
        try:
            st = os.lstat(git.root / path)
        except OSError:
            continue
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            continue
        if len(out) >= MAX_UNTRACKED or st.st_size > MAX_UNTRACKED_BYTES:
            omitted.append(path)
            continue
        out.append(await git.run("diff", "--no-color", "--no-ext-diff", "--no-textconv", "--no-index", "--",
                                 "/dev/null", path, ok=(0, 1)))
    return b"".join(out)


def _ranges(diff: str) -> dict[str, list[tuple[int, int]]]:
    """File -> the new-side line ranges its hunks show (a deleted file: no range)."""
    files: dict[str, list[tuple[int, int]]] = {}
    current: str | None = None
    old: str | None = None
    for line in diff.splitlines():
        if line.startswith("diff --git "):  # a mode change or a binary file has no ---/+++ lines
            current = old = None
            if (named := _header_path(line[len("diff --git "):])) is not None:
                files.setdefault(named, [])
        elif line.startswith("--- "):
            old = _diff_path(line[4:])
        elif line.startswith("+++ "):
            current = _diff_path(line[4:]) or old
            if current is not None:
                files.setdefault(current, [])
        elif current is not None and (m := _HUNK.match(line)):
            start, count = int(m.group(1)), int(m.group(2) or 1)
            if count:
                files[current].append((start, start + count - 1))
    return files


def _header_path(rest: str) -> str | None:
    """The path of a `diff --git a/P b/P` header when both sides name the same path (else None: a
    rename, which has ---/+++ lines naming its sides)."""
    if rest.startswith('"'):
        first, sep, second = rest[1:].partition('" "')
        if sep and second.endswith('"') and first[2:] == second[2:-1]:
            return _unquote(first[2:])
        return None
    n = (len(rest) - 5) // 2
    path = rest[2:2 + n]
    return path if n > 0 and rest == f"a/{path} b/{path}" else None


def _diff_path(spec: str) -> str | None:
    """The path of a `---`/`+++` line without its a/ or b/ prefix (git C-quotes unusual names)."""
    spec = spec.rstrip("\t")
    if spec == "/dev/null":
        return None
    if spec.startswith('"') and spec.endswith('"'):
        spec = _unquote(spec[1:-1])
    return spec[2:] if spec[:2] in ("a/", "b/") else spec


def _unquote(text: str) -> str:
    escapes = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
    out = bytearray()
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in escapes:
                out.append(escapes[nxt])
                i += 2
                continue
            if text[i + 1:i + 4].isdigit():
                out.append(int(text[i + 1:i + 4], 8) & 0xFF)
                i += 4
                continue
        out += ch.encode("utf-8", "surrogateescape")
        i += 1
    return os.fsdecode(bytes(out))


# ------------------------------------------------------------------ the answer


@dataclass
class Finding:
    title: str
    body: str
    priority: int
    confidence: float
    file: str | None
    line_start: int | None
    line_end: int | None
    outside_diff: str | None = None  # why the finding points outside the diff, when it does


@dataclass
class ReviewResult:
    findings: list[Finding]
    verdict: str
    summary: str
    session_id: str = ""
    target: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def schema_error(value: Any, schema: dict[str, Any], where: str = "$") -> str | None:
    """The first place where `value` breaks `schema` (the JSON Schema subset REVIEW_SCHEMA uses), or None."""
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not any(_is(value, kind) for kind in kinds):
            return f"{where} must be {' or '.join(kinds)}, not {_json_type(value)}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{where} must be one of {', '.join(map(repr, schema['enum']))}, not {value!r}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{where} must be at least {schema['minimum']}, not {value}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{where} must be at most {schema['maximum']}, not {value}"
    if isinstance(value, str) and len(value) < schema.get("minLength", 0):
        return f"{where} must not be empty"
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                return f"{where} lacks the required field {key!r}"
        for key, sub in schema.get("properties", {}).items():
            if key in value and (problem := schema_error(value[key], sub, f"{where}.{key}")):
                return problem
    if isinstance(value, list) and "items" in schema:
        for i, entry in enumerate(value):
            if problem := schema_error(entry, schema["items"], f"{where}[{i}]"):
                return problem
    return None


def _is(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return {"object": dict, "array": list, "string": str, "null": type(None), "boolean": bool}[kind] is type(value)


def _json_type(value: Any) -> str:
    return next((k for k in ("null", "boolean", "integer", "number", "string", "array", "object")
                 if _is(value, k)), type(value).__name__)


def parse_review(text: str) -> ReviewResult:
    """The review in a model's reply: one JSON object (a whole-reply code fence is tolerated)."""
    from auger.protocol.jsontext import loads

    body = text.strip()
    if body.startswith("```") and body.endswith("```") and "\n" in body:
        body = body[body.index("\n") + 1:-3].strip()
    if not body:
        raise ReviewInvalid("the reply is empty; it must be one JSON object")
    try:
        data = loads(body)
    except ValueError as exc:
        raise ReviewInvalid(f"the reply is not JSON ({exc})") from None
    if problem := schema_error(data, REVIEW_SCHEMA):
        raise ReviewInvalid(problem)
    findings = []
    for i, raw in enumerate(data["findings"]):
        start, end = raw["line_start"], raw["line_end"]
        if start is not None and end is not None and end < start:
            raise ReviewInvalid(f"$.findings[{i}].line_end ({end}) is before line_start ({start})")
        if (start is not None or end is not None) and not raw["file"]:
            raise ReviewInvalid(f"$.findings[{i}] has line numbers but no file")
        findings.append(Finding(raw["title"], raw["body"], raw["priority"], float(raw["confidence"]),
                                raw["file"] or None, start, end if end is not None else start))
    return ReviewResult(findings, data["verdict"], data["summary"])


def flag_outside(result: ReviewResult, change: Change) -> ReviewResult:
    """Mark the findings that name a file the diff does not touch, or lines its hunks do not show."""
    for finding in result.findings:
        if finding.file is None:
            continue
        path = posixpath.normpath(finding.file)
        if path not in change.ranges:
            finding.outside_diff = f"{finding.file} is not part of the diff"
        elif finding.line_start is not None and path not in change.omitted:
            end = finding.line_end or finding.line_start
            if not any(a <= end and finding.line_start <= b for a, b in change.ranges[path]):
                finding.outside_diff = f"lines {finding.line_start}-{end} are outside the changed hunks"
    return result


# ------------------------------------------------------------------ the session


def review_prompt(change: Change, instructions: str = "") -> str:
    """The one message that asks for the review: instructions, answer schema, focus, the diff."""
    import json

    from auger.context.instructions import prompt_file

    longest = max((len(m) for m in re.findall(r"`+", change.text)), default=0)
    fence = "`" * max(3, longest + 1)
    parts = [prompt_file("review_prompt.md"),
             "The JSON Schema of your final reply:\n" + json.dumps(REVIEW_SCHEMA, indent=1),
             f"The change under review: {change.target.describe()}."]
    if instructions.strip():
        parts.append("The user's instructions for this review:\n" + instructions.strip())
    if change.truncated:
        parts.append(f"The diff is longer than {MAX_DIFF_CHARS} characters and was cut; read what is missing "
                     "with the tools.")
    if change.omitted:
        parts.append("Files changed but not shown below (read them with the tools if they matter): "
                     + ", ".join(change.omitted))
    parts.append(f"{fence}diff\n{change.text}{fence}")
    return "\n\n".join(parts)


def repair_prompt(error: str) -> str:
    return (f"Your reply is not a valid review: {error}. Reply again with only the JSON object that the "
            "schema above describes: no other text, no code fence.")


async def run_review(sessions: SessionManager, client: ModelClient, change: Change, instructions: str = "",
                     on_envelope: Callable[[Envelope], None] | None = None) -> ReviewResult:
    """Review `change` in a new stored session in plan mode; the validated, flagged result. A malformed
    answer is sent back once to be repaired; a second one raises ReviewFailed (with both replies)."""
    session = await sessions.create(client, mode="plan")
    await session.set_title(f"review: {change.target.describe()}")
    stream = session.subscribe()
    raw: list[str] = []
    try:
        raw.append(await _ask(session, stream, review_prompt(change, instructions), on_envelope))
        try:
            result = parse_review(raw[0])
        except ReviewInvalid as first:
            raw.append(await _ask(session, stream, repair_prompt(str(first)), on_envelope))
            try:
                result = parse_review(raw[1])
            except ReviewInvalid as second:
                raise ReviewFailed(f"the model's review is not valid, also after one repair: {second}",
                                   session.id, raw) from None
    finally:
        session.submit(Shutdown())
        async for envelope in stream:
            if on_envelope is not None:
                on_envelope(envelope)
    result.session_id, result.target = session.id, change.target.describe()
    return flag_outside(result, change)


async def _ask(session: Any, stream: Any, text: str, on_envelope: Callable[[Envelope], None] | None) -> str:
    """Run one turn; the text of its last reply, or ReviewFailed when the turn did not complete."""
    session.submit(UserTurn(text))
    reply = ""
    async for envelope in stream:
        if on_envelope is not None:
            on_envelope(envelope)
        event = envelope.event
        if isinstance(event, AgentMessage):
            reply = event.text
        elif isinstance(event, TurnEnded):
            if event.reason != "complete":
                raise ReviewFailed(f"the review turn ended ({event.reason}): {event.message or 'no reason given'}",
                                   session.id, [reply] if reply else [])
            return reply
    raise ReviewFailed("the review session ended before its turn did", session.id, [reply] if reply else [])


# ------------------------------------------------------------------ quoting the code


async def code_lines(root: Path, change: Change, finding: Finding, limit: int = 12) -> list[tuple[int, str]]:
    """The lines a finding points at, as (number, text), from the revision reviewed (the working tree
    for uncommitted changes); empty when there are none or the path is not a file inside the project."""
    if finding.file is None or finding.line_start is None:
        return []
    path = posixpath.normpath(finding.file)
    if path.startswith(("/", "../")) or path in ("..", ".") or "\0" in path:
        return []
    try:
        if change.revision is None:
            from auger.policy.fs import RootHandle, read_beneath

            handle = RootHandle(root)
            try:
                data = read_beneath(handle, path, limit=8 << 20)
            finally:
                handle.close()
        else:
            with tempfile.TemporaryDirectory(prefix="auger-review-home-") as home:
                data = await _Git(Path(root), home).run("cat-file", "blob", f"{change.revision}:./{path}")
    except (OSError, ValueError, ReviewError):
        return []
    lines = data.decode("utf-8", "replace").splitlines()
    end = min(finding.line_end or finding.line_start, finding.line_start + limit - 1, len(lines))
    return [(n, lines[n - 1]) for n in range(finding.line_start, end + 1)]
