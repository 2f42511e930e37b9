"""One turn: model call, tool calls, repeat until the model answers without calling a tool.

A turn reads its frozen TurnContext and acts only through its TurnHost; it never sees the
Session. Order of effects is the durability contract: an item is committed (`host.record`)
before the event announcing it is emitted and before the next model call, so a process
killed at any moment has lost nothing it had already shown. A read that starts while the
reply still streams (engine/turn/reply_calls.py) keeps it: what it announces waits until the
reply's items are recorded, and its output is recorded after them, in the reply's order.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Callable

from auger.engine.turn.compact import compact
from auger.engine.turn.fallback import Switch
from auger.engine.turn.history import INTERRUPTED_OUTPUT, TOOL_IMAGES, image_rejection
from auger.engine.turn.host import TurnHost
from auger.engine.turn.loop_guard import DOOM_REPEATS, LoopGuard, doom_note
from auger.engine.turn.model_call import Reply, announce_limits, announce_retries, announce_switch, call_model
from auger.engine.turn.reply_calls import ReplyCalls
from auger.engine.turn.streamed_items import StreamedItems
from auger.engine.turn.call_outcome import Aborted, call_ended, result_of
from auger.engine.turn.turn_context import TurnContext
from auger.models.base import (
    ContextWindowExceeded,
    ImageRejected,
    ModelError,
    ModelRequest,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
)
from auger.protocol import events as ev
from auger.protocol.items import (
    AssistantMessage, ContextMessage, Reasoning, SearchSources, ToolCall, ToolOutput, TurnAborted, UserMessage,
)
from auger.tools.base import ToolResult

if TYPE_CHECKING:  # loaded by the first input that gives a schema
    from auger.engine.turn.structured_output import OutputCheck


class TurnStopped(Exception):
    """The turn ends early by decision (loop guard, budget, unusable input), not by failure of a part."""


class TurnAbortedByUser(Exception):
    """The user chose "abort" at an approval: end the turn as cancelled."""


class Turn:
    def __init__(self, ctx: TurnContext, host: TurnHost, *, compact_only: bool = False,
                 interrupt_reason: Callable[[], str] = lambda: "interrupted by the user",
                 parked: Callable[[], bool] = lambda: False, open_calls: bool = False) -> None:
        """`parked`: asked when the turn is cancelled — True means it stops to wait for a person, not for
        good, so its unanswered calls are left open for the turn that continues it. `open_calls`: this turn
        continues a parked one: the calls its reply left open run first (their approval already answered),
        then the model is called as after any reply."""
        self.ctx = ctx
        self.host = host
        self.id = ctx.turn_id
        self.compact_only = compact_only
        self.guard = LoopGuard(ctx.max_model_calls)
        self._interrupt_reason = interrupt_reason
        self._parked = parked
        self._open_calls = open_calls
        self._calls: list[ToolCall] = []
        self.output: OutputCheck | None = None  # the schema the final answer must match, when input gave one

    async def run(self) -> tuple[str, str | None]:
        """Run to the end; return (reason, message) for the turn_ended event."""
        self.host.ledger.begin_turn()
        try:
            await self._loop()
            return "complete", None
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            reason = self._interrupt_reason()
            if not self._parked():  # a parked turn leaves its open calls for the turn that continues it
                await self._record_abort(reason)
            return "cancelled", reason
        except TurnAbortedByUser:
            await self._record_abort("aborted by the user at an approval")
            return "cancelled", "aborted by the user at an approval"
        except (ModelError, TurnStopped) as exc:
            return "error", str(exc)

    async def _loop(self) -> None:
        ctx, host = self.ctx, self.host
        if self.compact_only:
            await compact(ctx, host, "manual")
            return
        if self._open_calls:
            await self._run_open_calls()
        first = True
        while True:
            await self._take_input(announce=not first)
            first = False
            if self.guard.at_cap():
                await self._ask_to_continue()
            exhausted = host.ledger.exhausted(ctx.budgets)
            if exhausted:  # checked between steps: a tool write is never cut short
                raise TurnStopped(exhausted)
            self._check_window_fill()
            compacted = await self._compact_if_needed()
            images_replaced = False
            await ctx.runtime.router.refresh()  # tool sources changed since the last call take effect now
            while True:
                request = ModelRequest(ctx.system_prompt, host.history.for_prompt(ctx.limits.output_cap_chars),
                                       list(ctx.tools), output=self.output.format if self.output else None,
                                       effort=ctx.effort, summary=ctx.summary,
                                       parallel_tools=ctx.model_info.supports_parallel_tools)
                try:
                    reply, message_id, arrived = await self._call_model(request)
                    break
                except ContextWindowExceeded:
                    if compacted:  # already as small as compaction makes it
                        raise
                    await compact(ctx, host, "auto")
                    compacted = True
                except ImageRejected as exc:  # replaced durably by a note, so later turns do not fail too
                    marker = None if images_replaced else image_rejection(host.history.view(), str(exc))
                    if marker is None:
                        raise
                    await host.record(self.id, marker)
                    host.emit(ev.WarningEvent(f"{exc}; the image was replaced by a note and the request "
                                              "sent again", self.id))
                    images_replaced = True
            self.guard.note_model_call()
            try:
                calls = await self._record_reply(reply, message_id, arrived)
                if calls:
                    await self._run_calls(calls, arrived)
            finally:
                await arrived.cancel()  # what started early and was not run to its end (an interrupt)
            if not calls and not host.has_input() and await self._answer_stands(reply):
                return

    async def _answer_stands(self, reply: Reply) -> bool:
        """The final answer ends the turn, unless the turn's output schema sends it back to be repaired."""
        if self.output is None:
            return True
        from auger.engine.turn.structured_output import StructuredOutputFailed

        try:
            return await self.output.settle(reply.text, self.id, self.host)
        except StructuredOutputFailed as exc:
            raise TurnStopped(str(exc)) from None

    def _context_used(self) -> int:
        return self.host.meter.estimate(self.ctx.system_prompt, self.ctx.tools, self.ctx.limits)

    def _check_window_fill(self) -> None:
        """Warn once, before the session's first request made with the model's real window (known from the
        start, or once its server answered), when that request already fills most of the window."""
        from auger.models.context_window import fill_warning

        if not self.ctx.limits.provisional and self.host.meter.first_check():
            warning = fill_warning(self._context_used(), self.ctx.limits.window, self.ctx.model)
            if warning:
                self.host.emit(ev.WarningEvent(warning, self.id))

    async def _compact_if_needed(self) -> bool:
        requested = self.host.take_compact_request()
        if requested or self._context_used() >= self.ctx.limits.compact_at:
            await compact(self.ctx, self.host, "manual" if requested else "auto")
            return True
        return False

    async def _take_input(self, *, announce: bool) -> None:
        """Move queued user input into the conversation, so mid-turn input is never lost.

        Slash commands naming a custom prompt are expanded; requested skills are injected before
        the message; images are taken first (as data: see `_images`), so an unreadable one never enters
        the history."""
        from auger.context.prompts import expand_slash

        ctx, host = self.ctx, self.host
        if not host.has_input():
            return
        skills = await host.refresh_context(self.id)  # a user turn: first tell what changed
        while (op := host.take_input()) is not None:
            if op.images and not ctx.model_info.supports_images:
                raise TurnStopped(f"message not sent: model '{ctx.model}' does not accept images "
                                  "(supports_images = false in its model description)")
            images = await asyncio.to_thread(self._images, op.images) if op.images else []
            output = self._output_check(op.output_schema) if op.output_schema is not None else None
            for name in op.skills:
                skill = skills.get(name)
                if skill is None:
                    raise TurnStopped(f"message not sent: no skill named {name!r}")
                await host.record(self.id, ContextMessage(f"<skill name={name!r}>\n{skill.body()}\n</skill>",
                                                          "skill"))
            text = await self._expand_mcp_prompt(op.text) or expand_slash(op.text, ctx.workspace.prompts) or op.text
            await self._prompt_hooks(text)
            await host.record(self.id, UserMessage(text, images))
            if output is not None:  # the latest input's schema is the one the final answer answers
                self.output = output
                await output.tell(self.id, host)
            await host.set_title(op.text)
            if announce:
                host.emit(ev.UserInputInjected(self.id, op.text))

    def _images(self, refs: list[str]) -> list[str]:
        """The message's images as checked data URLs, so the history and every model request carry the
        image itself: a data URL whose bytes are an image of its type, or a file read beneath the project
        root (never one outside it, nor through a symlink leading out)."""
        from auger.models.images import ImageError, project_data_url
        from auger.policy.fs import RootHandle

        root = RootHandle(self.ctx.workspace.root)
        try:
            return [project_data_url(root, ref) for ref in refs]
        except ImageError as exc:
            raise TurnStopped(f"message not sent: {exc}") from None
        finally:
            root.close()

    @staticmethod
    def _output_check(schema: object) -> OutputCheck:
        """The check of the answer a schema asks for (engine/turn/structured_output.py, loaded only for one)."""
        from auger.engine.turn.structured_output import OutputCheck, OutputSchemaError, OutputSpec

        try:
            return OutputCheck(OutputSpec.of(schema))
        except OutputSchemaError as exc:
            raise TurnStopped(f"message not sent: {exc}") from None

    async def _expand_mcp_prompt(self, text: str) -> str | None:
        """`/mcp__<server>__<prompt> args` as the server's prompt text (tools/mcp_servers.py); None otherwise."""
        if not text.startswith("/mcp__"):
            return None
        from auger.tools.mcp_servers import PromptError, expand_prompt

        try:
            expanded = await expand_prompt(self.ctx.runtime.router.registry, text)
        except PromptError as exc:
            raise TurnStopped(f"message not sent: {exc}") from None
        secrets = self.ctx.runtime.shared.secrets  # the server wrote it: text from outside, redacted in full
        return secrets.redactor.redact(expanded).text if secrets is not None and expanded else expanded

    async def _prompt_hooks(self, text: str) -> None:
        """`user_prompt` hooks (engine/hooks.py): a block stops the turn before the prompt is recorded;
        context they add is recorded just before it."""
        hooks = self.ctx.runtime.hooks
        if hooks is None or not hooks.has("user_prompt"):
            return
        result = await hooks.run("user_prompt", {"turn_id": self.id, "prompt": text})
        for message in result.warnings:
            self.host.emit(ev.WarningEvent(message, self.id))
        if result.blocked is not None:
            raise TurnStopped(f"message not sent: a hook blocked it: {result.blocked}")
        for context in result.context:
            await self.host.record(self.id, ContextMessage(context, "hook"))

    async def _ask_to_continue(self) -> None:
        cap = self.guard.max_model_calls
        message = (f"this turn has made {self.guard.model_calls} model calls (max_model_calls_per_turn = {cap}); "
                   "stopped to avoid a runaway loop")
        decision = await self.host.ask(turn_id=self.id, kind="continue", message=message,
                                       options=["continue", "stop"], headless_default="stop")
        if decision.decision != "continue":
            raise TurnStopped(message)
        self.guard.extend()

    async def _call_model(self, request: ModelRequest) -> tuple[Reply, str, ReplyCalls]:
        """One reply, the id its text streamed under, and its calls (the reads among them started as they
        arrived); its text and reasoning stream out as events while it arrives, each piece with an id of
        its own (an attempt a retry throws away is ended discarded, and its early calls cancelled)."""
        host = self.host
        items = StreamedItems(host.emit, self.id)
        arrived = ReplyCalls(self.ctx.runtime, host, self.id)
        announce = announce_retries(host.emit, self.id, self.ctx.retry)
        switched = announce_switch(host.emit, self.id)

        def on_delta(event: StreamEvent) -> None:
            if isinstance(event, TextDelta):
                items.text(event.text)
            elif isinstance(event, ReasoningDelta):  # call_model passes only these two
                items.reasoning(event.text)

        def on_retry(attempt: int, delay: float, error: ModelError) -> None:
            items.end(discarded=True)
            arrived.discard()
            announce(attempt, delay, error)

        def on_switch(switch: Switch) -> None:  # the failed model's partial reply goes, as a retry's does
            items.end(discarded=True)
            arrived.discard()
            switched(switch)

        try:
            reply = await call_model(self.ctx.client, request, self.ctx.retry, on_delta=on_delta, on_retry=on_retry,
                                     on_limits=announce_limits(host.emit, self.id), on_call=arrived.arrived,
                                     on_switch=on_switch)
        except BaseException:
            items.end(discarded=True)
            await arrived.cancel()
            raise
        return reply, items.end(), arrived

    async def _record_reply(self, reply: Reply, message_id: str, arrived: ReplyCalls) -> list[ToolCall]:
        """Commit the reply's items and usage, then let its early calls announce themselves; return its tool
        calls (ids made unique in the session as they arrived)."""
        ctx, host = self.ctx, self.host
        for done in reply.reasoning_items:  # complete items carry provider state to send back
            await host.record(self.id, Reasoning(done.text, done.encrypted, done.provider, done.item_id,
                                                 done.redacted))
        if reply.reasoning and not reply.reasoning_items:
            await host.record(self.id, Reasoning(reply.reasoning))
        if reply.text:
            await host.record(self.id, AssistantMessage(reply.text))
            host.emit(ev.AgentMessage(self.id, reply.text, message_id))
        if reply.sources:  # where a hosted search's pages came from, apart from the text the model wrote
            await host.record(self.id, SearchSources(list(dict.fromkeys(s.url for s in reply.sources))))
        calls = list(arrived.calls)
        for call in calls:
            await host.record(self.id, call)
        self._calls.extend(calls)
        cost = ctx.info_for(reply.provider, reply.model).cost(reply.usage)
        await host.charge(self.id, reply.model, reply.usage, cost, ctx.purpose)
        if reply.usage.input_tokens:
            host.meter.mark(reply.usage.input_tokens + reply.usage.output_tokens)
        host.emit(host.ledger.report(self.id, reply.usage, self._context_used(), ctx.limits.window,
                                     model=reply.model, duration_ms=reply.duration_ms,
                                     finish_reason=reply.finish_reason, purpose=ctx.purpose))
        if reply.warning:
            host.emit(ev.WarningEvent(reply.warning, self.id))
        elif reply.finish_reason == "length":
            host.emit(ev.WarningEvent("the model's reply was cut off at its output token limit", self.id))
        arrived.release()
        return calls

    async def _run_calls(self, calls: list[ToolCall], arrived: ReplyCalls) -> None:
        """Consecutive parallel-safe calls run together; anything that mutates runs alone, in order. The
        reads that started early lead the reply, so they are all in its first batch."""
        batches: list[tuple[bool, list[ToolCall]]] = []
        for call in calls:
            parallel = self.ctx.runtime.router.parallel_safe(call.name)
            if parallel and batches and batches[-1][0]:
                batches[-1][1].append(call)
            else:
                batches.append((parallel, [call]))
        for _, batch in batches:
            if len(batch) == 1:
                await self._run_call(batch[0], arrived)
            else:
                await asyncio.gather(*(self._run_call(call, arrived) for call in batch))

    async def _run_open_calls(self) -> None:
        """Run the calls a parked turn left open, in their reply's order, as that turn would have."""
        calls = self.host.history.unanswered_calls()
        self._calls.extend(calls)
        for call in calls:
            await self._run_call(call, None)

    async def _run_call(self, call: ToolCall, arrived: ReplyCalls | None) -> None:
        host = self.host
        repeats = self.guard.note_tool_call(call.name, call.arguments)
        early = arrived.started(call.call_id) if arrived is not None else None
        if early is not None:
            task, started = early
            outcome = await task
        else:
            started = time.monotonic()
            outcome = await self.ctx.runtime.run(call, host, turn_id=self.id)
        result = result_of(outcome)
        if repeats >= DOOM_REPEATS:
            result.output += doom_note(call.name, repeats)
            host.emit(ev.LoopDetected(self.id, call.name, repeats))
        images = self._tool_images(call, result)
        await host.record(self.id, ToolOutput(call.call_id, result.output, result.ok), full_output=result.full_output,
                          tool_name=call.name, arguments=call.arguments)
        if images is not None:  # the view places it after the reply's outputs (history.normalise)
            await host.record(self.id, images)
        host.emit(call_ended(self.id, call, result, outcome, started))
        for event in result.events:
            host.emit(event)
        if isinstance(outcome, Aborted):
            raise TurnAbortedByUser()

    def _tool_images(self, call: ToolCall, result: ToolResult) -> ContextMessage | None:
        """Images a tool returned (an MCP tool's): tool outputs are text on every wire API, so a model that
        takes images gets them in a user-role message after the outputs; a text-only one reads a note."""
        if not result.images:
            return None
        count = f"{len(result.images)} image{'s' if len(result.images) > 1 else ''}"
        if not self.ctx.model_info.supports_images:
            result.output += f"\n[{count} not shown: model '{self.ctx.model}' does not take images]"
            return None
        result.output += f"\n[{count} attached in the next message]"
        return ContextMessage(f"The {count} returned by {call.name} (call {call.call_id}):", TOOL_IMAGES,
                              {"images": list(result.images), "call_id": call.call_id})

    async def _record_abort(self, reason: str) -> None:
        """Close this turn's unfinished calls and mark the turn aborted, durably."""
        host = self.host
        answered = {i.call_id for i in host.history.items if isinstance(i, ToolOutput)}
        for call in self._calls:
            if call.call_id not in answered:
                await host.record(self.id, ToolOutput(call.call_id, INTERRUPTED_OUTPUT, ok=False),
                                  tool_name=call.name, arguments=call.arguments)
        await host.record(self.id, TurnAborted(reason))
