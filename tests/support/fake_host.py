"""An in-process TurnHost for unit tests of turns, compaction and the tool runtime: no session, no
store, no sockets. It keeps what a turn recorded and emitted, answers approvals from a script, and
builds a TurnContext around any model client (usually models/replay.py's ReplayClient)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from auger.context.skills import SkillIndex
from auger.engine.turn.accounting import Budgets, ContextLimits, ContextMeter, UsageLedger
from auger.engine.turn.history import History
from auger.engine.session.shared import SessionMode, SessionShared
from auger.engine.turn.tool_runtime import Policy, ToolRuntime
from auger.engine.turn.turn_context import TurnContext
from auger.engine.workspace import Workspace
from auger.models.base import ModelClient
from auger.models.registry import model_info
from auger.models.retry import RetryPolicy
from auger.policy.rules import RuleSet
from auger.protocol.events import ApprovalRequest, Event, Usage
from auger.protocol.items import Item
from auger.protocol.ops import ApprovalDecision, UserTurn
from auger.tools.base import SessionToolState
from auger.tools.base import ToolSpec
from auger.tools.router import ToolRouter
from auger.tools.toolset import StaticToolset


class FakeArchive:
    async def get_output(self, call_id: str):
        return None

    async def list_outputs(self):
        return []

    async def search_messages(self, query: str) -> list[tuple[str, str]]:
        return []


@dataclass
class FakeHost:
    """Records in memory. `answer(request)` decides approvals; by default every question is denied."""

    history: History = field(default_factory=History)
    events: list[Event] = field(default_factory=list)
    asked: list[ApprovalRequest] = field(default_factory=list)
    answer: Callable[[ApprovalRequest], str] = lambda request: "deny"
    inputs: list[UserTurn] = field(default_factory=list)
    compact_requested: bool = False
    ledger: UsageLedger = field(default_factory=UsageLedger)
    archive: FakeArchive = field(default_factory=FakeArchive)
    skills: SkillIndex = field(default_factory=SkillIndex)
    title: str = ""
    charged: list[tuple[str, Usage]] = field(default_factory=list)
    children: list[tuple[str | None, Event]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.meter = ContextMeter(self.history)

    async def record(self, turn_id: str, item: Item, *, full_output: str | None = None, tool_name: str = "",
                     arguments: str = "") -> None:
        self.history.append(item)

    def emit(self, event: Event) -> None:
        self.events.append(event)

    def emit_for(self, event: Event, parent_call_id: str | None) -> None:
        """A call made on another's behalf (run_code's): kept with the calling call's id in `children`."""
        self.events.append(event)
        self.children.append((parent_call_id, event))

    async def ask(self, *, turn_id: str, kind: str, message: str, options: list[str], headless_default: str,
                  details: dict | None = None) -> ApprovalDecision:
        request = ApprovalRequest(turn_id, f"r{len(self.asked)}", kind, message, options, details or {})
        self.asked.append(request)
        return ApprovalDecision(request.request_id, self.answer(request))

    def take_input(self) -> UserTurn | None:
        return self.inputs.pop(0) if self.inputs else None

    def has_input(self) -> bool:
        return bool(self.inputs)

    def take_compact_request(self) -> bool:
        requested, self.compact_requested = self.compact_requested, False
        return requested

    async def charge(self, turn_id: str, model: str, usage: Usage, cost: float | None, purpose: str = "turn") -> None:
        self.ledger.add(usage, cost)
        self.charged.append((model, usage))

    async def refresh_context(self, turn_id: str) -> SkillIndex:
        return self.skills

    async def set_title(self, text: str) -> None:
        self.title = self.title or text

    def of(self, kind: type) -> list:
        return [e for e in self.events if isinstance(e, kind)]


def fake_runtime(root: Path, specs: list[ToolSpec], *, rules: RuleSet | None = None, sandboxed: bool = False,
                 interactive: bool = True, approve_all: bool = False, mode: str = "auto") -> ToolRuntime:
    """A runtime over in-process tools (a static toolset has nothing to open, so no event loop is needed),
    in a session whose mode is `mode` (`runtime.shared.mode.change` switches it)."""
    policy = Policy(rules or RuleSet(), sandboxed=sandboxed, approve_all=approve_all, interactive=interactive,
                    user_rules_path=root.parent / "rules.toml")
    return ToolRuntime(ToolRouter(StaticToolset(specs)), policy, shared=SessionShared(SessionMode(mode)), root=root,
                       state=SessionToolState(scratch_dir=root.parent / "scratch"), archive=FakeArchive(), env=None,
                       sandbox=None)


def fake_context(workspace: Workspace, client: ModelClient, runtime: ToolRuntime, *, turn_id: str = "t1",
                 window: int = 100_000, compact_at: int | None = None,
                 max_model_calls: int = 50, budgets: Budgets = Budgets()) -> TurnContext:
    """The turn's context; its mode is the runtime's (fake_runtime(mode=...))."""
    return TurnContext(
        turn_id=turn_id, workspace=workspace, skills=workspace.skills, client=client,
        model_info=model_info(client.model, workspace.config, client.provider), instructions="You are a test.",
        runtime=runtime, limits_now=lambda: ContextLimits.of(window, compact_at),
        budgets=budgets, retry=RetryPolicy(2, 0.0, 0.0), max_model_calls=max_model_calls, interactive=True)
