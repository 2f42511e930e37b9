"""Conversation items: what the store records and the history turns into prompts.

Items are the durable truth of a session. A tool's full output is not part of its
item (it can be 200 KB); the store keeps it beside the item for `recall`.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from auger.lazy_dataclass import Deferred, dataclass
from auger.protocol._data import Record, family, tag


@family
class Item(Record):
    pass


@tag("user_message")
class UserMessage(Item):
    text: str
    images: list[str] = field(default_factory=list)


@tag("assistant_message")
class AssistantMessage(Item):
    text: str


@tag("reasoning")
class Reasoning(Item):
    """Model reasoning. `encrypted` is opaque provider state that must be sent back verbatim to the
    same wire API (`provider`): a Responses `encrypted_content`, an Anthropic thinking `signature`, or
    the data of a redacted thinking block (`redacted`). Other wire APIs ignore it."""

    text: str
    encrypted: str | None = None
    provider: str | None = None  # wire API name: "openai_responses" | "anthropic"
    item_id: str | None = None  # the provider's id for the item, when it has one
    redacted: bool = False


@tag("tool_call")
class ToolCall(Item):
    call_id: str
    name: str
    arguments: str  # raw JSON text exactly as the model produced it


@tag("tool_output")
class ToolOutput(Item):
    call_id: str
    output: str  # what the model sees
    ok: bool = True


@tag("context_message")
class ContextMessage(Item):
    """Context the engine gives the model in the user role: instructions, environment, skills.

    Recorded like any item, so a resumed session sends exactly what the original sent."""

    text: str
    kind: str  # "instructions" | "environment" | "skill"
    data: dict[str, Any] | None = None  # structured state behind the text (the environment's fields)


@tag("compaction")
class Compaction(Item):
    """Everything before this item is replaced, in the prompt, by what it keeps.

    The replaced items stay in the store (archived; `recall` still finds them)."""

    summary: str
    user_messages: list[str]  # the user's own messages kept, oldest first
    plan: list[dict[str, Any]] | None = None
    archived_items: int = 0


@tag("rollback")
class Rollback(Item):
    """Drops the last `turns` user turns from the model's context (files on disk are untouched)."""

    turns: int


@tag("turn_aborted")
class TurnAborted(Item):
    """Marks that a turn was interrupted, so the next turn's prompt can say so."""

    reason: str


@dataclass
class ChangedFile(Deferred):
    """One file a turn changed. `kind`: added, deleted, modified, renamed, copied, type changed or
    mode changed; line counts are None for a binary file."""

    kind: str
    path: str
    old_path: str | None = None
    old_mode: str | None = None
    new_mode: str | None = None
    binary: bool = False
    added_lines: int | None = None
    deleted_lines: int | None = None


@tag("turn_snapshot")
class TurnSnapshot(Item):
    """The tree before a turn's first change (a commit in the project's snapshot repository). Recorded
    so undo survives compaction, resume and a killed process; never shown to the model."""

    turn_id: str
    commit: str
    tree: str


@tag("turn_changes")
class TurnChanges(Item):
    """What a turn changed: the snapshots before and after it, the files and the unified diff.
    Never shown to the model (an undo tells it, as a context message)."""

    turn_id: str
    before: str  # commit
    before_tree: str
    after: str
    after_tree: str
    files: list[ChangedFile]
    diff: str


@tag("created_file")
class CreatedFile(Item):
    """A file a tool of this session created, and its SHA-256 right after: while unchanged, the session
    may delete it without asking (engine/session/own_files.py). Never shown to the model."""

    path: str  # relative to the project root
    sha256: str  # "" once the file is gone: the session forgets it


@tag("worktree_changes")
class WorktreeChanges(Item):
    """What a session working in a worktree (changes/worktree.py) changed there against its base,
    recorded at the session's end; `auger worktree apply` writes it into `project`. Never shown to the
    model."""

    path: str  # the worktree (the session's root)
    project: str
    base: str  # the commit it started from
    files: list[ChangedFile]
    diff: str


@tag("turn_settings")
class TurnSettings(Item):
    """What the turns run with beside the mode and the model, as `set_turn_context` left it: recorded so a
    resumed or forked session sends the same requests. Never shown to the model (a new working directory
    is told to it as an environment change). None, and an empty `cwd`, mean as configured (the root)."""

    effort: str | None = None
    summary: str | None = None
    cwd: str = ""  # relative to the project root


@tag("search_sources")
class SearchSources(Item):
    """The pages a provider's hosted web search returned or cited in one reply (the reply's text lists the
    cited ones). Recorded apart from the text because the model writes the text: these URLs came from the
    search, so `web_fetch` may fetch them (tools/provenance.py). Never shown to the model."""

    urls: list[str]


@tag("writable_root")
class WritableRoot(Item):
    """A directory outside the project the user let commands write beneath for the rest of the session (at
    an approval: engine/session/writable_roots.py), recorded so a resumed session keeps it. Never shown to the model."""

    path: str  # resolved, absolute


@tag("protected_read")
class ProtectedRead(Item):
    """Protected files (secrets/protected.py) the user let one tool call read or change, at an approval: a record
    of who allowed what. It grants nothing to any other call, nor to this one again. Never shown to the model."""

    call_id: str
    tool: str
    paths: list[str]  # relative to the project root


@tag("secret_marker")
class SecretMarker(Item):
    """A marker number the session gave a secret text (`[secret:KIND#N]`), with an HMAC of the kind and text
    under a key kept in auger's data dir (secrets/numbering.py), never the text itself: a resumed session
    gives the same text the same number. Never shown to the model."""

    kind: str
    number: int
    digest: str


# Items that record the project's state for diff, undo and the file tracker, the session's settings, or
# where a text came from; not conversation.
RECORDS_ONLY = (TurnSnapshot, TurnChanges, CreatedFile, WorktreeChanges, TurnSettings, SearchSources, WritableRoot,
                ProtectedRead, SecretMarker)
