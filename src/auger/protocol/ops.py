"""Operations a client submits to a Session."""

from __future__ import annotations

from dataclasses import field
from typing import Any

from auger.protocol._data import Record, family, tag
from auger.protocol.vocab import ApprovalOption, Mode


@family
class Op(Record):
    pass


@tag("user_turn")
class UserTurn(Op):
    text: str
    images: list[str] = field(default_factory=list)
    skills: list[str] = field(default_factory=list)  # skills whose bodies are injected for this turn
    # A JSON Schema the turn's final answer must be valid against (engine/turn/structured_output.py): the value
    # comes as a structured_output event; an answer still invalid after one repair ends the turn in error.
    output_schema: dict[str, Any] | None = None


@tag("interrupt")
class Interrupt(Op):
    """Stop the running turn (and the sub-agents it is waiting for). `reason` is what the turn's end and
    its recorded abort say (a front end passes e.g. "terminated by SIGTERM"); empty means the user
    interrupted. Background sub-agents run on: `cancel_agents` stops them."""

    reason: str = ""


@tag("cancel_agents")
class CancelAgents(Op):
    """Cancel the session's sub-agents still running, at any depth, with their commands: those whose ids
    are given, or (empty) all of them."""

    ids: list[str] = field(default_factory=list)


@tag("approval_decision")
class ApprovalDecision(Op):
    """Answers an ApprovalRequest event. `decision` is one of the request's `options`."""

    request_id: str
    decision: ApprovalOption
    feedback: str | None = None
    by: str = ""  # who answered (a front end names its client; `approval_resolved` repeats it)


@tag("set_mode")
class SetMode(Op):
    """Switch the trust mode (plan | safe | auto); applies from the next tool call decided, also in a
    running turn and in running sub-agents."""

    mode: Mode


@tag("set_model")
class SetModel(Op):
    """Switch model (and optionally provider) between turns; recorded in the conversation."""

    model: str
    provider: str | None = None


@tag("set_turn_context")
class SetTurnContext(Op):
    """Change what the next turns run with, beside `set_mode` and `set_model`: the reasoning effort and
    summary (sent to models that take them: the Responses API) and the working directory (inside the
    project root; absolute, or relative to the root). A field left null stays as it is; an empty string
    puts it back as configured (the directory: the root); summary "none" turns summaries off. Refused
    while a turn runs; recorded, so a resumed or forked session runs with the same."""

    effort: str | None = None
    summary: str | None = None
    cwd: str | None = None


@tag("compact")
class Compact(Op):
    """Summarise the conversation now (or before the next model call, if a turn is running)."""


@tag("rollback")
class Rollback(Op):
    """Drop the last `turns` user turns from the model's context; refused while a turn runs."""

    turns: int = 1


@tag("add_mcp_server")
class AddMcpServer(Op):
    """Start an MCP server for this session only; its tools are offered from the next model call.
    `config` is one `[mcp_servers.NAME]` table (command/args/env/cwd or url/headers/...)."""

    name: str
    config: dict[str, Any] = field(default_factory=dict)


@tag("remove_mcp_server")
class RemoveMcpServer(Op):
    name: str


@tag("undo")
class Undo(Op):
    """Put the project back as it was before a turn (default: the last turn that changed files and is
    not undone). Refused while a turn runs, and when files changed after that turn unless `force`."""

    turn_id: str | None = None
    force: bool = False


@tag("redo")
class Redo(Op):
    """Re-apply the last undone turn (refused when files changed since the undo, unless `force`)."""

    force: bool = False


@tag("run_shell")
class RunShell(Op):
    """A shell command the user runs themselves: the same policy, approvals and sandbox as the model's,
    run as a turn without a model call, its command and output recorded for the model to see."""

    command: str
@tag("pending_apply")
class PendingApply(Op):
    """Write the queued changes of `paths` (files or directories; empty: all) to the project. A file edited
    on disk since its change was proposed is refused whole (a warning says why); the others are written."""

    paths: list[str] = field(default_factory=list)


@tag("pending_discard")
class PendingDiscard(Op):
    """Drop the queued changes of `paths` (empty: all); the session's view of those files is the project's again."""

    paths: list[str] = field(default_factory=list)


@tag("pending_rewind")
class PendingRewind(Op):
    """Drop every queued change after sequence number `seq` (0: all), as if the queue had stopped there."""

    seq: int


@tag("shutdown")
class Shutdown(Op):
    pass


@tag("set_backend")
class SetBackend(Op):
    """Run the next turns with another agent (a `[backends.NAME]` or built-in ACP agent), or with auger's
    own model loop when `name` is empty. Refused while a turn runs; a `backend_changed` event says so."""

    name: str = ""
