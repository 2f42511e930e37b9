"""Review mode: a read-only session reviews one change and answers with structured findings.

Why it is built this way:

* The change is what git says it is, read without changing anything (changes/review_change.py): the
  uncommitted work, a branch since its merge base, or one commit.
* The session is an ordinary stored session in `plan` mode (no writes, every command read-only), so
  `auger sessions` lists it and `auger resume` can follow up on its findings. The model gets the review
  instructions (context/review_prompt.md), the JSON Schema of the answer and the diff in one message.
* The answer is checked against that schema (REVIEW_SCHEMA, written once: the prompt shows it and
  `schema_error` checks it). A malformed answer is sent back once with the error quoted; a second
  malformed answer is a ReviewFailed that keeps both raw replies.
* Findings are kept whatever they point at, but those naming a file or lines the diff does not touch
  are flagged (`outside_diff`): the model may be right about the surroundings, and the reader should know.
* The session says it is a review: `entered_review_mode` (the change, the model) before its first turn,
  `exited_review_mode` (the verdict and the number of findings, or the error) before it shuts down, so
  any front end following it can tell the review apart from a conversation.
* The model is `review_model` when configured (a reviewer may be another, stronger or cheaper model than
  the one that wrote the change; `small` is the provider's small model), else the session's: `review_client`.
* Its model calls are charged as `review` (token_usage.purpose, the stored usage rows), so `auger sessions
  --cost` tells what reviews cost apart from the work.
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from auger.changes.review_change import MAX_DIFF_CHARS, Change, GitReader, ReviewError
from auger.protocol.events import EnteredReviewMode, ExitedReviewMode
from auger.protocol.ops import Shutdown

if TYPE_CHECKING:
    from auger.config import Config
    from auger.engine.session.sessions import SessionManager
    from auger.models.base import ModelClient
    from auger.protocol.envelope import Envelope


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


class ReviewFailed(Exception):
    """The review did not produce a valid answer. `raw` keeps the model's replies, `session_id` the session."""

    def __init__(self, message: str, session_id: str, raw: list[str]) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.raw = raw


class ReviewInvalid(ValueError):
    """A reply that is not a valid review; the message says where and why."""


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
    from auger.engine.turn.structured_output import unfenced
    from auger.protocol.jsontext import loads

    body = unfenced(text)
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


def review_client(config: Config, env: Mapping[str, str] | None = None) -> ModelClient:
    """The client a review runs with: `review_model` on the configured provider — `small` for the provider's
    small model (a first triage of a large change costs little there), `main` for the configured one — else
    the configured model."""
    from auger.context.agents import MAIN, SMALL
    from auger.models.registry import client_for, small_model

    if config.review_model == SMALL:
        chosen = small_model(config, config.provider)
        if chosen is not None:  # its own provider's address and key (registry.provider_for)
            config = dataclasses.replace(config, provider=chosen[0], model=chosen[1])
    elif config.review_model and config.review_model != MAIN:
        config = dataclasses.replace(config, model=config.review_model)
    return client_for(config, env)


async def run_review(sessions: SessionManager, client: ModelClient, change: Change, instructions: str = "",
                     on_envelope: Callable[[Envelope], None] | None = None) -> ReviewResult:
    """Review `change` in a new stored session in plan mode; the validated, flagged result. A malformed
    answer is sent back once to be repaired; a second one raises ReviewFailed (with both replies)."""
    session = await sessions.create(client, mode="plan")
    session.turn_purpose = "review"  # its calls are charged as a review's, beside the work it reviews
    target = change.target.describe()
    await session.set_title(f"review: {target}")
    stream = session.subscribe()
    session.emit(EnteredReviewMode(target, client.model))
    raw: list[str] = []
    exited = ExitedReviewMode(target, error="the review did not finish")
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
        exited = ExitedReviewMode(target, result.verdict, len(result.findings))
    except ReviewFailed as exc:
        exited = ExitedReviewMode(target, error=str(exc))
        raise
    finally:
        session.emit(exited)
        session.submit(Shutdown())
        async for envelope in stream:
            if on_envelope is not None:
                on_envelope(envelope)
        await session.wait_closed()  # stored, and its observers (notify, telemetry) done with its end
    result.session_id, result.target = session.id, change.target.describe()
    return flag_outside(result, change)


async def _ask(session: Any, stream: Any, text: str, on_envelope: Callable[[Envelope], None] | None) -> str:
    """Run one turn; the text of its last reply, or ReviewFailed when the turn did not complete."""
    from auger.engine.session.sessions import TurnIncomplete, reply_of

    try:
        return await reply_of(session, stream, text, on_envelope)
    except TurnIncomplete as exc:
        raise ReviewFailed(f"the review {exc}", session.id, [exc.reply] if exc.reply else []) from None


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
                data = await GitReader(Path(root), home).run("cat-file", "blob", f"{change.revision}:./{path}")
    except (OSError, ValueError, ReviewError):
        return []
    lines = data.decode("utf-8", "replace").splitlines()
    end = min(finding.line_end or finding.line_start, finding.line_start + limit - 1, len(lines))
    return [(n, lines[n - 1]) for n in range(finding.line_start, end + 1)]
