"""Sub-agents: turns with a derived context and a host of their own, started by the model.

A session owns one `AgentPool`. Each caller that may delegate — the session itself, and every
sub-agent below the depth limit — gets a `Control` (the `AgentControl` the agent tools call): it
starts, waits for, cancels and lists *its own* children. A child is

    a stored session of its own (items, title) linked to its parent (`session_links`),
    a `Turn` over `parent_ctx.derive(...)`: its mode the session's *now* capped by its definition's (and
        its ancestors'), so never weaker than its parent's, also after a switch mid-run; its tools the
        intersection of its definition's allow-list and the parent's catalog (agent tools included), its
        call cap its own,
    a `ChildHost`: records into the child's session; emits into the parent session's stream with
        `parent_call_id` = the spawn call; asks through the parent session (labelled with the agent);
        charges usage to the parent's ledger too, so budgets and totals include it,
    a `ToolRuntime` sharing the session's hooks and mode (engine/session/shared.py) and the parent's policy,
        sandbox and environment; its mutation hooks are the parent's (so snapshots and undo see a
        child's writes as the spawning turn's), which also move the pool's generation. A child in a
        worktree has a sandbox of its own, and that sandbox's guarantees decide whether auto asks.

Children run in tasks of their own (never in the spawn call's task: a cancelled Turn swallows its
cancellation, which must not swallow the parent's). A foreground spawn waits for its child and
cancels it if the parent call is cancelled; a background spawn returns the id at once and the result
is delivered before the caller's next model call (`has_results` / `deliver`, wired into the host's
`has_input` / `refresh_context`), or by `wait_agent`. Background children belong to the session, not
the turn: they outlive it (an interrupt stops the turn, not them), and end when they finish, when
`cancel` (the `cancel_agents` op) stops them, or when the session shuts down. A run that was going
when the process died is found on resume (its link still says running) and reported to the model as
interrupted.

`send_input` talks to a child after it started. A running child reads the message before its next
model call, as a user's input reaches a running turn (one arriving as its turn ends starts another turn
at once). A finished one (completed, failed or cancelled) resumes with its conversation, in the
background, under the same caps, mode, tools and hooks as a spawn: the resume counts against
`agents_max_per_turn`, waits for a slot, and its answer is delivered like a background child's.

Results are cached by (agent, prompt, parent mode) with the pool's generation at the child's start:
any mutating call anywhere in the session moves the generation, so an entry is reused only while
nothing changed since that child started. Fan-out is bounded: children run at most
`agents_max_concurrent` at once per depth (more wait their turn; per depth, so a parent holding a
slot never waits for a slot its own child needs), a turn starts at most `agents_max_per_turn`, and
nesting stops at `agents_max_depth`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from auger.config import Config
from auger.context.agents import MAIN, SMALL, AgentDef, AgentIndex, discover_agents
from auger.engine.turn.accounting import UsageLedger
from auger.engine.session.shared import effective_mode, narrower
from auger.engine.agents.subagent_host import (
    RUNNING, AgentRun, CatalogView, ChildHost, ParentSession, Record, RollupLedger,
)
from auger.engine.turn.tool_runtime import MutationHook, PlannedCall, ResultHook, ToolRuntime
from auger.engine.turn.turn import Turn
from auger.engine.turn.turn_context import TurnContext
from auger.ids import new_hex, new_uuid
from auger.models.base import ModelClient
from auger.protocol import events as ev
from auger.protocol.items import AssistantMessage, ContextMessage, UserMessage
from auger.protocol.ops import UserTurn
from auger.protocol.vocab import TurnEndReason
from auger.secrets.protected import ProtectedFiles
from auger.store.base import LinkRecord, SessionRecord, StoreError
from auger.tools.agents import FOLLOW_UPS, SPAWN, agent_toolset
from auger.tools.base import OutputArchive, SessionToolState, ToolContext, ToolError, ToolResult, Transcript
from auger.tools.router import ToolRouter
from auger.tools.shell import end_processes
from auger.tools.toolset import Combined, Filtered, StaticToolset

if TYPE_CHECKING:
    from auger.policy.confinement import Confinement

log = logging.getLogger("auger.subagents")

RESULT_KIND = "agent_result"  # the ContextMessage kind of a delivered background result
PROMPT_SHOWN = 80


class AgentPool:
    """A session's sub-agents: definitions, every run at any depth, the result cache and the caps."""

    def __init__(self, session: ParentSession, archive: Callable[[str], OutputArchive],
                 index: AgentIndex | None = None) -> None:
        workspace = session.workspace
        config = workspace.config
        self.session = session
        self.archive = archive  # a stored session's outputs, for a child's `recall`
        # the definitions: the ones the session's tool description lists, else read now
        self.index = index or discover_agents(workspace.root, workspace.config_dir, base_mode=config.mode)
        self.max_depth = config.agents_max_depth
        self.max_concurrent = config.agents_max_concurrent
        self.max_per_turn = config.agents_max_per_turn
        self.generation = 0  # moves with every mutating call in the session or any child
        self.cache: dict[tuple[str, str, str], tuple[int, str]] = {}
        self.runs: dict[str, AgentRun] = {}
        self._slots: dict[int, asyncio.Semaphore] = {}
        self.root = Control(self, session.id, 0, session.turn_context, session.runtime, session.ledger)

    async def bump(self, call: PlannedCall) -> None:
        """An after_mutation hook: something may have changed, so earlier results are stale."""
        self.generation += 1

    def slot(self, depth: int) -> asyncio.Semaphore:
        return self._slots.setdefault(depth, asyncio.Semaphore(self.max_concurrent))

    async def cancel_all(self, reason: str) -> None:
        """Cancel every run still going, at any depth (shutdown)."""
        await _cancel(self.runs.values(), reason)

    async def cancel(self, ids: list[str], reason: str) -> str | None:
        """Cancel the runs named (all still going when none is), with what runs under them; a problem to
        report when an id names no run."""
        unknown = [i for i in ids if i not in self.runs]
        await _cancel([self.runs[i] for i in ids if i in self.runs] if ids else self.runs.values(), reason)
        if unknown:
            return (f"cancel_agents: no sub-agent {', '.join(repr(i[:40]) for i in unknown)} in this session "
                    f"(its sub-agents: {', '.join(self.runs) or 'none'})")
        return None

    async def report_interrupted(self, record: Record) -> None:
        """On resume: children whose links still say running died with the process; say so, durably."""
        store = self.session.store
        pending = [self.session.id]
        while pending:
            parent = pending.pop()
            for link in await store.list_links(parent):
                pending.append(link.child_id)
                if link.status not in RUNNING:
                    continue
                await store.set_link_status(link.child_id, "interrupted")
                if parent == self.session.id:
                    await record("resume", ContextMessage(
                        f"<agent_result id={link.child_id[:8]!r} agent={link.agent!r}>The sub-agent was "
                        "interrupted: the session stopped while it ran. Its partial work may be in the files; "
                        "start it again if its result is still needed.</agent_result>", RESULT_KIND))


class Control:
    """One caller's sub-agents: the session's (depth 0) or a sub-agent's own."""

    def __init__(self, pool: AgentPool, owner: str, depth: int, context: Callable[[str], TurnContext],
                 runtime: ToolRuntime, ledger: UsageLedger) -> None:
        self.pool = pool
        self.owner = owner
        self.depth = depth
        self.context = context  # the caller's TurnContext for a turn id
        self.runtime = runtime
        self.ledger = ledger  # the caller's: its children charge into it
        self.children: dict[str, AgentRun] = {}
        self._turn = ("", 0)  # (the caller's turn id, children it started)

    # -- the tools ------------------------------------------------------------------
    async def spawn(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        pool = self.pool
        prompt = args["prompt"]
        name = args.get("agent") or "task"
        agent = pool.index.get(name)
        if agent is None:
            raise ToolError(f"no agent named {name!r}; available: {', '.join(pool.index.agents)}")
        if args.get("model") in (SMALL, MAIN):  # the caller's choice over the definition's
            agent = dataclasses.replace(agent, model=args["model"], provider=None)
        if self.depth + 1 > pool.max_depth:
            raise ToolError(f"sub-agents may nest at most {pool.max_depth} deep (agents_max_depth); "
                            "do this task yourself")
        isolated = (args.get("isolation") or "none") == "worktree"
        parent_ctx = self.context(ctx.turn_id)
        key = (f"{agent.name}/{agent.model or MAIN}", prompt, self.runtime.mode())
        cached = pool.cache.get(key)
        if cached is not None and cached[0] == pool.generation and not isolated:
            return ToolResult(f"(cached result of an identical earlier run of agent {agent.name}; nothing has "
                              f"changed since it started)\n{cached[1]}", metadata={"cached": True})
        self._count_start(ctx.turn_id)
        tree = await _worktree(ctx.root, ctx.state.protected) if isolated else None
        run = await self._create(agent, prompt, ctx, parent_ctx, bool(args.get("background")))
        run.tree, run.isolated = tree, isolated
        root = Path(tree.path) if tree is not None else ctx.root
        run.task = asyncio.create_task(self._run(run, parent_ctx, ctx.turn_id, root, key, tree),
                                       name=f"agent-{run.id}")
        if run.background:
            return ToolResult(f"Started agent {agent.name} in the background with id {run.id}. Its result will "
                              "be given to you when it finishes; wait_agent waits for it.",
                              metadata={"agent_id": run.id})
        try:
            await asyncio.shield(run.task)
        except asyncio.CancelledError:
            await _cancel([run], "the turn that started it was interrupted")
            raise
        run.delivered = True
        return ToolResult(run.report(), ok=run.status == "completed", metadata={"agent_id": run.id})

    async def wait(self, ids: list[str] | None, timeout: float) -> ToolResult:
        runs = [self._own(i) for i in ids] if ids else [r for r in self.children.values()
                                                         if not r.done or not r.delivered]
        if not runs:
            return ToolResult("No sub-agents to wait for.")
        tasks = [r.task for r in runs if r.task is not None and not r.done]
        if tasks and timeout > 0:
            await asyncio.wait(tasks, timeout=timeout)
        lines = []
        for run in runs:
            if run.done:
                run.delivered = True
                lines.append(run.report())
            else:
                lines.append(f"Agent {run.agent.name} ({run.id}) is still {run.status}.")
        return ToolResult("\n\n".join(lines))

    async def send_input(self, agent_id: str, message: str, ctx: ToolContext) -> ToolResult:
        """A follow-up for one of the caller's children: read before its next model call while it runs;
        otherwise it resumes with its conversation, in the background."""
        run = self._own(agent_id)
        if not message.strip():
            raise ToolError("send_input: 'message' is empty")
        head = f"agent {run.agent.name} ({run.id})"
        if run.accepting:
            run.inbox.append(UserTurn(message))
            run.followed_up = True
            return ToolResult(f"Sent to {head}: it reads it before its next step. Its answer reaches you as "
                              "before" + (" (wait_agent waits for it)." if run.background else "."))
        if run.isolated and run.tree is None:
            raise ToolError(f"{head} worked in a worktree that is gone (its changes were applied); start a new "
                            "agent")
        self._count_start(ctx.turn_id)
        ended = run.status
        # From here on, further follow-ups join this one; nothing awaits before the new task owns the run.
        run.inbox.append(UserTurn(message))
        run.status, run.accepting, run.followed_up, run.background = "queued", True, True, True
        root = Path(run.tree.path) if run.tree is not None else ctx.root
        run.task = asyncio.create_task(self._resume(run, run.task, self.context(ctx.turn_id), ctx.turn_id, root),
                                       name=f"agent-{run.id}")
        return ToolResult(f"{head[0].upper()}{head[1:]} had {ended}; it resumes with your message and its "
                          "conversation, in the background. Its answer reaches you when it finishes; wait_agent "
                          "waits for it.", metadata={"agent_id": run.id, "resumed": True})

    async def _resume(self, run: AgentRun, previous: asyncio.Task[None] | None, parent_ctx: TurnContext,
                      parent_turn: str, root: Path) -> None:
        """Run a finished child again, once its last run has stored what it ended with."""
        store = self.pool.session.store
        try:
            if previous is not None and not previous.done():
                await asyncio.wait([previous])
            run.status, run.answer, run.cancel_reason, run.delivered, run.accepting = "queued", "", "", False, True
            await store.set_link_status(run.child_id, "queued")
        except asyncio.CancelledError:  # cancelled before it ran again (as _run records a queued child's)
            run.status, run.accepting = "cancelled", False
            await asyncio.shield(store.set_link_status(run.child_id, "cancelled"))
            return
        await self._run(run, parent_ctx, parent_turn, root, None, run.tree)

    async def cancel(self, agent_id: str) -> ToolResult:
        run = self._own(agent_id)
        if run.done:
            return ToolResult(f"Agent {run.agent.name} ({run.id}) had already {run.status}.")
        await _cancel([run], "cancelled by the agent that started it")
        run.delivered = True
        return ToolResult(f"Agent {run.agent.name} ({run.id}) cancelled; its commands were stopped.")

    async def apply(self, agent_id: str, root: Path) -> ToolResult:
        """Apply what a finished child changed in its worktree to `root`, file by file: a file changed in
        `root` since the worktree's base is a conflict, left as it is. The worktree goes once all applied."""
        from auger.changes.worktree import WorktreeError

        run = self._own(agent_id)
        if run.tree is None:
            raise ToolError(f"agent {run.id} did not work in a worktree (or its changes were already applied)")
        if not run.done:
            raise ToolError(f"agent {run.id} is still {run.status}; wait for it first")
        try:
            report = await run.tree.apply_async(root)
        except WorktreeError as exc:
            raise ToolError(str(exc)) from None
        if not report.conflicts and not report.failed:
            await asyncio.to_thread(run.tree.remove)
            run.tree = None
        return ToolResult(report.message, ok=not report.conflicts and not report.failed,
                          metadata={"applied": report.applied, "conflicts": report.conflicts})

    def list(self) -> ToolResult:
        if not self.children:
            return ToolResult("You have started no sub-agents.")
        now = time.monotonic()
        return ToolResult("\n".join(
            f"{r.id}  {r.agent.name:<10} {r.status:<11} {'background' if r.background else 'foreground'}  "
            f"{now - r.started:5.0f}s  {_shorten(r.prompt)}" for r in self.children.values()))

    # -- delivering background results -----------------------------------------------
    def has_results(self) -> bool:
        return any(r.background and r.done and not r.delivered for r in self.children.values())

    async def deliver(self, turn_id: str, record: Record) -> None:
        """Record each finished background child's result for the model, once."""
        for run in self.children.values():
            if run.background and run.done and not run.delivered:
                run.delivered = True
                await record(turn_id, ContextMessage(
                    f"<agent_result id={run.id!r} agent={run.agent.name!r}>\n{run.report()}\n</agent_result>",
                    RESULT_KIND))

    async def close(self, reason: str) -> None:
        await _cancel(self.children.values(), reason)
        for run in self.children.values():  # worktrees nobody applied: the session that could is ending
            if run.tree is not None:
                tree, run.tree = run.tree, None
                await asyncio.to_thread(tree.remove)

    # -- one child ------------------------------------------------------------------
    def _count_start(self, turn_id: str) -> None:
        """Count a child started (or resumed) in the caller's turn; ToolError past the per-turn cap."""
        started = self._turn[1] if self._turn[0] == turn_id else 0
        if started >= self.pool.max_per_turn:
            raise ToolError(f"this turn already started {started} sub-agents, the most one turn may "
                            f"(agents_max_per_turn = {self.pool.max_per_turn}); finish with what you have")
        self._turn = (turn_id, started + 1)

    def _own(self, agent_id: object) -> AgentRun:
        run = self.children.get(agent_id) if isinstance(agent_id, str) else None
        if run is None:
            yours = ", ".join(self.children) or "none"
            raise ToolError(f"no sub-agent {str(agent_id)[:40]!r} of yours (yours: {yours})")
        return run

    async def _create(self, agent: AgentDef, prompt: str, ctx: ToolContext, parent_ctx: TurnContext,
                      background: bool) -> AgentRun:
        """The child's stored session and its link, before it runs (so a crash finds it)."""
        pool = self.pool
        store = pool.session.store
        child_id = new_uuid()
        cap = narrower(self.runtime.cap, agent.mode)
        run = AgentRun(child_id[:8], child_id, agent, prompt, ctx.call_id, background, self.depth + 1, cap,
                       inbox=[UserTurn(prompt)])
        now = time.time()
        shared = _shared_client(agent, parent_ctx)  # else a model of its own: as its definition names it
        provider = shared.provider if shared else agent.provider or parent_ctx.client.provider
        await store.create_session(SessionRecord(child_id, now, now, str(ctx.root), provider,
                                                 shared.model if shared else agent.model or parent_ctx.model,
                                                 effective_mode(self.runtime.shared, cap),
                                                 f"{agent.name}: {' '.join(prompt.split())}"[:80]))
        await store.link_child(LinkRecord(child_id, self.owner, ctx.call_id, agent.name, "queued"))
        self.children[run.id] = run
        pool.runs[run.id] = run
        return run

    async def _run(self, run: AgentRun, parent_ctx: TurnContext, parent_turn: str, root: Path,
                   key: tuple[str, str, str] | None, tree: Any) -> None:
        """Run a child (or resume one) until it ends; `key`: where to cache its answer (None: nowhere)."""
        pool = self.pool
        store = pool.session.store
        generation = pool.generation
        child: Child | None = None
        try:
            async with pool.slot(run.depth):
                run.status = "running"
                await store.set_link_status(run.child_id, "running")
                child = await Child.open(self, run, parent_ctx, parent_turn, root)
                reason, message = await child.run()
                while reason == "complete" and run.inbox:  # a follow-up came as its turn was ending
                    reason, message = await child.run()
                run.accepting = False  # from here on a follow-up resumes it
            run.answer = child.answer()
            if tree is not None:
                diff = await asyncio.to_thread(tree.diff)
                run.answer += (f"\n\n(The agent worked in the git worktree {tree.path}, from commit "
                               f"{tree.base_commit}. Its changes" + (
                                   f", which apply_agent_changes with id {run.id} applies to your tree (they are "
                                   "discarded when the session ends):)\n" if diff else ":)\n") + (diff or "(none)"))
            if reason == "complete":
                run.status = "completed"
                if key is not None and generation == pool.generation and tree is None and not run.followed_up:
                    pool.cache[key] = (generation, run.report())
            else:
                run.status = "cancelled" if reason == "cancelled" else "failed"
                run.answer = f"It ended early: {message}." + (f" Its last words:\n{run.answer}" if run.answer else "")
        except asyncio.CancelledError:  # cancelled before its turn ran (queued), or while it was cleaning up
            run.status = "cancelled"
        except ToolError as exc:  # it could not start (its model cannot be used)
            run.status, run.answer = "failed", str(exc)
        except StoreError as exc:  # a full disk: the child fails saying so, and its caller reads it
            run.status, run.answer = "failed", str(exc)
        except Exception as exc:  # an engine bug: the child fails, the parent goes on
            log.exception("sub-agent %s failed", run.id)
            run.status, run.answer = "failed", f"internal error: {type(exc).__name__}: {exc}"
        finally:
            if run.task is asyncio.current_task():  # (a follow-up may already have handed the run to a resume)
                run.accepting = False
            if child is not None:
                await asyncio.shield(child.close())
            try:
                await asyncio.shield(store.set_link_status(run.child_id, run.status))
            except StoreError as exc:  # the caller's own next write meets the same store and ends its turn
                log.debug("sub-agent %s: its status was not stored: %s", run.id, exc)


class Child:
    """A running sub-agent: its router, runtime, host and turn; closed when it ends."""

    def __init__(self, control: Control, run: AgentRun, ctx: TurnContext, host: ChildHost,
                 own_client: ModelClient | None, confinement: Confinement | None = None) -> None:
        self.control = control
        self.agent_run = run
        self.ctx = ctx
        self.host = host
        self.own_client = own_client
        self.confinement = confinement  # a worktree child's own sandbox (its tree is not the session's)

    @classmethod
    async def open(cls, parent: Control, run: AgentRun, parent_ctx: TurnContext, parent_turn: str,
                   root: Path) -> Child:
        pool = parent.pool
        agent = run.agent
        config = parent_ctx.workspace.config
        shared_client = _shared_client(agent, parent_ctx)
        own_client = _client_for(agent, config) if shared_client is None else None
        client = own_client or shared_client or parent_ctx.client
        prt = parent.runtime
        inherited = frozenset(prt.router.names)  # a child's tools are a subset of its parent's, agent tools too
        if parent.depth == 0 and SPAWN in inherited:  # the session offers its follow-ups once it has a child
            inherited |= FOLLOW_UPS
        allowed = inherited.__contains__ if agent.tools is None else (inherited & frozenset(agent.tools)).__contains__
        ledger = RollupLedger(parent.ledger)
        child_control = Control(pool, run.child_id, run.depth, lambda turn_id: ctx, prt, ledger)  # runtime: below
        agent_tools = Filtered(agent_toolset(lambda: child_control, pool.index.describe()),
                               lambda spec: allowed(spec.name))
        router = await ToolRouter.open(Combined([CatalogView(prt.router, allowed), agent_tools,
                                                 *_code_mode(agent, allowed)]))
        same_root = root == prt.root
        protected = prt.state.protected
        if not same_root and protected is not None:  # a worktree: the same patterns, about its own files
            protected = ProtectedFiles(root, protected.settings)
        state = SessionToolState(scratch_dir=prt.state.scratch_dir,
                                 root_handle=prt.state.root_handle if same_root else None,
                                 exec_limits=prt.state.exec_limits, protected=protected)
        shared = prt.shared  # the session's hooks and mode, whoever runs the call
        policy = prt.policy
        confinement = None
        if not same_root:  # its own sandbox, whose guarantees decide whether auto asks (as its warning says)
            secrets = [p for p in (protected, prt.state.protected) if p is not None]  # its tree's and the project's
            confinement = await _confine_worktree(config, root, run, prt.state.scratch_dir,
                                                  lambda: effective_mode(shared, run.cap),
                                                  lambda event: pool.session.emit_for(event, run.parent_call_id),
                                                  secrets)
            policy = dataclasses.replace(policy, sandboxed=confinement is not None and confinement.enforced)
        runtime = ToolRuntime(router, policy, shared=shared, root=root, state=state,
                              archive=pool.archive(run.child_id), env=prt.env,
                              sandbox=prt.sandbox if same_root else confinement, skills=prt.skills, cap=run.cap)
        runtime.record = prt.record  # a protected file the user let one of its calls read is the session's record
        if same_root:  # the parent's hooks (snapshots, own files) and approvals are about this tree
            runtime.before_mutation = [_in_turn(hook, parent_turn) for hook in prt.before_mutation]
            runtime.after_mutation = [_in_turn(hook, parent_turn) for hook in prt.after_mutation]
            runtime.after_call = [_result_in_turn(hook, parent_turn) for hook in prt.after_call]
            runtime.deletes_own = prt.deletes_own
            runtime.grants = prt.grants  # what the user approved for the session holds for its agents
            runtime.cwd = prt.cwd  # commands run where the session's do
        else:  # another tree (a worktree): only the cache must learn that something changed
            runtime.after_mutation = [pool.bump]
        child_control.runtime = runtime
        # its prompt and follow-ups are its parent's words, not the user's: only its parents' transcripts hold those
        runtime.transcript = Transcript(lambda: host.history.items, from_person=False,
                                        since=prt.transcript.since if prt.transcript else time.time(),
                                        root=prt.transcript.root if prt.transcript else prt.root,
                                        archive=runtime.archive, parent=prt.transcript)
        workspace = parent_ctx.workspace if same_root else dataclasses.replace(parent_ctx.workspace, root=root)
        info = parent_ctx.model_info
        instructions = parent_ctx.instructions
        if client is not parent_ctx.client:  # a model of its own, or the small one
            from auger.context.instructions import base_instructions
            from auger.models.registry import model_info

            info = model_info(client.model, config, client.provider)
            instructions = base_instructions(client.model, config.base_instructions)
        ctx = parent_ctx.derive(turn_id=new_hex(12), workspace=workspace, client=client, model_info=info,
                                instructions=instructions, runtime=runtime, max_model_calls=agent.max_model_calls)
        host = ChildHost(pool.session, run, child_control, ledger, runtime.archive, ctx)
        return cls(child_control, run, ctx, host, own_client, confinement)

    async def run(self) -> tuple[str, str | None]:
        """One turn of the child's, on what its inbox holds (a turn of its own each time it is run)."""
        host, run = self.host, self.agent_run
        ctx = self.ctx.derive(turn_id=new_hex(12))
        host.emit(ev.TurnStarted(ctx.turn_id))
        turn = Turn(ctx, host, interrupt_reason=lambda: run.cancel_reason)
        reason, message = await turn.run()
        host.emit(ev.TurnEnded(ctx.turn_id, TurnEndReason(reason), message))
        return reason, message

    def answer(self) -> str:
        """The child's last message to whoever started it ("" when it said nothing)."""
        for item in reversed(self.host.history.items):
            if isinstance(item, AssistantMessage):
                return item.text
            if isinstance(item, UserMessage):
                break
        return ""

    async def close(self) -> None:
        await self.control.close("its parent agent ended")
        await end_processes(self.ctx.runtime.state)
        await self.ctx.runtime.router.close()
        if self.confinement is not None:
            await self.confinement.close()
        if self.own_client is not None:
            await self.own_client.aclose()


def _code_mode(agent: AgentDef, allowed: Callable[[str], bool]) -> list[StaticToolset]:
    """run_code for an agent whose definition asks for it (`code_mode: true`) and which may run commands
    (`shell`: a program can do no more than a command could), when it does not get its parent's already; its
    programs call the agent's own tools."""
    if not agent.code_mode:
        return []
    from auger.tools.code_mode import NAME, TOOLS

    return [] if allowed(NAME) or not allowed("shell") else [StaticToolset(TOOLS)]


async def _confine_worktree(config: Config, root: Path, run: AgentRun, scratch_parent: Path, mode: Callable[[], str],
                            emit: Callable[[ev.Event], None], secrets: Sequence[ProtectedFiles]) -> Confinement | None:
    """A sandbox of the child's own around its worktree: the session's is rooted at the project and hides
    auger's data dir (where worktrees live), so the child's commands could not reach its tree. It hides the
    protected files of the worktree and of the project (readable through its absolute path)."""
    from auger.config import home_dirs
    from auger.policy.confinement import confine

    scratch = scratch_parent / f"agent-{run.id}"
    scratch.mkdir(parents=True, exist_ok=True)
    return await confine(config, root, scratch, (),
                         lambda message: emit(ev.WarningEvent(f"agent {run.agent.name} ({run.id}): {message}")),
                         mode=mode, dirs=home_dirs(), secrets=secrets)

async def _cancel(runs: Iterable[AgentRun], reason: str) -> None:
    """Cancel the runs still going and wait until each has cleaned up (its commands killed, its status
    stored). Their turns record `reason` as why they stopped."""
    tasks = []
    for run in list(runs):
        if run.task is not None and not run.task.done():
            run.cancel_reason = reason
            run.task.cancel()
            tasks.append(run.task)
    await asyncio.gather(*tasks, return_exceptions=True)


def _in_turn(hook: MutationHook, turn_id: str) -> MutationHook:
    """A parent's mutation hook, seeing a child's call as one of the spawning turn's."""

    async def run(call: PlannedCall) -> None:
        await hook(dataclasses.replace(call, turn_id=turn_id))

    return run


def _result_in_turn(hook: ResultHook, turn_id: str) -> ResultHook:
    """A parent's after-call hook (diagnostics), seeing a child's call as one of the spawning turn's."""

    async def run(call: PlannedCall, result: ToolResult) -> None:
        await hook(dataclasses.replace(call, turn_id=turn_id), result)

    return run


def _shared_client(agent: AgentDef, parent_ctx: TurnContext) -> ModelClient | None:
    """The session's client a child runs on — `model: small`: the small model (the session's own where none is
    configured), `model: main` or none: its parent's — or None when its definition names a model of its own
    (`_client_for` makes it)."""
    if agent.model == SMALL:
        return parent_ctx.small_client or parent_ctx.client
    if agent.model in (None, MAIN) and not agent.provider:
        return parent_ctx.client
    return None


def _client_for(agent: AgentDef, config: Config) -> ModelClient:
    from auger.models.registry import ProviderError, client_for

    # another provider brings its own address and key (registry.provider_for), never the session's
    model = agent.model if agent.model not in (None, MAIN, SMALL) else config.model
    chosen = dataclasses.replace(config, provider=agent.provider or config.provider, model=model)
    try:
        return client_for(chosen)
    except ProviderError as exc:
        raise ToolError(f"agent {agent.name!r} cannot use its model: {exc}") from None


async def _worktree(root: Path, protected: ProtectedFiles | None) -> Any:
    """A worktree for the child to work in (changes/worktree.py), made from a snapshot of the caller's tree
    as it is now (what this turn already changed included; a project that is not a git repository too),
    without its protected files."""
    from auger.changes.worktree import WorktreeError, create_worktree_async

    try:
        return await create_worktree_async(root, base="snapshot", name=f"agent-{new_hex(8)}",
                                           protected=protected)
    except (WorktreeError, OSError) as exc:  # a tree that cannot have a worktree: the model can go without one
        raise ToolError(f"cannot create a worktree: {exc}") from None


def _shorten(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= PROMPT_SHOWN else text[:PROMPT_SHOWN - 1] + "…"
