"""A session in pending mode: the glue between the session and its queue of pending changes.

changes/pending.py is the queue and changes/overlay.py the copy the session's tools work on; this module
is what a session does with them: open them as it starts (or finds changes already queued), say what
pending mode cannot stop, tell the model how its changes are handled, queue what each call changed in
the copy, and carry out the apply / discard / rewind ops (an apply is snapshotted like a turn, so it can
be diffed and undone).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Awaitable, Callable, Sequence

from auger.engine.turn.host import CONTEXT_TURN
from auger.engine.turn.tool_runtime import PlannedCall
from auger.ids import new_hex
from auger.policy.types import Classification
from auger.protocol import items as it
from auger.protocol.events import Event, PendingChanged, WarningEvent
from auger.protocol.ops import PendingApply, PendingDiscard, PendingRewind
from auger.protocol.vocab import Effect
from auger.store.base import Store

if TYPE_CHECKING:
    from auger.changes.overlay import PendingChanges
    from auger.engine.turn.changes import ChangeTracker

APPLY_TURN = "pending-apply"  # the prefix of the turn id an apply of pending changes is snapshotted and diffed under

Record = Callable[[str, it.Item], Awaitable[None]]
Emit = Callable[[Event], None]


async def open_pending(store: Store, session_id: str, root: Path, wanted: bool, *, new: bool = False
                       ) -> PendingChanges | None:
    """Pending mode's queue and copy when asked for, or when the session already has changes queued (a
    resumed pending session stays one, so its queue stays in view). A `new` session (made just now) has
    nothing queued: the store is not asked."""
    if not wanted and (new or not await store.load_pending(session_id)):
        return None
    from auger.changes.overlay import PendingChanges

    return await PendingChanges.open(store, session_id, root)


def share_repository(queue: PendingChanges | None) -> tuple[Path, ...]:
    """Before the sandbox is made: let git in the copy read the project's repository (`git status` and
    `git diff` then show the queued changes). Returns what the sandbox must keep read-only to commands,
    so nothing is committed, staged or stashed in it before the user applies."""
    git = queue.overlay.link_repository() if queue is not None else None
    return (git,) if git is not None else ()


def unshare_repository_unless_confined(queue: PendingChanges | None, confinement: object) -> None:
    """Without a sandbox that confines writes to the copy, the repository would be writable from it (a
    `git commit` there would record queued changes): the copy goes without it."""
    if queue is not None and not getattr(confinement, "writes_confined", False):
        queue.overlay.unlink_repository()


def pending_warnings(queue: PendingChanges, confinement: object) -> list[str]:
    """What the user should know about this session's pending mode."""
    out = []
    if queue.overlay.problem:
        out.append(f"pending mode: part of the project could not be copied for the session's tools: "
                   f"{queue.overlay.problem}")
    if confinement is None or not getattr(confinement, "enforced", False):
        out.append("pending mode without a sandbox: commands run in the copy, but nothing stops one from "
                   "writing the project by its absolute path")
    return out


async def tell_pending_mode(queue: PendingChanges, items: Sequence[it.Item], record: Record) -> None:
    """Tell the model, once per copy, that its changes are queued and where its commands run."""
    from auger.changes.pending import NOTE_KIND

    tree = str(queue.tree)
    told = [i for i in items if isinstance(i, it.ContextMessage) and i.kind == NOTE_KIND]
    if told and (told[-1].data or {}).get("tree") == tree:
        return
    text = (f"Pending-changes mode: your file changes are queued for the user to review and apply; the project "
            f"itself is not changed until then. File tools see your queued changes. Shell commands run in a copy "
            f"of the project with your changes made, at {tree} (their working directory): use relative paths. "
            "What a command changes there is queued too, except files the project ignores (build output, "
            "caches), which stay in the copy. The project at its real path is read-only to commands.")
    if (queue.tree / ".git").is_file():
        text += (" git sees the project's repository read-only: `git status` and `git diff` show your queued "
                 "changes; committing, staging or stashing fails until the user applies them.")
    await record(CONTEXT_TURN, it.ContextMessage(text, NOTE_KIND, {"tree": tree}))


async def capture_pending(queue: PendingChanges, call: PlannedCall | None, emit: Emit) -> None:
    """After a call that may change files (None: before an op on the queue, for what background commands
    changed): queue what changed in the copy."""
    turn_id = call.turn_id if call is not None else None
    queued, notes = await (queue.capture(call.tool, call.call_id, call.args) if call is not None else queue.sync())
    for note in notes:
        emit(WarningEvent(f"pending: {note}", turn_id))
    if queued:
        emit(PendingChanged(len(queue.paths), queued, "queued"))


async def snapshot_before_apply(changes: ChangeTracker | None, turn_id: str) -> None:
    """An apply of pending changes is snapshotted like a turn's first change, so it can be diffed and undone
    (end it with `changes.end_turn(turn_id)`)."""
    if changes is not None:
        await changes.before_mutation(PlannedCall(turn_id, "", "pending_apply", {},
                                                  Classification(Effect.LOCAL_MUTATION, "pending changes")))


async def pending_op(queue: PendingChanges, op: PendingApply | PendingDiscard | PendingRewind, *, store: Store,
                     session_id: str, root: Path, changes: ChangeTracker | None, record: Record, emit: Emit) -> None:
    """Apply, discard or rewind queued changes; the model is told what changed in its view."""
    from auger.changes import pending

    await capture_pending(queue, None, emit)
    if isinstance(op, PendingApply):
        turn_id = f"{APPLY_TURN}-{new_hex(12)}"
        report = await pending.apply(store, session_id, root, op.paths or None,
                                     before_write=lambda: snapshot_before_apply(changes, turn_id))
        if changes is not None:
            await changes.end_turn(turn_id)  # the apply is undoable like a turn's changes
        for line in [*report.conflicts, *(f"{u}: nothing is pending there" for u in report.unknown)]:
            emit(WarningEvent(f"pending apply refused {line}"))
        await queue.refresh(report.applied)  # the copy now holds what the project holds
        changed, action = report.applied, pending.APPLIED
    else:
        if isinstance(op, PendingDiscard):
            changed, unknown = await pending.discard(store, session_id, op.paths or None)
            for name in unknown:
                emit(WarningEvent(f"pending discard: nothing is pending for {name}"))
            action = pending.DISCARDED
        else:
            changed, action = await pending.rewind(store, session_id, op.seq), pending.REWOUND
        await queue.refresh(changed)
    told = pending.note(action, changed)
    if told is not None:
        await record(CONTEXT_TURN, told)
    emit(PendingChanged(len(queue.paths), changed, action))
