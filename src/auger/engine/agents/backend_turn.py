"""A turn run by another agent (a backend, auger/backends) instead of auger's own model loop.

The turn takes the queued input, records it exactly as a native turn does, sends it to the agent as a
prompt and follows the agent's stream: text and reasoning go out as deltas and are recorded as an
assistant message and reasoning; the agent's tool calls become `tool_call`/`tool_output` items with
tool_call_started/ended events; plans and usage become plan_updated and token_usage. So the store
and the event stream look the same whoever ran the turn, and the next turn (native or another
agent) sees the whole conversation.

What the agent says is text from outside auger's model: its words, thoughts, plans and tool calls are
redacted in full (auger/secrets) before they are recorded or shown, its text as it streams (a value split
across two chunks is never shown in parts), and a secret_redacted event says so.

The agent's requests (permission, file reads and writes) are answered in the turn's task by
engine/agents/backend_requests.py, through the session's policy, approvals, hooks and path guard. The agent
works in the directory the session's tools work on (in pending mode, the copy): what it changes there
with its own tools is handed to the session's mutation hooks after each prompt, so pending mode queues
it like auger's own changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections import Counter
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from auger.backends.base import (
    AgentBackend, BackendError, BackendEvent, PermissionAsked, PlanChanged, ReadRequested, TextChunk, ThoughtChunk,
    ToolFinished, ToolStarted, UsageReported, WriteRequested,
)
from auger.backends.pool import BackendPool
from auger.engine.agents.backend_requests import AgentRequests
from auger.engine.turn.history import INTERRUPTED_OUTPUT
from auger.engine.turn.host import TurnHost
from auger.engine.turn.streamed_items import MESSAGE, REASONING, StreamedItems
from auger.engine.turn.tool_runtime import PlannedCall
from auger.engine.turn.turn import TurnAbortedByUser, TurnStopped
from auger.engine.turn.turn_context import TurnContext
from auger.policy.types import Classification, Effect
from auger.protocol import events as ev
from auger.protocol.items import AssistantMessage, ContextMessage, Reasoning, ToolCall, ToolOutput, TurnAborted, \
    UserMessage
from auger.protocol.vocab import PlanStatus

if TYPE_CHECKING:
    from auger.secrets.redact import StreamRedactor

NO_RESULT = "the agent did not report a result for this call"
HANDOFF_CHARS = 16_000  # how much of the earlier conversation a newly started agent session is told


@dataclass
class BackendLink:
    """Which agent runs the session's turns, and where its session id is kept between processes."""

    name: str
    pool: BackendPool
    load_id: Callable[[], Awaitable[str | None]]
    save_id: Callable[[str], Awaitable[None]]


class BackendTurn:
    def __init__(self, ctx: TurnContext, host: TurnHost, link: BackendLink, *,
                 interrupt_reason: Callable[[], str] = lambda: "interrupted by the user") -> None:
        self.ctx = ctx
        self.host = host
        self.link = link
        self.id = ctx.turn_id
        self._interrupt_reason = interrupt_reason
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._items = StreamedItems(host.emit, self.id)  # the ids the text and thoughts stream under
        self._open: dict[str, _OpenCall] = {}  # by the agent's call id
        self.requests = AgentRequests(ctx, host, link.name)
        self._secrets = ctx.runtime.shared.secrets
        self._said = self._secrets.redactor.stream(shapes=True) if self._secrets is not None else None
        self._thought = self._secrets.redactor.stream(shapes=True) if self._secrets is not None else None
        self._redacted: Counter[str] = Counter()  # what was replaced in the agent's words since the last report

    async def run(self) -> tuple[str, str | None]:
        """Run to the end; (reason, message) for turn_ended, as Turn.run."""
        self.host.ledger.begin_turn()
        backend: AgentBackend | None = None
        try:
            while self.host.has_input():
                history = self._handoff()
                text = await self._take_input(announce=backend is not None)
                backend = await self._backend()
                stored = await self.link.load_id()
                if backend.agent_session_id != stored:  # a new conversation on the agent's side
                    await self.link.save_id(backend.agent_session_id or "")
                    text = history + text
                await self._prompt(backend, text)
            return "complete", None
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            return await self._abort(backend, self._interrupt_reason())
        except TurnAbortedByUser:
            return await self._abort(backend, "aborted by the user at an approval")
        except (BackendError, TurnStopped) as exc:
            await self._settle(f"not finished: {exc}")
            return "error", str(exc)
        finally:
            self.link.pool.touch(self.link.name)

    async def _backend(self) -> AgentBackend:
        """The agent, working in the directory the session's tools work on (pending mode: the copy)."""
        return await self.link.pool.acquire(self.link.name, str(self.ctx.runtime.root), await self.link.load_id())

    async def _abort(self, backend: AgentBackend | None, reason: str) -> tuple[str, str | None]:
        if backend is not None:
            await backend.cancel()
        await self._settle(INTERRUPTED_OUTPUT)
        await self.host.record(self.id, TurnAborted(reason))
        return "cancelled", reason

    # -- input ----------------------------------------------------------------------
    async def _take_input(self, *, announce: bool) -> str:
        """Record the queued input as a native turn does; the prompt text for the agent."""
        from auger.context.prompts import expand_slash

        host = self.host
        skills = await host.refresh_context(self.id)
        parts: list[str] = []
        while (op := host.take_input()) is not None:
            if op.images:
                raise TurnStopped(f"message not sent: the backend {self.link.name!r} is sent text only")
            if op.output_schema is not None:  # its answer could not be held to the schema: never ignore one
                raise TurnStopped(f"message not sent: an output schema needs auger's own model loop, and the "
                                  f"backend {self.link.name!r} runs this session's turns")
            for name in op.skills:
                skill = skills.get(name)
                if skill is None:
                    raise TurnStopped(f"message not sent: no skill named {name!r}")
                body = f"<skill name={name!r}>\n{skill.body()}\n</skill>"
                await host.record(self.id, ContextMessage(body, "skill"))
                parts.append(body)
            text = expand_slash(op.text, self.ctx.workspace.prompts) or op.text
            await host.record(self.id, UserMessage(text))
            await host.set_title(op.text)
            if announce:
                host.emit(ev.UserInputInjected(self.id, op.text))
            parts.append(text)
        return "\n\n".join(parts)

    def _handoff(self) -> str:
        """The conversation so far, for an agent that has not seen it (switched to mid-session)."""
        lines: list[str] = []
        for item in self.host.history.view():
            if isinstance(item, UserMessage):
                lines.append(f"User: {item.text}")
            elif isinstance(item, AssistantMessage):
                lines.append(f"Assistant: {item.text}")
        if not lines:
            return ""
        text = "\n\n".join(lines)[-HANDOFF_CHARS:]
        return f"<conversation_so_far>\n{text}\n</conversation_so_far>\n\n"

    # -- the agent's stream -----------------------------------------------------------
    async def _prompt(self, backend: AgentBackend, text: str) -> None:
        """One prompt, between the session's mutation hooks: the agent changes files with its own tools
        too, without telling us first, so the turn's snapshot (diff, undo) is taken before it gets the
        prompt, and what it changed is handed on after (pending mode queues it), however the prompt ends."""
        self.requests.new_prompt()
        planned = PlannedCall(self.id, f"{self.id}-prompt", f"{self.link.name} prompt", {},
                              Classification(Effect.LOCAL_MUTATION, self.link.name))
        await self.requests.before_change(planned)
        try:
            async with contextlib.aclosing(backend.prompt(text)) as stream:  # closed at once on abort or error
                async for event in stream:
                    await self._handle(event)
        finally:
            await asyncio.shield(self.requests.after_change(planned))
        await self._settle(NO_RESULT)

    async def _handle(self, event: BackendEvent) -> None:
        if isinstance(event, TextChunk):
            await self._flush_reasoning()
            self._say(self._text, self._items.text, self._shown(self._said, event.text))
        elif isinstance(event, ThoughtChunk):
            await self._flush_text()
            self._say(self._reasoning, self._items.reasoning, self._shown(self._thought, event.text))
        elif isinstance(event, ToolStarted):
            await self._call_started(event)
        elif isinstance(event, ToolFinished):
            await self._call_reported(event)
        elif isinstance(event, PlanChanged):
            steps = [ev.PlanStep(self._outside(text), PlanStatus(status)) for text, status in event.steps
                     if status in PlanStatus.__members__.values()]
            self.host.emit(ev.PlanUpdated(self.id, steps))
            self._report()
        elif isinstance(event, UsageReported):
            await self._usage(event)
        elif isinstance(event, (PermissionAsked, ReadRequested, WriteRequested)):
            await self.requests.answer(event)

    # -- what the agent says, redacted ------------------------------------------------------
    @staticmethod
    def _say(parts: list[str], stream: Callable[[str], None], text: str) -> None:
        if text:
            parts.append(text)
            stream(text)

    def _shown(self, stream: StreamRedactor | None, text: str, *, end: bool = False) -> str:
        """What of the agent's streamed text may be shown now (`end`: the rest of it)."""
        if stream is None:
            return text
        redaction = stream.flush() if end else stream.feed(text)
        self._redacted.update(redaction.kinds)
        return redaction.text

    def _outside(self, value: Any) -> Any:
        """A value the agent sent (a title, a call's arguments, a plan step) with its secret values redacted."""
        return self._secrets.outside(value, self._redacted) if self._secrets is not None else value

    def _report(self) -> None:
        if self._redacted:
            kinds, self._redacted = self._redacted, Counter()
            self.host.emit(ev.SecretRedacted(self.id, None, sorted(kinds), sum(kinds.values()), "agent"))

    async def _flush_reasoning(self) -> None:
        self._say(self._reasoning, self._items.reasoning, self._shown(self._thought, "", end=True))
        if self._reasoning:
            text, self._reasoning = "".join(self._reasoning), []
            await self.host.record(self.id, Reasoning(text))
            self._items.end(REASONING)
            self._report()

    async def _flush(self) -> None:
        """Commit what the agent thought and said so far (before a tool call, at the end)."""
        await self._flush_reasoning()
        await self._flush_text()

    async def _flush_text(self) -> None:
        self._say(self._text, self._items.text, self._shown(self._said, "", end=True))
        if self._text:
            text, self._text = "".join(self._text), []
            await self.host.record(self.id, AssistantMessage(text))
            self.host.emit(ev.AgentMessage(self.id, text, self._items.end(MESSAGE)))
            self._report()

    async def _settle(self, unfinished: str) -> None:
        """Commit the text, and close the calls the agent left open (`unfinished` is their output)."""
        await self._flush()
        for agent_id in list(self._open):
            await self._call_finished(agent_id, False, unfinished)

    async def _call_started(self, event: ToolStarted) -> None:
        from auger.backends.permissions import tool_name

        await self._flush()
        # the id goes to model APIs later, which accept [A-Za-z0-9_-] (Anthropic: at most 64 of them)
        call_id = re.sub(r"[^A-Za-z0-9_-]", "_", event.call_id)[:48] or "call"
        known = self.host.history.call_ids()
        if call_id in known:  # ids must stay unique in the session; another agent session may reuse them
            call_id = f"{call_id}_{len(known)}"
        name = tool_name(event.kind)
        arguments = self._outside({"title": event.title, "input": event.arguments})
        self._report()
        await self.host.record(self.id, ToolCall(call_id, name, json.dumps(arguments, ensure_ascii=False)))
        self._open[event.call_id] = _OpenCall(call_id, name, arguments, time.monotonic())
        self.host.emit(ev.ToolCallStarted(self.id, call_id, name, arguments))

    async def _call_reported(self, event: ToolFinished) -> None:
        """A result the agent reported for its call, recorded as the `after_tool` hooks leave it."""
        opened = self._open.get(event.call_id)
        if opened is not None:
            output = await self.requests.reported(opened.call_id, opened.name, opened.arguments, event.ok,
                                                  event.output)
            await self._call_finished(event.call_id, event.ok, output)

    async def _call_finished(self, agent_id: str, ok: bool, output: str) -> None:
        opened = self._open.pop(agent_id, None)
        if opened is None:
            return
        await self.host.record(self.id, ToolOutput(opened.call_id, output, ok), tool_name=opened.name)
        self.host.emit(ev.ToolCallEnded(self.id, opened.call_id, opened.name, ok, output,
                                        int((time.monotonic() - opened.started) * 1000)))

    async def _usage(self, event: UsageReported) -> None:
        host = self.host
        usage = ev.Usage(event.input_tokens, event.cached_input_tokens, event.output_tokens, event.reasoning_tokens)
        if usage.total_tokens:
            await host.charge(self.id, f"{self.link.name} (backend)", usage, None)
        report = host.ledger.report(self.id, usage, event.context_used, event.context_window)
        host.emit(replace(report, turn_cost=None, session_cost=None))  # the agent's prices are unknown to auger


@dataclass(frozen=True)
class _OpenCall:
    """A call the agent started and has not finished: how it is recorded, and when it started."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    started: float
