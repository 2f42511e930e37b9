"""`auger init` and `/init`: an AGENTS.md drafted by a read-only session and proposed as a pending change.

Why it is built this way:

* The session is an ordinary stored session in `plan` mode: it reads files and runs read-only commands,
  and can change nothing. Its brief (context/init_prompt.md) asks for the file as its final answer.
* That answer is queued as a pending change of `AGENTS.md` in the session's pending-mode queue
  (changes/pending.py), so the project's tree is untouched until the user has seen the diff and applies
  it: `auger pending apply -s ID`, or yes in the terminal (a `pending_apply` op on the still open
  session: snapshotted like a turn, so `auger undo ID` takes it back).
* An AGENTS.md that exists is given to the model to improve — keep what is right, correct, complete —
  and the diff shows exactly what would change; nothing is overwritten unseen.
"""

from __future__ import annotations

import asyncio
import difflib
from dataclasses import dataclass
from typing import TYPE_CHECKING, AsyncIterator, Callable

from auger.context.instructions import prompt_file
from auger.context.project_docs import DOC_NAME
from auger.protocol.events import PendingChanged, WarningEvent
from auger.protocol.ops import PendingApply, PendingDiscard, Shutdown

if TYPE_CHECKING:
    from auger.engine.session.session import Session
    from auger.engine.session.sessions import SessionManager
    from auger.models.base import ModelClient
    from auger.protocol.envelope import Envelope

CALL_ID = "agents-md"  # the queued change's proposer: main/init/agents-md


class InitFailed(Exception):
    """No AGENTS.md was drafted; the message says why."""

    def __init__(self, message: str, session_id: str) -> None:
        super().__init__(message)
        self.session_id = session_id


@dataclass
class InitDraft:
    """A drafted AGENTS.md, queued in `session` (still open: apply or discard it, then it is shut down)."""

    session: Session
    stream: AsyncIterator[Envelope]  # the session's subscription, followed to its end by `settle`
    diff: str  # unified, against the project's AGENTS.md as it is
    existed: bool


def init_brief(current: str | None) -> str:
    """The brief, with the current AGENTS.md to improve when there is one."""
    brief = prompt_file("init_prompt.md")
    if current is None or not current.strip():
        return brief
    return (f"{brief}\n\nThe project already has an AGENTS.md. Improve it rather than starting over: keep what is "
            "accurate, correct what is wrong or out of date, add what is missing, drop what is generic. Its "
            f"current content:\n<current_agents_md>\n{current.rstrip()}\n</current_agents_md>")


def document_of(reply: str) -> str:
    """The file the reply holds: the reply itself, or what one code fence around all of it encloses."""
    text = reply.strip()
    lines = text.splitlines()
    if len(lines) >= 2 and lines[0].startswith(("```", "~~~")) and lines[-1].strip() == lines[0][:3]:
        text = "\n".join(lines[1:-1]).strip()
    return text + "\n" if text else ""


async def draft_agents_md(sessions: SessionManager, client: ModelClient,
                          on_envelope: Callable[[Envelope], None] | None = None) -> InitDraft:
    """Draft AGENTS.md in a new plan-mode, pending-mode session and queue it there; InitFailed (the session
    shut down) when the turn fails or its answer is empty. The draft's session stays open for `settle`."""
    from auger.engine.session.sessions import TurnIncomplete, reply_of

    session = await sessions.create(client, mode="plan", pending=True)
    await session.set_title("init: AGENTS.md")
    stream = session.subscribe()
    try:
        queue = session.pending
        assert queue is not None, "opened in pending mode"
        current = queue.view(DOC_NAME)
        before = current[0].decode("utf-8", errors="replace") if current is not None else None
        try:
            reply = await reply_of(session, stream, init_brief(before), on_envelope)
        except TurnIncomplete as exc:
            raise InitFailed(f"no AGENTS.md drafted: the {exc}", session.id) from None
        text = document_of(reply)
        if not text.strip():
            raise InitFailed("no AGENTS.md drafted: the model's answer was empty", session.id)
        await _queue(session, text)
    except BaseException:
        await _close(session, stream, on_envelope)
        raise
    diff = "".join(difflib.unified_diff((before or "").splitlines(keepends=True), text.splitlines(keepends=True),
                                        f"a/{DOC_NAME}", f"b/{DOC_NAME}"))
    return InitDraft(session, stream, diff, before is not None)


async def _queue(session: Session, text: str) -> None:
    """Write the draft into the pending copy and queue it, as a file tool's change would be."""
    from auger.changes.files import write_beneath

    queue = session.pending
    assert queue is not None
    await asyncio.to_thread(write_beneath, queue.handle, DOC_NAME, text.encode("utf-8"), None)
    queued, notes = await queue.capture("init", CALL_ID, {"path": DOC_NAME})
    if DOC_NAME not in queued:
        raise InitFailed("AGENTS.md could not be queued: " + ("; ".join(notes) or "the draft changes nothing"),
                         session.id)
    session.emit(PendingChanged(len(queue.paths), queued, "queued"))


async def settle(draft: InitDraft, apply: bool | None,
                 on_envelope: Callable[[Envelope], None] | None = None) -> list[str]:
    """Apply (True) or discard (False) the drafted AGENTS.md through the session's own op, or leave it
    queued in the stored session (None: for `auger pending apply`); then shut the session down. Returns
    the warnings on the way (an AGENTS.md edited meanwhile is refused, never overwritten)."""
    if apply is not None:
        draft.session.submit(PendingApply([DOC_NAME]) if apply else PendingDiscard([DOC_NAME]))
    return await _close(draft.session, draft.stream, on_envelope)


async def _close(session: Session, stream: AsyncIterator[Envelope],
                 on_envelope: Callable[[Envelope], None] | None) -> list[str]:
    """Shut the session down and follow its stream to the end; the warnings seen on the way."""
    session.submit(Shutdown())
    warnings = []
    async for envelope in stream:
        if on_envelope is not None:
            on_envelope(envelope)
        if isinstance(envelope.event, WarningEvent) and envelope.parent_call_id is None:
            warnings.append(envelope.event.message)
    return warnings
