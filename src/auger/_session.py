"""A session and its runs, written once over a `Link` — the few things a session needs from wherever it
runs: this process's engine (auger/_local.py) or an `auger serve` (auger/_remote.py).

A run is a prompt and the session's envelopes from just before it was submitted through the end of
the turn that answers it. That turn is recognised by the submission id the run chose: the turn started
for it, or the running turn its input was injected into (`user_input_injected`), carries that id, so
two runs on one session each end at their own turn's `turn_ended`, and a sub-agent's turns (their
envelopes name the spawn call) are never taken for it.

Approvals are answered while a run is consumed (iterated or awaited): an `approval_request` in its
stream goes to the session's callback, whose answer is sent as the request's own option. A request
is answered once per session however many runs see it; the first answer wins in the engine anyway.
A callback that raises approves nothing: the request gets its most cautious option (abort, stop,
cancel) and the run raises `ApprovalFailed` with the callback's exception as its cause.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from typing import Any, AsyncGenerator, AsyncIterator, Awaitable, Callable, Generator, Mapping, Protocol, Sequence

from auger._errors import ApprovalFailed, ConfigError, Refused, SessionClosed, TurnFailed, TurnInterrupted
from auger._types import Approver, Decision, Diff, Result, TurnChange, cautious
from auger.ids import new_hex
from auger.protocol.envelope import Envelope
from auger.protocol.events import (
    AgentMessage, ApprovalRequest, Event, GoalEnded, ShutdownComplete, StructuredOutput, TokenUsage, TurnDiff,
    TurnEnded, TurnStarted, TurnUndone, Usage, UserInputInjected, WarningEvent,
)
from auger.protocol.ops import ApprovalDecision, Interrupt, Op, Redo, Undo, UserTurn
from auger.protocol.vocab import ApprovalOption

__all__ = ["Link", "Opening", "Run", "Session"]


class Link(Protocol):
    """Where a session runs, as a session needs it."""

    @property
    def session_id(self) -> str: ...

    @property
    def cwd(self) -> str: ...

    async def cursor(self) -> int:
        """The seq of the session's last event now: what follows it is news."""

    async def submit(self, op: Op, submission_id: str) -> None:
        """Send an op under the caller's submission id (sent again, it starts nothing twice)."""

    async def answer(self, decision: ApprovalDecision, submission_id: str) -> None:
        """Answer a waiting approval request; an answer that comes second is ignored."""

    def envelopes(self, after: int) -> AsyncGenerator[Envelope, None]:
        """The session's envelopes with seq > `after`, each once, in order, without end."""

    async def changes(self, turn: str | None) -> list[TurnChange]:
        """The turns that changed files, or the one `turn` names (its number or an id prefix)."""

    async def fork(self, before: int | None, mode: str | None, approver: Approver | None) -> Session:
        """A new session from a copy of this one's history, cut before user message `before`."""

    async def close(self) -> None:
        """Shut the session down and let go of what holds it."""


def new_id(kind: str) -> str:
    """A submission id of the caller's choosing (the server takes 1-64 of `A-Za-z0-9_.:-`)."""
    return f"{kind}-{new_hex(16)}"


class Session:
    """One conversation in one project, local or on a server: runs prompts, answers approvals through its
    callback, interrupts, forks, shows and undoes what its turns changed. Use it as an async context
    manager (`async with auger.open(...) as session`), or `await` the opening and `close()` it."""

    def __init__(self, link: Link, approver: Approver | None) -> None:
        self._link = link
        self._approver = approver
        self._answered: set[str] = set()  # approval requests this session answered (or is answering)

    @property
    def id(self) -> str:
        """The stored session's id (what `auger.resume` and `auger sessions` take)."""
        return self._link.session_id

    @property
    def cwd(self) -> str:
        """The project directory the session works in."""
        return self._link.cwd

    def run(self, prompt: str, *, output_schema: Mapping[str, Any] | None = None,
            images: Sequence[str] = (), until: str | None = None, goal: str | None = None,
            max_turns: int | None = None) -> Run:
        """Send a prompt; iterate the returned `Run` for its events, or await it for its `Result`.

        `output_schema` (a JSON Schema) holds the final answer to it: `Result.output` is the checked value.
        `images` are image files on this machine (read here and sent as data, also to a server) or `data:`
        URLs; one that cannot be sent is a `ConfigError`. Sent while another run's turn is running, the
        prompt is injected into that turn before its next model call, and both runs end with it.

        `until` (a shell command) and/or `goal` (a condition in words) make it a goal run: turns go on until
        the command exits 0 in the session's sandbox (and the goal model says the goal is met), or a limit
        — `max_turns` (default: goal_max_turns), the budget, two turns that changed nothing — ends it;
        `Result.goal` says how it ended, `Result.text` is the last turn's reply. A goal command the session
        could never run (refused by its policy, or needing an approval nobody can give) is `Refused`."""
        op = UserTurn(prompt, images=list(images),
                      output_schema=dict(output_schema) if output_schema is not None else None,
                      until=until, goal=goal, max_turns=max_turns)
        return Run(self, op)

    async def interrupt(self) -> None:
        """Stop the running turn (its run ends with `TurnInterrupted`); background sub-agents run on."""
        await self._link.submit(Interrupt(), new_id("interrupt"))

    async def submit(self, op: Op, submission_id: str | None = None) -> str:
        """Send any op (`auger.ops`: a mode switch, a compaction, an approval decision…)
        under a submission id — yours, or a fresh one — which the envelopes of the events it causes carry;
        the id. On a server an id sent again starts nothing twice. A client that follows the session with
        `follow` drives it this way; `run` is the way for a prompt whose result you want."""
        submission_id = submission_id or new_id(op.TYPE)
        await self._link.submit(op, submission_id)
        return submission_id

    def follow(self, after_seq: int = 0) -> AsyncIterator[Envelope]:
        """Every envelope of the session with a seq above `after_seq`, in order, each once — whoever caused
        it: this client, another one, another device. A session in this process is followed until it shuts
        down; one on a server without end (a dropped stream is resumed by cursor), until you stop reading."""
        return self._link.envelopes(after_seq)

    def fork(self, *, before: int | None = None, mode: str | None = None,
             approve: Approver | None = None) -> Opening:
        """A new session starting from a copy of this one's history — cut just before its `before`th user
        message (1-based) when given — in `mode` (default: this one's), answering approvals with
        `approve` (default: this session's callback). This session is left as it is."""
        return Opening(lambda: self._link.fork(before, mode, approve if approve is not None else self._approver))

    async def diff(self, turn: int | str | None = None) -> Diff:
        """What the session's turns changed in the project, turn by turn; `turn` picks one: its number
        among the turns that changed files (1 for the first), or its id or an id prefix (Refused if it
        names none)."""
        return Diff(await self._link.changes(None if turn is None else str(turn)))

    async def undo(self, turn: int | str | None = None, *, force: bool = False) -> TurnUndone:
        """Put the project back exactly as it was before a turn (default: the last one that changed files
        and is not undone), and tell the model. Refused, changing nothing, when a file changed after that
        turn, unless `force`."""
        return await self._act(Undo(None if turn is None else str(turn), force))

    async def redo(self, *, force: bool = False) -> TurnUndone:
        """Re-apply the last undone turn's changes (refused when files changed since, unless `force`)."""
        return await self._act(Redo(force))

    async def close(self) -> None:
        """Shut the session down: the running turn is interrupted, its sandbox and servers end. Its
        history stays stored (`auger.resume` continues it)."""
        await self._link.close()

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _act(self, op: Undo | Redo) -> TurnUndone:
        """Submit an op that either happens (its event) or is refused (a warning under its submission id)."""
        submission_id = new_id(op.TYPE)
        cursor = await self._link.cursor()
        await self._link.submit(op, submission_id)
        async with contextlib.aclosing(self._link.envelopes(cursor)) as stream:
            async for envelope in stream:
                event = envelope.event
                if isinstance(event, ShutdownComplete):
                    break
                if envelope.submission_id != submission_id:
                    continue
                if isinstance(event, TurnUndone):
                    return event
                if isinstance(event, WarningEvent):
                    raise Refused(event.message)
        raise SessionClosed(f"session {self.id[:8]} shut down before its {op.TYPE} was done")

    async def _answer(self, request: ApprovalRequest) -> BaseException | None:
        """Answer one approval request through the callback (once per session); the callback's exception,
        if it raised (the request then gets its most cautious option)."""
        if self._approver is None or request.request_id in self._answered:
            return None
        self._answered.add(request.request_id)
        failure: BaseException | None = None
        try:
            verdict = self._approver(request)
            if inspect.isawaitable(verdict):
                verdict = await verdict
            if isinstance(verdict, bool):
                verdict = Decision.approve() if verdict else Decision.deny()
            if not isinstance(verdict, Decision):
                raise TypeError(f"an approval callback returns a Decision or a bool, not {type(verdict).__name__}")
            option, feedback = verdict.option(request), verdict.feedback
        except Exception as exc:
            failure = exc
            option, feedback = cautious(request), "the approval callback failed"
        await self._link.answer(ApprovalDecision(request.request_id, ApprovalOption(option), feedback),
                                f"approval-{request.request_id}")
        return failure


class Run:
    """One prompt on its way through a session. `async for event in run` yields every event until the
    turn's `turn_ended` (how it ended is in that event); `await run` (or `await run.result()`) reads on
    to the end and gives the `Result`, raising `TurnFailed` / `TurnInterrupted` for a turn that did not
    complete. `envelopes()` is the same stream with each event's envelope (seq, submission id, parent
    call id). The stream is read once: what iteration consumed, `result()` still counts."""

    def __init__(self, session: Session, op: UserTurn) -> None:
        self.submission_id = new_id("run")
        self.turn_id: str | None = None  # the turn answering this prompt, once it is known
        self._session = session
        self._link = session._link
        self._seen: list[Envelope] = []
        self._ended: TurnEnded | None = None
        self._goal_run = op.until is not None or op.goal is not None
        self._goal: GoalEnded | None = None  # how the goal run ended, once it did
        self._turns: list[str] = []  # the turns of this run (a goal run has one per attempt)
        self._done = False
        self._approval_failure: BaseException | None = None
        self._stream: AsyncGenerator[Envelope, None] | None = None
        self._started = asyncio.ensure_future(self._start(op))

    async def _start(self, op: UserTurn) -> AsyncGenerator[Envelope, None]:
        if op.images:
            op.images = await asyncio.to_thread(_image_data, op.images)
        cursor = await self._link.cursor()  # before the op: everything it causes comes after
        await self._link.submit(op, self.submission_id)
        return self._link.envelopes(cursor)

    def __aiter__(self) -> Run:
        return self

    async def __anext__(self) -> Event:
        while (envelope := await self._next()) is not None:
            if envelope.parent_call_id and isinstance(envelope.event, (TurnStarted, TurnEnded)):
                continue  # a sub-agent's turn: without its envelope it would read as this run's
            return envelope.event
        self._raise_if_broken()
        raise StopAsyncIteration

    async def envelopes(self) -> AsyncIterator[Envelope]:
        """The run's events in their envelopes, sub-agents' turns included (their `parent_call_id` is set)."""
        while (envelope := await self._next()) is not None:
            yield envelope
        self._raise_if_broken()

    async def result(self) -> Result:
        """Read the run to its end; its Result, or the TurnError saying how the turn did not complete."""
        while await self._next() is not None:
            pass
        self._raise_if_broken()
        result = self._result()
        assert self._ended is not None  # _raise_if_broken: otherwise the session closed first
        if self._ended.reason == "error":
            raise TurnFailed(self._ended.message or "the turn failed", result)
        if self._ended.reason == "cancelled":
            raise TurnInterrupted(self._ended.message or "the turn was interrupted", result)
        return result

    def __await__(self) -> Generator[Any, None, Result]:
        return self.result().__await__()

    async def interrupt(self) -> None:
        """Stop this run's turn (it ends with reason `cancelled`)."""
        await self._started
        await self._session.interrupt()

    async def _next(self) -> Envelope | None:
        if self._done:
            return None
        if self._stream is None:
            self._stream = await self._started
        try:
            envelope = await anext(self._stream)
        except StopAsyncIteration:
            await self._finish()
            return None
        self._seen.append(envelope)
        event = envelope.event
        if envelope.parent_call_id is None:
            if isinstance(event, (TurnStarted, UserInputInjected)) and self.turn_id is None \
                    and envelope.submission_id == self.submission_id:
                self.turn_id = event.turn_id
                self._turns.append(event.turn_id)
            elif isinstance(event, GoalEnded) and self._goal_run and envelope.submission_id == self.submission_id:
                self._goal = event
                if event.turn_id is None:  # refused before any turn
                    await self._finish()
            elif isinstance(event, TurnEnded) and event.turn_id == self.turn_id and self._goal_run \
                    and self._goal is None:  # the goal run goes on with another turn
                self.turn_id = None
            elif (isinstance(event, TurnEnded) and event.turn_id == self.turn_id) \
                    or isinstance(event, ShutdownComplete):
                self._ended = event if isinstance(event, TurnEnded) else None
                await self._finish()
        if isinstance(event, ApprovalRequest):
            failure = await self._session._answer(event)
            if failure is not None and self._approval_failure is None:
                self._approval_failure = failure
        return envelope

    async def _finish(self) -> None:
        self._done = True
        if self._stream is not None:
            await self._stream.aclose()

    def _raise_if_broken(self) -> None:
        """Raise what ended the run other than its turn's end: the approval callback, a goal refused, or the
        session closing."""
        if self._goal is not None and self._goal.turn_id is None:
            raise Refused(self._goal.message)
        if self._approval_failure is not None:
            raise ApprovalFailed(f"the approval callback raised {type(self._approval_failure).__name__}: "
                                 f"{self._approval_failure}; the turn was aborted",
                                 self._result()) from self._approval_failure
        if self._ended is None:
            raise SessionClosed(f"session {self._session.id[:8]} shut down before the turn answering the prompt "
                                "ended")

    def _result(self) -> Result:
        turn_id = self.turn_id or (self._turns[-1] if self._turns else None)
        mine = [e.event for e in self._seen if e.parent_call_id is None and getattr(e.event, "turn_id", None)
                == turn_id]
        text, output, diff = "", None, TurnDiff("", [], "")
        for event in mine:
            if isinstance(event, AgentMessage):
                text = event.text
            elif isinstance(event, StructuredOutput):
                output = event.value
            elif isinstance(event, TurnDiff):
                diff = event
        usage, cost = self._usage()
        ended = self._ended
        return Result(session_id=self._session.id, turn_id=self.turn_id or "",
                      reason=str(ended.reason) if ended is not None else "cancelled",
                      message=ended.message if ended is not None else None, text=text, output=output,
                      diff=diff.diff, files=list(diff.files), usage=usage, cost=cost,
                      events=[e.event for e in self._seen], goal=self._goal)

    def _usage(self) -> tuple[Usage, float | None]:
        """The run's usage and cost: each of its turns' last token_usage (cumulative over its turn, sub-agents'
        calls included), summed over the turns (a goal run has several)."""
        last: dict[str, TokenUsage] = {}
        for e in self._seen:
            if e.parent_call_id is None and isinstance(e.event, TokenUsage) and e.event.turn_id in self._turns:
                last[e.event.turn_id] = e.event
        usage = Usage()
        cost: float | None = 0.0  # no model call, no cost
        for event in last.values():
            usage = usage + event.turn
            cost = None if cost is None or event.turn_cost is None else cost + event.turn_cost
        return usage, cost


class Opening:
    """A session being opened: `await` it for the Session, or use it as an async context manager, which
    closes the session at the end of the block."""

    def __init__(self, opener: Callable[[], Awaitable[Session]]) -> None:
        self._opener = opener
        self._session: Session | None = None

    def __await__(self) -> Generator[Any, None, Session]:
        return self._opener().__await__()

    async def __aenter__(self) -> Session:
        self._session = await self._opener()
        return self._session

    async def __aexit__(self, *exc_info: object) -> None:
        if self._session is not None:
            await self._session.close()


def _image_data(refs: list[str]) -> list[str]:
    """The caller's images as data URLs: its own files are read here, on its machine (a server is sent the
    image, never a path for it to read)."""
    from auger.models.images import ImageError, user_data_url

    try:
        return [user_data_url(ref) for ref in refs]
    except ImageError as exc:
        raise ConfigError(f"image not sent: {exc}") from None
