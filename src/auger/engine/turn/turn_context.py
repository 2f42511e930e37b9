"""TurnContext: everything a turn needs to know, frozen when the turn starts.

The session builds one per turn (model, skills and reasoning settings can change between turns,
never during one). The trust mode is the exception: `mode` is read from the runtime at each use, because a
switch takes effect at once, also in a running turn (engine/session/shared.py); so are the context `limits`, because
the window a local server reports is learned in the background and applies from the moment it is known
(models/context_window.py). A sub-agent or a review
runs with a variant made by `derive(...)`: another model, a filtered tool catalog (and the
runtime that caps its mode), a lower call cap. What a turn may *do* is not here but in its
TurnHost (engine/turn/host.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from auger.context.skills import SkillIndex
from auger.engine.turn.accounting import Budgets, ContextLimits
from auger.engine.turn.tool_runtime import ToolRuntime
from auger.engine.workspace import Workspace
from auger.models.base import ModelClient, ToolSchema
from auger.models.registry import ModelInfo
from auger.models.retry import RetryPolicy


@dataclass(frozen=True)
class TurnContext:
    turn_id: str
    workspace: Workspace  # root, prompts, configuration
    skills: SkillIndex  # the session's current skills
    client: ModelClient  # the session's model, or its fallback chain (a ModelClient too)
    model_info: ModelInfo  # the session's model's
    instructions: str  # the base system prompt; tool sources add their contributions (system_prompt)
    runtime: ToolRuntime  # and its router: the session's tool catalog
    limits_now: Callable[[], ContextLimits]  # the session's window as known now: see `limits`
    budgets: Budgets
    retry: RetryPolicy
    max_model_calls: int
    interactive: bool
    effort: str | None = None  # the session's reasoning settings (set_turn_context); None: as configured
    summary: str | None = None
    # The small jobs' model (compaction summaries; engine/session/models.py); None: they run on `client`.
    small_client: ModelClient | None = None
    # What the turn's model calls are charged as (token_usage.purpose, the stored usage row): a review
    # session's turns are `review`, so `auger sessions --cost` tells a review's share from the work's.
    purpose: str = "turn"

    @property
    def mode(self) -> str:
        """The trust mode now: the session's current one, capped by a sub-agent's own."""
        return self.runtime.mode()

    @property
    def limits(self) -> ContextLimits:
        """The context limits now: the model's window may be learned while the turn runs."""
        return self.limits_now()

    @property
    def tools(self) -> tuple[ToolSchema, ...]:
        """The catalog the model sees now; re-rendered only when a tool source changed (tools/router.py),
        so the prompt prefix stays byte-identical while nothing does."""
        return self.runtime.router.catalog(self.instructions).schemas

    @property
    def system_prompt(self) -> str:
        """The base instructions with what the catalog's tool sources contribute (an MCP server's
        instructions, while its tools are offered)."""
        return self.runtime.router.catalog(self.instructions).system_prompt

    @property
    def model(self) -> str:
        """The model answering now (after a fallback switch, the fallback: engine/turn/fallback.py)."""
        return self.client.model

    def info_for(self, provider: str, model: str) -> ModelInfo:
        """The description of the model that answered a call (its prices, for the call's cost): the turn's
        own, or another that took a call — a fallback (engine/turn/fallback.py), the small model."""
        if model == self.model_info.name or not model:
            return self.model_info
        from auger.models.registry import model_info

        return model_info(model, self.workspace.config, provider)

    def derive(self, **changes: Any) -> TurnContext:
        """A variant of this context (a sub-agent's, a review's): the same turn's facts with some replaced."""
        return dataclasses.replace(self, **changes)
