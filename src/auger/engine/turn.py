"""One turn: model call, tool calls, repeat until the model answers without calling a tool.

Order of effects is the durability contract: an item is committed to the store
before the event announcing it is emitted and before the next model call, so a
process killed at any moment has lost nothing it had already shown.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from auger.engine.compact import compact
from auger.engine.history import INTERRUPTED_OUTPUT, image_rejection
from auger.engine.loop_guard import DOOM_REPEATS, LoopGuard, doom_note
from auger.models.base import (
    Completed, ContextWindowExceeded, ImageRejected, ModelError, ModelRequest, ReasoningDelta, ReasoningDone, StreamEvent, TextDelta, ToolCallReady,
    UsageReport,
)
from auger.models.registry import add_cost
from auger.models.retry import RetryPolicy, stream_with_retry
from auger.protocol import events as ev
from auger.protocol.events import Usage
from auger.protocol.jsontext import loads as loads_bounded
from auger.protocol.items import (
    AssistantMessage, ContextMessage, Reasoning, ToolCall, ToolOutput, TurnAborted, UserMessage,
)
from auger.tools.base import ToolContext, ToolError, ToolResult

if TYPE_CHECKING:
    from auger.engine.session import Session

log = logging.getLogger("auger.turn")


class TurnStopped(Exception):
    """The turn ends early by decision (loop guard), not by failure of a part."""


class TurnAbortedByUser(Exception):
    """The user chose "abort" at an approval: end the turn as cancelled."""


@dataclass
class _Reply:
    # Deltas are collected in lists and joined once: appending to a str attribute copies it every time.
    text_parts: list[str] = field(default_factory=list)
    reasoning_parts: list[str] = field(default_factory=list)
    reasoning_items: list[ReasoningDone] = field(default_factory=list)
    calls: list[ToolCallReady] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    warning: str | None = None

    @property
    def text(self) -> str:
        return "".join(self.text_parts)

    @property
    def reasoning(self) -> str:
        return "".join(self.reasoning_parts)


class _Archive:
    """Gives `recall` this session's stored outputs, and nothing of other sessions."""

    def __init__(self, session: Session) -> None:
        self._session = session

    async def get_output(self, call_id: str):
        return await self._session.store.get_output(self._session.id, call_id)

    async def list_outputs(self):
        return await self._session.store.list_outputs(self._session.id)

    async def search_messages(self, query: str) -> list[tuple[str, str]]:
        found = await self._session.store.search_messages(self._session.id, query)
        labels = {"user_message": "user", "assistant_message": "assistant", "compaction": "summary"}
        return [(f"{labels[item.TYPE]} message #{seq}", getattr(item, "text", None) or getattr(item, "summary", ""))
                for seq, item in found]


class _BadJSON:
    def __init__(self, reason: str) -> None:
        self.reason = reason


class Turn:
    def __init__(self, session: Session, turn_id: str, *, compact_only: bool = False) -> None:
        self.session = session
        self.id = turn_id
        self.compact_only = compact_only
        config = session.agent.config
        self.guard = LoopGuard(config.max_model_calls_per_turn)
        self.retry = RetryPolicy(config.model_max_attempts, config.model_retry_base_delay,
                                 config.model_retry_max_delay)
        self.usage = Usage()
        self.cost: float | None = 0.0
        self._calls: list[ToolCall] = []

    async def run(self) -> tuple[str, str | None]:
        """Run to the end; return (reason, message) for the turn_ended event."""
        try:
            await self._loop()
            return "complete", None
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            reason = self.session.interrupt_reason
            await self._record_abort(reason)
            return "cancelled", reason
        except TurnAbortedByUser:
            await self._record_abort("aborted by the user at an approval")
            return "cancelled", "aborted by the user at an approval"
        except (ModelError, TurnStopped) as exc:
            return "error", str(exc)

    async def _loop(self) -> None:
        session = self.session
        tools = session.agent.tools.schemas
        if self.compact_only:
            await compact(self, "manual")
            return
        first = True
        while True:
            await self._take_input(announce=not first)
            first = False
            if self.guard.at_cap():
                await self._ask_to_continue()
            exhausted = session.budget_exhausted()
            if exhausted:  # checked between steps: a tool write is never cut short
                raise TurnStopped(exhausted)
            session.check_window_fill(self.id)
            compacted = await self._compact_if_needed()
            images_replaced = False
            while True:
                request = ModelRequest(session.instructions(), session.history.for_prompt(session.output_cap_chars),
                                       tools)
                try:
                    reply = await self.call_model(request)
                    break
                except ContextWindowExceeded:
                    if compacted:  # already as small as compaction makes it
                        raise
                    await compact(self, "auto")
                    compacted = True
                except ImageRejected as exc:  # replaced durably by a note, so later turns do not fail too
                    marker = None if images_replaced else image_rejection(session.history.view(), str(exc))
                    if marker is None:
                        raise
                    await session.record(self.id, marker)
                    session.emit(ev.WarningEvent(f"{exc}; the image was replaced by a note and the request "
                                                 "sent again", self.id))
                    images_replaced = True
            self.guard.note_model_call()
            calls = await self._record_reply(reply)
            if calls:
                await self._run_calls(calls)
            elif not session.pending_input:
                return

    async def _compact_if_needed(self) -> bool:
        session = self.session
        if session.compact_requested or session.context_estimate() >= session.compact_limit:
            reason = "manual" if session.compact_requested else "auto"
            session.compact_requested = False
            await compact(self, reason)
            return True
        return False

    async def _take_input(self, *, announce: bool) -> None:
        """Move queued user input into the conversation, so mid-turn input is never lost.

        Slash commands naming a custom prompt are expanded; requested skills are injected before
        the message; images are checked first, so an unreadable one never enters the history."""
        from auger.context.prompts import expand_slash
        from auger.models.images import ImageError, load_image

        session = self.session
        if session.pending_input:  # a user turn: first tell what changed in instructions and environment
            await session.refresh_context(self.id)
        while session.pending_input:
            op = session.pending_input.pop(0)
            if op.images and not session.model_info.supports_images:
                raise TurnStopped(f"message not sent: model '{session.client.model}' does not accept images "
                                  "(supports_images = false in its model description)")
            for ref in op.images:
                try:
                    load_image(ref)
                except ImageError as exc:
                    raise TurnStopped(f"message not sent: {exc}") from None
            for name in op.skills:
                skill = session.skills.get(name)
                if skill is None:
                    raise TurnStopped(f"message not sent: no skill named {name!r}")
                await session.record(self.id, ContextMessage(f"<skill name={name!r}>\n{skill.body()}\n</skill>",
                                                             "skill"))
            text = expand_slash(op.text, session.agent.prompts) or op.text
            await session.record(self.id, UserMessage(text, list(op.images)))
            if not session.meta.title:
                await session.set_title(op.text)
            if announce:
                session.emit(ev.UserInputInjected(self.id, op.text))

    async def _ask_to_continue(self) -> None:
        cap = self.guard.max_model_calls
        message = (f"this turn has made {self.guard.model_calls} model calls (max_model_calls_per_turn = {cap}); "
                   "stopped to avoid a runaway loop")
        decision = await self.session.ask(turn_id=self.id, kind="continue", message=message,
                                          options=["continue", "stop"], headless_default="stop")
        if decision.decision != "continue":
            raise TurnStopped(message)
        self.guard.extend()

    async def call_model(self, request: ModelRequest, *, quiet: bool = False) -> _Reply:
        """One reply, retried within the policy. `quiet` calls (summaries) emit no deltas and
        only add their usage to the totals."""
        session = self.session
        reply = _Reply()

        def on_event(event: StreamEvent) -> None:
            if isinstance(event, TextDelta):
                reply.text_parts.append(event.text)
                if not quiet:
                    session.emit(ev.MessageDelta(self.id, event.text))
            elif isinstance(event, ReasoningDelta):
                reply.reasoning_parts.append(event.text)
                if not quiet:
                    session.emit(ev.ReasoningDelta(self.id, event.text))
            elif isinstance(event, ReasoningDone):
                reply.reasoning_items.append(event)
            elif isinstance(event, ToolCallReady):
                reply.calls.append(event)
            elif isinstance(event, UsageReport):
                reply.usage = event.usage
            elif isinstance(event, Completed):
                reply.finish_reason = event.finish_reason
                reply.warning = event.warning

        def on_retry(attempt: int, delay: float, error: ModelError) -> None:
            nonlocal reply
            reply = _Reply()  # the failed attempt's partial reply is discarded
            session.emit(ev.Retrying(self.id, attempt, self.retry.max_attempts, round(delay, 3), str(error)))

        try:
            await stream_with_retry(session.client, request, self.retry, on_event, on_retry)
        except ModelError as exc:
            if exc.retryable:
                raise ModelError(f"model request failed after {self.retry.max_attempts} attempts: {exc}",
                                 retryable=False, status=exc.status) from exc
            raise
        if quiet:
            await self._account(reply.usage)
        return reply

    async def _account(self, usage: Usage) -> None:
        session = self.session
        self.usage = self.usage + usage
        session.usage = session.usage + usage
        cost = session.model_info.cost(usage)
        self.cost = add_cost(self.cost, cost)
        session.cost = add_cost(session.cost, cost)
        await session.store.record_usage(session.id, self.id, session.client.model, usage)

    async def _record_reply(self, reply: _Reply) -> list[ToolCall]:
        """Commit the reply's items and usage; return its tool calls (ids made unique in the session)."""
        session = self.session
        for done in reply.reasoning_items:  # complete items carry provider state to send back
            await session.record(self.id, Reasoning(done.text, done.encrypted, done.provider, done.item_id,
                                                    done.redacted))
        if reply.reasoning and not reply.reasoning_items:
            await session.record(self.id, Reasoning(reply.reasoning))
        if reply.text:
            await session.record(self.id, AssistantMessage(reply.text))
            session.emit(ev.AgentMessage(self.id, reply.text))
        known = session.history.call_ids()
        calls = []
        for ready in reply.calls:
            call_id = ready.call_id
            if call_id in known:  # some local servers reuse ids across replies; ids must stay unique
                call_id = f"{call_id}_{len(known)}"
            known.add(call_id)
            call = ToolCall(call_id, ready.name, ready.arguments)
            await session.record(self.id, call)
            calls.append(call)
        self._calls.extend(calls)
        await self._account(reply.usage)
        if reply.usage.input_tokens:
            session.mark_context(reply.usage.input_tokens + reply.usage.output_tokens)
        used, window = session.context_estimate(), session.context_window
        session.emit(ev.TokenUsage(self.id, reply.usage, self.usage, session.usage, used, window,
                                   round(max(0.0, 100.0 * (1 - used / window)), 1), self.cost, session.cost))
        if reply.warning:
            session.emit(ev.WarningEvent(reply.warning, self.id))
        elif reply.finish_reason == "length":
            session.emit(ev.WarningEvent("the model's reply was cut off at its output token limit", self.id))
        return calls

    async def _run_calls(self, calls: list[ToolCall]) -> None:
        """Consecutive parallel-safe calls run together; anything that mutates runs alone, in order."""
        batches: list[tuple[bool, list[ToolCall]]] = []
        for call in calls:
            spec = self.session.agent.tools.get(call.name)
            parallel = spec is not None and spec.parallel_safe
            if parallel and batches and batches[-1][0]:
                batches[-1][1].append(call)
            else:
                batches.append((parallel, [call]))
        for _, batch in batches:
            if len(batch) == 1:
                await self._run_call(batch[0])
            else:
                await asyncio.gather(*(self._run_call(call) for call in batch))

    async def _run_call(self, call: ToolCall) -> None:
        session = self.session
        arguments = _parse_arguments(call.arguments)
        shown = call.arguments if isinstance(arguments, _BadJSON) else arguments
        session.emit(ev.ToolCallStarted(self.id, call.call_id, call.name, shown))
        repeats = self.guard.note_tool_call(call.name, call.arguments)
        started = time.monotonic()
        result = await self._execute(call, arguments)
        if repeats >= DOOM_REPEATS:
            result.output += doom_note(call.name, repeats)
            session.emit(ev.LoopDetected(self.id, call.name, repeats))
        output = ToolOutput(call.call_id, result.output, result.ok)
        await session.record(self.id, output, full_output=result.full_output, tool_name=call.name,
                             arguments=call.arguments)
        session.emit(ev.ToolCallEnded(self.id, call.call_id, call.name, result.ok, result.output,
                                      int((time.monotonic() - started) * 1000)))
        for event in result.events:
            session.emit(event)
        if result.metadata.get("aborted"):
            raise TurnAbortedByUser()

    async def _execute(self, call: ToolCall, arguments: object) -> ToolResult:
        """Validate, pass the policy gate, run. Every failure becomes an output the model reads."""
        session = self.session
        spec = session.agent.tools.get(call.name)
        if spec is None:
            return ToolResult(f"Error: there is no tool named {call.name!r}. Available tools: "
                              f"{', '.join(session.agent.tools.names)}", ok=False)
        if isinstance(arguments, _BadJSON):
            return ToolResult(f"Error: the arguments for {call.name} {arguments.reason}. "
                              "Send a JSON object that matches the tool's parameters.", ok=False)
        ctx = ToolContext(root=session.agent.root, state=session.tool_state, call_id=call.call_id,
                          archive=_Archive(session), turn_id=self.id, env=session.command_env, sandbox=session.confinement,
                          emit_output=lambda stream, text: session.emit(
                              ev.ToolOutputDelta(self.id, call.call_id, stream, text)))
        try:
            args = spec.validate(arguments)
            review = await session.gate.review(self.id, call.call_id, spec, args, ctx)
            if not review.run:
                return ToolResult(review.message, ok=False, metadata={"aborted": review.abort})
            result = await spec.handler(args, ctx)
            if result.metadata.get("sandbox_blocked") and await session.gate.allow_unsandboxed(
                    self.id, call.call_id, spec, args, result.metadata["sandbox_blocked"]):
                ctx.sandbox = None
                result = await spec.handler(args, ctx)
                result.output = "Re-run outside the sandbox with the user's approval.\n" + result.output
            return result
        except ToolError as exc:
            return ToolResult(f"Error: {exc}", ok=False)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a tool bug must not end the turn; the model can try another way
            log.exception("tool %s failed", call.name)
            return ToolResult(f"Error: internal error in tool {call.name}: {type(exc).__name__}: {exc}", ok=False)

    async def _record_abort(self, reason: str) -> None:
        """Close this turn's unfinished calls and mark the turn aborted, durably."""
        session = self.session
        answered = {i.call_id for i in session.history.items if isinstance(i, ToolOutput)}
        for call in self._calls:
            if call.call_id not in answered:
                await session.record(self.id, ToolOutput(call.call_id, INTERRUPTED_OUTPUT, ok=False),
                                     tool_name=call.name, arguments=call.arguments)
        await session.record(self.id, TurnAborted(reason))


def _parse_arguments(raw: str) -> object:
    """The call's arguments, or why they cannot be used; nesting is bounded, because everything
    after this point (validation, events, the JSON output) walks the value recursively."""
    if not raw.strip():
        return {}
    try:
        return loads_bounded(raw)
    except json.JSONDecodeError as exc:
        return _BadJSON(f"are not valid JSON ({exc})")
    except ValueError as exc:  # valid, but nested too deeply to be walked safely
        return _BadJSON(f"are {exc}")
