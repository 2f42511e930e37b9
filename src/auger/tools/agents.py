"""The sub-agent tools: spawn_agent, wait_agent, send_input, cancel_agent, list_agents, apply_agent_changes.

Only the specs live here; what they do is the engine's (engine/agents/subagents.py), reached through the
`AgentControl` each caller (the session, or a sub-agent that may itself delegate) is given. The
toolset is built per caller because the handlers must know whose children they start and see.

All but `apply_agent_changes` are read-only and parallel-safe as calls: a spawn or a follow-up itself
changes nothing, and each of the child's own calls passes the tool runtime (policy, approvals, hooks)
like any other. Being
parallel-safe is what lets several foreground spawns in one reply run at the same time.
`apply_agent_changes` writes a worktree child's changes into the caller's tree: a local change, so
policy asks for it where it asks for writes, and the turn's snapshot covers it for undo.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Protocol

from auger.tools.base import LOCAL_MUTATION, READ_ONLY, ToolContext, ToolResult, ToolSpec
from auger.tools.toolset import StaticToolset

SOURCE = "agent tools"  # its name in a session's tool registry: no MCP server can be named so
SPAWN, WAIT, SEND, CANCEL, LIST, APPLY = ("spawn_agent", "wait_agent", "send_input", "cancel_agent", "list_agents",
                                         "apply_agent_changes")
NAMES = frozenset({SPAWN, WAIT, SEND, CANCEL, LIST, APPLY})
FOLLOW_UPS = NAMES - {SPAWN}  # the tools about sub-agents that exist
FOLLOW_UP_VERBS = {WAIT: "wait for", SEND: "send input to", CANCEL: "cancel", LIST: "list",
                   APPLY: "apply the changes of"}
WAIT_DEFAULT_S, WAIT_MAX_S = 30, 300


class AgentControl(Protocol):
    """One caller's handle on its sub-agents (engine/agents/subagents.py implements it)."""

    async def spawn(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult: ...

    async def wait(self, ids: list[str] | None, timeout: float) -> ToolResult: ...

    async def send_input(self, agent_id: str, message: str, ctx: ToolContext) -> ToolResult: ...

    async def cancel(self, agent_id: str) -> ToolResult: ...

    def list(self) -> ToolResult: ...

    async def apply(self, agent_id: str, root: Path) -> ToolResult: ...


class OnDemand(StaticToolset):
    """The agent tools with the follow-ups (FOLLOW_UPS) offered only once `started()` says the caller has a
    sub-agent: every schema rides on every request, and most sessions never delegate. The router asks
    `refresh` before each model request, so they join the catalog at the request after the first spawn."""

    def __init__(self, specs: StaticToolset, started: Callable[[], bool]) -> None:
        super().__init__(specs.list_tools())
        self._started = started
        self._offered = False

    def list_tools(self) -> list[ToolSpec]:
        return [spec for spec in super().list_tools() if self._offered or spec.name not in FOLLOW_UPS]

    async def refresh(self) -> bool:
        """Whether the list changed (the registry's protocol for toolsets whose tools change)."""
        offered, self._offered = self._offered, self._offered or self._started()
        return offered != self._offered

    def not_offered(self, name: str) -> str | None:
        """What a model that calls a follow-up before it is offered reads, as the call's error output."""
        if name not in FOLLOW_UPS or self._offered:
            return None
        if self._started():  # the first sub-agent started after this request's catalog was sent
            return f"{name} is offered from your next step on, now that a sub-agent has started; call it again then"
        return (f"{name}: no sub-agent has been started in this session yet, so there is none to "
                f"{FOLLOW_UP_VERBS[name]}. Start one with {SPAWN} (background=true returns its id at once, "
                f"and {name} then works on it).")


def agent_toolset(control: Callable[[], AgentControl], available: str) -> StaticToolset:
    """The agent tools bound to the caller's control, got at each call (a session makes its agent pool at
    the first one); `available` lists the agent definitions (one per line)."""

    async def spawn(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return await control().spawn(args, ctx)

    async def wait(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        timeout = min(max(float(args.get("timeout", WAIT_DEFAULT_S)), 0.0), WAIT_MAX_S)
        return await control().wait(args.get("ids"), timeout)

    async def send(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return await control().send_input(args["agent_id"], args["message"], ctx)

    async def cancel(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return await control().cancel(args["id"])

    async def list_(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return control().list()

    async def apply(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return await control().apply(args["id"], ctx.root)

    return StaticToolset([
        ToolSpec(SPAWN, "Run a sub-agent on a self-contained task and return its final answer (background=true: "
                        "its id now, its result later). Calls in one reply run in parallel. The prompt must say "
                        "everything: the agent does not see this conversation. Agents:\n" + available,
                 {"type": "object", "properties": {
                     "prompt": {"type": "string", "description": "the whole task"},
                     "agent": {"type": "string", "description": "default: task"},
                     "background": {"type": "boolean"},
                     "isolation": {"type": "string", "enum": ["none", "worktree"],
                                   "description": "worktree: work in a git worktree of its own"}},
                  "required": ["prompt"]},
                 spawn, READ_ONLY, parallel_safe=True),
        ToolSpec(WAIT, f"Wait up to `timeout` s (default {WAIT_DEFAULT_S}, max {WAIT_MAX_S}) for your background "
                       "sub-agents (default: all running); returns the results of those that finished.",
                 {"type": "object", "properties": {
                     "ids": {"type": "array", "items": {"type": "string"}},
                     "timeout": {"type": "integer", "minimum": 0}}},
                 wait, READ_ONLY, parallel_safe=True),
        ToolSpec(SEND, "Message a sub-agent: a running one reads it before its next step; a finished one resumes "
                       "with its history, in the background.",
                 {"type": "object", "properties": {"agent_id": {"type": "string"}, "message": {"type": "string"}},
                  "required": ["agent_id", "message"]},
                 send, READ_ONLY, parallel_safe=True),
        ToolSpec(CANCEL, "Cancel one of your sub-agents (its commands are killed).",
                 {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
                 cancel, READ_ONLY, parallel_safe=True),
        ToolSpec(LIST, "List the sub-agents you started, with their status.",
                 {"type": "object", "properties": {}}, list_, READ_ONLY, parallel_safe=True),
        ToolSpec(APPLY, "Apply a finished worktree sub-agent's changes to your tree; a file you changed since is a "
                        "conflict, left as it is.",
                 {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
                 apply, LOCAL_MUTATION),
    ])
