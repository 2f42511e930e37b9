"""A turn run by another agent (a backend, auger/backends) instead of auger's own model loop.

The turn takes the queued input, records it exactly as a native turn does, sends it to the agent as a
prompt and follows the agent's stream: text and reasoning go out as deltas and are recorded as an
assistant message and reasoning; the agent's tool calls become `tool_call`/`tool_output` items with
tool_call_started/ended events; plans and usage become plan_updated and token_usage. So the store
and the event stream look the same whoever ran the turn, and the next turn (native or another
agent) sees the whole conversation.

The agent's requests are answered here, in the turn's task:

* permission (session/request_permission): classified (backends/permissions.py) and decided by the
  same `decide_call` as native calls — rules, trust mode, session grants — then, when it asks, put to
  the client as an `approval_request` (headless: denied unless approve_all, like native calls);
* fs/read_text_file: read beneath the project root (backends/files.py), refused outside it;
* fs/write_text_file: the path guard and git guard, then the same policy decision as native
  `write_file` (a file the agent got permission to change in this prompt is not asked about again),
  the session's mutation hooks around it (the turn's snapshot for diff and undo, the session's
  own-files record), then an atomic write.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from dataclasses import dataclass, replace
from typing import Any, Awaitable, Callable

from auger.backends import files as agent_files
from auger.backends.base import (
    AgentBackend, BackendError, BackendEvent, PermissionAsked, PlanChanged, ReadRequested, TextChunk, ThoughtChunk,
    ToolFinished, ToolStarted, UsageReported, WriteRequested,
)
from auger.backends.pool import BackendPool
from auger.engine.history import INTERRUPTED_OUTPUT
from auger.engine.host import TurnHost
from auger.engine.tool_runtime import ABORT, APPROVE, APPROVE_SESSION, DENY_CALL, PlannedCall
from auger.engine.turn import TurnAbortedByUser, TurnStopped
from auger.engine.turn_context import TurnContext
from auger.policy.types import Classification, Effect, Verdict
from auger.protocol import events as ev
from auger.protocol.items import AssistantMessage, ContextMessage, Reasoning, ToolCall, ToolOutput, TurnAborted, \
    UserMessage
from auger.protocol.vocab import PlanStatus

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
        self._open: dict[str, tuple[str, str, float]] = {}  # agent call id -> (our call id, tool name, start)
        self._permitted: set[str] = set()  # files the agent got permission to change in the running prompt
        self._writes = 0

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
                # The agent changes files with its own tools too, without telling us first: the turn's
                # snapshot (diff, undo) is taken before it gets the prompt.
                await self._before_change(PlannedCall(self.id, "", f"{self.link.name} prompt", {},
                                                      Classification(Effect.LOCAL_MUTATION, self.link.name)))
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
        return await self.link.pool.acquire(self.link.name, str(self.ctx.workspace.root), await self.link.load_id())

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
        self._permitted = set()
        async with contextlib.aclosing(backend.prompt(text)) as stream:  # closed at once on abort or error
            async for event in stream:
                await self._handle(event)
        await self._settle(NO_RESULT)

    async def _handle(self, event: BackendEvent) -> None:
        if isinstance(event, TextChunk):
            await self._flush_reasoning()
            self._text.append(event.text)
            self.host.emit(ev.MessageDelta(self.id, event.text))
        elif isinstance(event, ThoughtChunk):
            await self._flush_text()
            self._reasoning.append(event.text)
            self.host.emit(ev.ReasoningDelta(self.id, event.text))
        elif isinstance(event, ToolStarted):
            await self._call_started(event)
        elif isinstance(event, ToolFinished):
            await self._call_finished(event.call_id, event.ok, event.output)
        elif isinstance(event, PlanChanged):
            steps = [ev.PlanStep(text, PlanStatus(status)) for text, status in event.steps
                     if status in PlanStatus.__members__.values()]
            self.host.emit(ev.PlanUpdated(self.id, steps))
        elif isinstance(event, UsageReported):
            await self._usage(event)
        elif isinstance(event, PermissionAsked):
            await self._answer_permission(event)
        elif isinstance(event, (ReadRequested, WriteRequested)):
            await self._answer_file(event)

    async def _flush_reasoning(self) -> None:
        if self._reasoning:
            text, self._reasoning = "".join(self._reasoning), []
            await self.host.record(self.id, Reasoning(text))

    async def _flush(self) -> None:
        """Commit what the agent thought and said so far (before a tool call, at the end)."""
        await self._flush_reasoning()
        await self._flush_text()

    async def _flush_text(self) -> None:
        if self._text:
            text, self._text = "".join(self._text), []
            await self.host.record(self.id, AssistantMessage(text))
            self.host.emit(ev.AgentMessage(self.id, text))

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
        arguments = {"title": event.title, "input": event.arguments}
        await self.host.record(self.id, ToolCall(call_id, name, json.dumps(arguments, ensure_ascii=False)))
        self._open[event.call_id] = (call_id, name, time.monotonic())
        self.host.emit(ev.ToolCallStarted(self.id, call_id, name, arguments))

    async def _call_finished(self, agent_id: str, ok: bool, output: str) -> None:
        opened = self._open.pop(agent_id, None)
        if opened is None:
            return
        call_id, name, started = opened
        await self.host.record(self.id, ToolOutput(call_id, output, ok), tool_name=name)
        self.host.emit(ev.ToolCallEnded(self.id, call_id, name, ok, output, int((time.monotonic() - started) * 1000)))

    async def _usage(self, event: UsageReported) -> None:
        host = self.host
        usage = ev.Usage(event.input_tokens, event.cached_input_tokens, event.output_tokens, event.reasoning_tokens)
        if usage.total_tokens:
            await host.charge(self.id, f"{self.link.name} (backend)", usage, None)
        report = host.ledger.report(self.id, usage, event.context_used, event.context_window)
        host.emit(replace(report, turn_cost=None, session_cost=None))  # the agent's prices are unknown to auger

    # -- the agent's requests ---------------------------------------------------------
    async def _answer_permission(self, asked: PermissionAsked) -> None:
        from auger.backends.permissions import GUARDED_KINDS, classify, paths_of, pick, resolved, tool_name
        from auger.policy.decision import decide_call

        runtime, ctx = self.ctx.runtime, self.ctx
        c = classify(asked.kind, asked.title, asked.arguments, ctx.workspace.root)
        name = tool_name(asked.kind)
        sandboxed = runtime.policy.sandboxed and asked.kind in GUARDED_KINDS
        decision = decide_call(name, c, runtime.policy.rules, ctx.mode, sandboxed=sandboxed, grants=runtime.grants)
        allowed: bool
        if decision.verdict == Verdict.ALLOW:
            allowed = True
        elif decision.verdict == Verdict.DENY:
            allowed = False
        elif not runtime.policy.interactive:
            allowed = runtime.policy.approve_all
        else:
            diff = asked.arguments.get("diff")  # some agents (opencode) send the change they want to make
            allowed = await self._ask(asked.call_id, name, c, decision.reason, f"{self.link.name} wants to "
                                      f"{asked.kind}: {c.subject}", diff if isinstance(diff, str) else None)
        if allowed and c.effect != Effect.READ_ONLY:
            self._permitted.update(resolved(p, ctx.workspace.root) for p in paths_of(asked.arguments))
        _resolve(asked.answer, pick(asked.options, allowed))

    async def _ask(self, call_id: str, name: str, c: Classification, reason: str, message: str,
                   diff: str | None = None) -> bool:
        """An approval_request; True when approved (once or for the session). Abort ends the turn."""
        runtime = self.ctx.runtime
        details: dict[str, Any] = {"call_id": call_id, "tool": name, "effect": c.effect, "reason": reason,
                                   "subject": c.subject, "findings": list(c.reasons),
                                   "outside_paths": list(c.outside_paths), "diff": diff}
        answer = await self.host.ask(turn_id=self.id, kind="tool", message=f"{message} ({reason})",
                                     options=[APPROVE, APPROVE_SESSION, DENY_CALL, ABORT], headless_default=DENY_CALL,
                                     details=details)
        if answer.decision == ABORT:
            raise TurnAbortedByUser()
        if answer.decision == APPROVE_SESSION:
            runtime.grants.add(name, c)
        return answer.decision in (APPROVE, APPROVE_SESSION)

    async def _answer_file(self, request: ReadRequested | WriteRequested) -> None:
        from auger.backends.acp_client import RequestRefused

        try:
            if isinstance(request, ReadRequested):
                text = await asyncio.to_thread(agent_files.read_text, self._root_handle(), request.path,
                                               request.line, request.limit)
                _resolve(request.answer, text)
            else:
                await self._write(request)
                _resolve(request.answer, None)
        except agent_files.FileRefused as exc:
            if not request.answer.done():
                request.answer.set_exception(RequestRefused(str(exc)))

    async def _write(self, request: WriteRequested) -> None:
        from auger.policy.decision import decide_call
        from auger.tools.files import WRITE_FILE

        runtime, ctx = self.ctx.runtime, self.ctx
        handle = self._root_handle()
        rel, refusal = agent_files.write_refusal(handle, request.path)
        if refusal:
            raise agent_files.FileRefused(refusal)
        c = WRITE_FILE.classify({"path": rel}, ctx.workspace.root)
        decision = decide_call(WRITE_FILE.name, c, runtime.policy.rules, ctx.mode, sandboxed=runtime.policy.sandboxed,
                               grants=runtime.grants)
        if decision.verdict == Verdict.DENY:
            raise agent_files.FileRefused(f"not written: {decision.reason}")
        from auger.backends.permissions import resolved

        permitted = resolved(str(ctx.workspace.root / rel), ctx.workspace.root) in self._permitted
        if decision.verdict == Verdict.ASK and not permitted:
            if not runtime.policy.interactive:
                if not runtime.policy.approve_all:
                    raise agent_files.FileRefused(f"not written: {decision.reason}, and nobody can approve it "
                                                  "in a headless run")
            elif not await self._ask(f"{self.id}-write-{self._writes}", WRITE_FILE.name, c, decision.reason,
                                     f"{self.link.name} wants to write {rel}"):
                raise agent_files.FileRefused(f"the user did not allow writing {rel}")
        # The hook point for held changes: a session that queues writes for review takes `rel` and the
        # content here instead of writing them.
        self._writes += 1
        planned = PlannedCall(self.id, f"{self.id}-write-{self._writes}", WRITE_FILE.name,
                              {"path": rel, "content": request.content}, c)
        await self._before_change(planned)
        created = await asyncio.to_thread(agent_files.write_text, handle, rel, request.content)
        if created:
            runtime.state.created_files.add(ctx.workspace.root / rel)
        for hook in runtime.after_mutation:
            await hook(planned)

    async def _before_change(self, planned: PlannedCall) -> None:
        """The session's before-mutation hooks (the snapshot a turn diff and undo start from)."""
        for hook in self.ctx.runtime.before_mutation:
            await hook(planned)

    def _root_handle(self) -> Any:
        from auger.policy.fs import RootHandle

        state, root = self.ctx.runtime.state, self.ctx.workspace.root
        if state.root_handle is None or state.root_handle.path != root:
            state.root_handle = RootHandle(root)
        return state.root_handle


def _resolve(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():  # the prompt may have ended (and refused it) meanwhile
        future.set_result(value)
