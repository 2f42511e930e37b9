"""What a sub-agent runs on (engine/agents/subagents.py starts them): its record (`AgentRun`: also its inbox of
unread messages and its conversation, kept so a follow-up can resume it), the host its turn acts through
(`ChildHost`: its own stored session and history; the parent session's stream, approvals and ledger),
the ledger that rolls its usage up into the parent's, and the view of the parent's tool catalog it may
use (`CatalogView`). Nothing here starts, waits for or cancels a child.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Protocol

from auger.context.agents import AgentDef
from auger.context.skills import SkillIndex
from auger.engine.turn.accounting import Budgets, ContextMeter, UsageLedger
from auger.engine.turn.history import History
from auger.engine.turn.tool_runtime import ToolRuntime
from auger.engine.turn.turn_context import TurnContext
from auger.engine.workspace import Workspace
from auger.protocol import events as ev
from auger.protocol.items import ContextMessage, Item
from auger.protocol.ops import ApprovalDecision, UserTurn
from auger.store.base import Store
from auger.tools.agents import NAMES as AGENT_TOOLS
from auger.tools.base import OutputArchive, ToolContext, ToolError, ToolResult, ToolSpec
from auger.tools.router import ToolRouter

RUNNING = ("queued", "running")
Record = Callable[[str, Item], Awaitable[None]]


class Deliveries(Protocol):
    """A child's own children's finished background results, delivered before its next model call."""

    def has_results(self) -> bool: ...

    async def deliver(self, turn_id: str, record: Record) -> None: ...


class ParentSession(Protocol):
    """What the pool needs of the session owning it (engine/session/session.py's Session)."""

    store: Store
    runtime: ToolRuntime
    ledger: UsageLedger
    workspace: Workspace

    @property
    def id(self) -> str: ...

    @property
    def mode(self) -> str: ...

    def turn_context(self, turn_id: str) -> TurnContext: ...

    def emit_for(self, event: ev.Event, parent_call_id: str | None) -> None: ...

    def kept(self, turn_id: str, item: Item, full_output: str | None, arguments: str
             ) -> tuple[Item, str | None, str, ev.SecretRedacted | None]: ...

    async def keep_markers(self, turn_id: str) -> None: ...

    async def ask(self, *, turn_id: str, kind: str, message: str, options: list[str], headless_default: str,
                  details: dict[str, Any] | None = None, parent_call_id: str | None = None) -> ApprovalDecision: ...



@dataclass(eq=False)
class AgentRun:
    id: str
    child_id: str  # the child's stored session
    agent: AgentDef
    prompt: str
    parent_call_id: str
    background: bool
    depth: int
    cap: str | None  # the mode its definition and its ancestors' asked for; its mode is the session's, capped by it
    status: str = "queued"
    answer: str = ""
    task: asyncio.Task[None] | None = None
    delivered: bool = False
    started: float = field(default_factory=time.monotonic)
    cancel_reason: str = ""  # set when it is cancelled: what its turn records as the reason
    tree: Any = None  # the worktree it works in (isolation "worktree"): kept until applied or the session ends
    isolated: bool = False  # it works in a worktree (and may only ever resume there)
    inbox: list[UserTurn] = field(default_factory=list)  # what it has not read yet: its prompt, then follow-ups
    history: History | None = None  # its conversation, kept after it ends: a follow-up resumes it
    accepting: bool = True  # its turn still takes messages before its next model call; else a follow-up resumes it
    followed_up: bool = False  # it was sent a follow-up: its answer is no longer the prompt's alone (no cache)

    @property
    def done(self) -> bool:
        return self.status not in RUNNING

    def report(self) -> str:
        head = f"Agent {self.agent.name} ({self.id})"
        if self.status == "completed":
            return f"{head} finished:\n{self.answer}"
        return f"{head} {self.status}." + (f"\n{self.answer}" if self.answer else "")


class RollupLedger(UsageLedger):
    """A child's ledger: its own totals for its token_usage events, every charge also added to the parent's
    (so the parent's turn and session totals include it), and the parent's budgets decide."""

    def __init__(self, parent: UsageLedger) -> None:
        super().__init__()
        self.parent = parent

    def add(self, usage: ev.Usage, cost: float | None, *, turn: bool = True) -> None:
        super().add(usage, cost, turn=turn)
        self.parent.add(usage, cost, turn=turn)

    def exhausted(self, budgets: Budgets) -> str | None:
        return self.parent.exhausted(budgets)



class ChildHost:
    """A sub-agent's TurnHost: its own stored session and history; the parent session's stream, approvals
    and ledger."""

    def __init__(self, session: ParentSession, run: AgentRun, control: Deliveries, ledger: RollupLedger,
                 archive: OutputArchive, ctx: TurnContext) -> None:
        self.session = session
        self.run = run
        self.control = control
        self.ledger = ledger
        self.archive = archive
        self.ctx = ctx
        if run.history is None:  # a first run; a resumed one goes on with its conversation
            run.history = History()
        self.history = run.history
        self.meter = ContextMeter(self.history)
        self._context_told = len(self.history) > 0

    async def record(self, turn_id: str, item: Item, *, full_output: str | None = None, tool_name: str = "",
                     arguments: str = "") -> None:
        """Kept as the parent session keeps its own: secret values redacted, the markers' numbers (the
        session's) recorded in the session first."""
        item, full_output, arguments, report = self.session.kept(turn_id, item, full_output, arguments)
        await self.session.keep_markers(turn_id)
        await self.session.store.append(self.run.child_id, turn_id, item, full_output=full_output,
                                        tool_name=tool_name, arguments=arguments)
        self.history.append(item)
        if report is not None:
            self.emit(report)

    def emit(self, event: ev.Event) -> None:
        self.session.emit_for(event, self.run.parent_call_id)

    def emit_for(self, event: ev.Event, parent_call_id: str | None) -> None:
        """A call made on behalf of one of the child's (run_code's): its envelope names that call."""
        self.session.emit_for(event, parent_call_id or self.run.parent_call_id)

    async def ask(self, *, turn_id: str, kind: str, message: str, options: list[str], headless_default: str,
                  details: dict[str, Any] | None = None) -> ApprovalDecision:
        """Asked through the parent session, labelled with the agent (and in an envelope naming its spawn call)."""
        return await self.session.ask(turn_id=turn_id, kind=kind, options=options, headless_default=headless_default,
                                      message=f"[agent {self.run.agent.name} {self.run.id}] {message}",
                                      details=details, parent_call_id=self.run.parent_call_id)

    def take_input(self) -> UserTurn | None:
        """Its prompt, then each follow-up its parent sent (`send_input`), before its next model call."""
        return self.run.inbox.pop(0) if self.run.inbox else None

    def has_input(self) -> bool:
        return bool(self.run.inbox) or self.control.has_results()

    def take_compact_request(self) -> bool:
        return False

    async def charge(self, turn_id: str, model: str, usage: ev.Usage, cost: float | None,
                     purpose: str = "turn") -> None:
        """Into the child's ledger and its parent's; stored under the top session, whose totals include it."""
        self.ledger.add(usage, cost)
        await self.session.store.record_usage(self.session.id, turn_id, model, usage, purpose)

    async def refresh_context(self, turn_id: str) -> SkillIndex:
        """First: the project's instructions, the agent's own and the environment; later only results of the
        child's own background agents."""
        if not self._context_told:
            self._context_told = True
            await self._tell_context(turn_id)
        await self.control.deliver(turn_id, self.record)
        return self.ctx.skills

    async def _tell_context(self, turn_id: str) -> None:
        from auger.context.instructions import EnvironmentContext
        from auger.engine.session.context import environment_item, instructions_item, read_instructions

        workspace = self.ctx.workspace
        config = workspace.config
        text = read_instructions(workspace.root, workspace.config_dir, self.ctx.skills, config, warnings=[])
        instructions = instructions_item(text, ())
        agent = self.run.agent
        items = [instructions,
                 ContextMessage(f"<agent name={agent.name!r}>\n{agent.instructions}\nYour final message is your "
                                "answer to the agent that started you.\n</agent>", "agent") if agent.instructions
                 else None,
                 environment_item(EnvironmentContext.capture(self.ctx.runtime.cwd or workspace.root, self.ctx.mode,
                                                             self.ctx.model), None)]
        for item in items:
            if item is not None:
                await self.record(turn_id, item)

    async def set_title(self, text: str) -> None:
        """The child's title was set when it was created."""


class CatalogView:
    """The parent's catalog as a toolset for a child: its tools (not its agent tools: the child has its
    own) that the definition allows; calls go through the parent's router with the child's context.
    Nothing to open or close: the parent owns those tools."""

    def __init__(self, router: ToolRouter, allowed: Callable[[str], bool]) -> None:
        self._router = router
        self._names = [n for n in router.names if n not in AGENT_TOOLS and allowed(n)]

    async def open(self) -> None:
        pass

    async def close(self) -> None:
        pass

    def list_tools(self) -> list[ToolSpec]:
        return [spec for spec in map(self._router.get, self._names) if spec is not None]

    async def call(self, name: str, args: dict, ctx: ToolContext) -> ToolResult:
        spec = self._router.get(name) if name in self._names else None
        if spec is None:
            raise ToolError(f"there is no tool named {name!r}")
        return await self._router.call(spec, args, ctx)
