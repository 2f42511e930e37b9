"""The session's side of a goal run (engine/turn/goal.py holds the checks and the limits): whether a
`user_turn` with `until`/`goal` may start one, and the turn body that checks the goal after the turn.

A run starts only when no turn and no other run is going on: a goal attaches to the turns it starts, never
to one already running. It is refused — one `goal_ended{refused}`, no turn — when its command could never run
here (engine/turn/goal.py `refusal`), so a headless run says so before it spends a token. After each turn the
check runs inside that turn (its events, approvals and an interrupt are the turn's); when it fails and no limit
is reached, the next prompt is queued first, so the session starts the next turn as soon as this one ends.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Awaitable, Callable, Protocol

from auger.engine.session.models import SessionModels
from auger.engine.turn.accounting import Budgets
from auger.engine.turn.host import TurnHost
from auger.engine.turn.model_call import Reply
from auger.engine.turn.tool_runtime import PlannedCall, ToolRuntime
from auger.engine.workspace import Workspace
from auger.protocol.events import GoalEnded, WarningEvent
from auger.protocol.ops import UserTurn
from auger.protocol.vocab import GoalEndReason

if TYPE_CHECKING:  # the checks are loaded by the first goal run: most sessions never start one
    from auger.engine.turn.goal import GoalRun

Body = Callable[[], Awaitable[tuple[str, str | None]]]


class GoalHost(TurnHost, Protocol):
    """What a goal run needs of its session (the Session is one)."""

    workspace: Workspace
    runtime: ToolRuntime
    models: SessionModels
    interrupt_reason: str

    @property
    def turn_running(self) -> bool: ...

    @property
    def budgets(self) -> Budgets: ...

    def queue_input(self, op: UserTurn) -> None: ...

    async def charge_reply(self, turn_id: str, reply: Reply, purpose: str) -> None: ...


class SessionGoal:
    def __init__(self, session: GoalHost) -> None:
        self.session = session
        self.run: GoalRun | None = None
        self._changed: set[str] = set()  # turns in which a call that may change something ran

    async def note_change(self, call: PlannedCall) -> None:
        """An `after_mutation` hook: this turn (or a sub-agent of it) may have changed something."""
        if self.run is not None:
            self._changed.add(call.turn_id)

    def begin(self, op: UserTurn) -> bool:
        """Start the goal run `op` asks for; False (said in a goal_ended) when it may not start."""
        from auger.engine.turn import goal

        session = self.session
        problem = None
        if self.run is not None or session.turn_running:
            problem = "a goal run starts when no turn is running (and no other goal run is going on)"
        elif op.max_turns is not None and op.max_turns < 1:
            problem = f"max_turns must be at least 1, not {op.max_turns}"
        elif op.until is not None and not op.until.strip():
            problem = "the goal command is empty"
        elif op.goal is not None and not op.goal.strip():
            problem = "the goal is empty"
        elif op.until is not None:
            problem = goal.refusal(session.runtime, op.until)
        if problem is not None:
            session.emit(GoalEnded(GoalEndReason.REFUSED, 0, f"goal refused: {problem}"))
            return False
        self.run = goal.GoalRun(op.until, op.goal, op.max_turns or session.workspace.config.goal_max_turns)
        return True

    def wrap(self, turn_id: str, body: Body) -> Body:
        """The turn's body, followed by the goal's check when a run is going on."""
        if self.run is None:
            return body
        return lambda: self._turn(turn_id, body)

    async def _turn(self, turn_id: str, body: Body) -> tuple[str, str | None]:
        from auger.engine.turn import goal

        session, run = self.session, self.run
        assert run is not None  # wrap only wraps with one
        reason, message = await body()
        budget = session.ledger.exhausted(session.budgets)
        if reason != "complete":
            why = (GoalEndReason.BUDGET if budget else
                   GoalEndReason.CANCELLED if reason == "cancelled" else GoalEndReason.ERROR)
            return self._end(turn_id, why, f"goal not met: the turn ended ({reason}: {budget or message})",
                             reason, message)
        run.attempts += 1
        changed = turn_id in self._changed
        self._changed.discard(turn_id)
        checker, problem = session.models.checker() if run.goal is not None else (None, None)
        if problem is not None:
            session.emit(WarningEvent(problem, turn_id))
        try:
            result = await goal.check(run, session.runtime, session, turn_id, checker=checker,
                                      answer=goal.last_answer(session.history.items))
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            return self._end(turn_id, GoalEndReason.CANCELLED, "goal not met: its check was interrupted",
                             "cancelled", session.interrupt_reason)
        if result.reply is not None:
            await session.charge_reply(turn_id, result.reply, "goal_check")
        session.emit(goal.checked_event(run, turn_id, result))
        end = goal.limit(run, result.passed, changed=changed, budget=session.ledger.exhausted(session.budgets))
        if end is not None:
            return self._end(turn_id, end[0], end[1], reason, message)
        session.queue_input(UserTurn(goal.next_prompt(run, result)))
        return reason, message

    def _end(self, turn_id: str, why: GoalEndReason, text: str, reason: str,
             message: str | None) -> tuple[str, str | None]:
        run = self.run
        assert run is not None
        self.run = None
        self._changed.clear()
        self.session.emit(GoalEnded(why, run.attempts, text, turn_id))
        return reason, message
