"""`auger worker`: takes tasks from the queue and runs each, exactly once to completion, as a normal
auger session recorded in the shared store.

One delivery, in order:

1. **Lease.** Claim the task's lease (`task:<id>`). A live holder means this delivery is a duplicate (the
   library delivers at least once): it is dropped, and looked at again once that lease could have gone
   stale — if its holder dies, this look takes the task over. A stale holder (dead, or paused past the
   timeout) is taken over: the generation goes up, and the old holder can no longer write a result.
2. **Attempt.** Under the lease, `begin_attempt` counts the attempt and marks the task running. A task
   that was running means an attempt died: its session is marked interrupted, and the new session is
   linked to it.
3. **Checkout and session.** A fresh clone of the repository at the base ref (fleet/checkout.py); a new
   session there in the task's mode (admitted by the operator's policy, fleet/policy.py), interactive — so
   a `safe` task's approval request waits, answerable from `auger serve` on the same database (the op
   travels through the store's ops table, relayed here).
   **Parking.** A tool approval unanswered for the task's approval timeout does not hold the worker: the
   turn stops without withdrawing the request (`Session.park`), the task becomes `waiting` with the
   request and its tree's diff against the base, and the slot frees. An answer (`auger serve`) queues it
   again; whichever worker takes it checks out the same base, applies the diff, resumes the session and
   continues the turn with the answer (`Session.continue_parked`): the call that asked runs once.
4. **Result.** The final message, each turn's diff, the whole diff against the base, usage and cost, and
   the exit reason are written with the task's final state in one transaction fenced on the lease — after
   the result was delivered past the database, when the task asks for that and the operator's `[forge]`
   allows it (fleet/deliver.py: a branch, a pull request, a comment; a review task's findings as a review).
   A review task (`kind = "review"`) runs engine/agents/review.py on its ref against its base instead of a session.

Beside the queue, a worker fires the database's schedules (fleet/schedules.py): each due time becomes one
task, whichever worker or server claims it.

`cancel` posts an interrupt for the task's session; `terminate` (SIGTERM) takes no new task, gives the
running ones `drain_s` to end, interrupts the rest, and gives their tasks back to the queue.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from auger.fleet import queue
from auger.fleet.checkout import Checkout, CheckoutError, checkout
from auger.fleet.deliver import Delivery, DeliveryError
from auger.fleet.forge import forge_from_config
from auger.fleet.policy import TaskRefused, TaskSpec, WorkerPolicy, check_endpoint
from auger.fleet.schedules import Scheduler, fleet_starter
from auger.fleet.tasks import FINAL, TaskRecord, TaskResult, Tasks, lease_key
from auger.ids import new_hex
from auger.protocol import events as ev
from auger.protocol.envelope import Envelope
from auger.protocol.items import TurnAborted
from auger.protocol.ops import ApprovalDecision, Interrupt, Op, UserTurn
from auger.protocol.vocab import ApprovalOption
from auger.store.base import LinkRecord, StoreError
from auger.store.postgres import PostgresStore

if TYPE_CHECKING:
    from auger.config import Config
    from auger.engine.session.session import Session
    from auger.engine.session.sessions import SessionManager
    from auger.models.base import ModelClient

log = logging.getLogger("auger.fleet")

TERMINATED = "terminated by SIGTERM"
RELAYED = (ApprovalDecision, Interrupt)  # the ops another process may leave for a task's session


def offered_providers(own: Config, allowed: tuple[str, ...] = ()) -> frozenset[str]:
    """The providers a task may name: the worker's own, those its operator's config file describes, and
    those allowed by name (`--allow-provider`)."""
    tables = own.tables.get("providers", {})
    return frozenset({own.endpoint_provider or own.provider, own.provider,
                      *(tables if isinstance(tables, dict) else {}), *allowed})


def _smaller(own: Any, asked: Any) -> Any:
    """A task's budget within the operator's: the smaller one that is set."""
    return asked if own is None else own if asked is None else min(own, asked)


@dataclass
class WorkerOptions:
    url: str
    data_dir: Path
    queue: str = "default"
    concurrency: int = 1
    lease_timeout_s: float = 30.0
    heartbeat_s: float | None = None
    poll_s: float = 5.0
    drain_s: float = 10.0
    overrides: list[str] = field(default_factory=list)  # the operator's `-c` settings
    flags: dict[str, Any] = field(default_factory=dict)  # ...and model flags (model, provider, base_url)
    mode: str | None = None  # the most permissive mode a task runs in; None: the operator's configured mode
    cap_mode: bool = False  # a task asking for more runs at the ceiling instead of being refused
    allow_repos: tuple[str, ...] = ()  # --allow-repo patterns
    allow_providers: tuple[str, ...] = ()  # providers a task may name besides the worker's own and its tables
    health_port: int | None = None  # where `GET /health` is answered (auger/health.py); None: nowhere
    health_host: str = "127.0.0.1"
    schedules: bool = True  # fire the store's schedules too (fleet/schedules.py; every due time fires once)


@dataclass
class _Running:
    task_id: str
    session: Session | None = None
    terminated: bool = False


class Worker:
    def __init__(self, options: WorkerOptions) -> None:
        from auger.config import load_config

        self.options = options
        # The operator's own configuration: no project's file, no task in it. Tasks are held to it.
        self.own = load_config(options.overrides, options.flags)
        self.policy = WorkerPolicy(mode=options.mode or self.own.mode, cap_mode=options.cap_mode,
                                   allow_repos=options.allow_repos, providers=offered_providers(self.own,
                                                                                                options.allow_providers))
        self.forge = forge_from_config(self.own.tables)  # ForgeConfigError: the operator's [forge] is unusable
        self.store = PostgresStore(options.url, max_connections=options.concurrency * 2 + 2,
                                   lease_timeout_s=options.lease_timeout_s, heartbeat_s=options.heartbeat_s)
        self.tasks = Tasks(self.store)
        self.consumer = queue.Consumer(options.url, self._deliver, queue=options.queue,
                                       concurrency=options.concurrency, heartbeat_timeout_s=options.lease_timeout_s,
                                       poll_s=options.poll_s)
        self._slots = asyncio.Semaphore(options.concurrency)
        self.scheduler = Scheduler(self.store, fleet_starter(self.store)) if options.schedules else None
        self._running: dict[str, _Running] = {}
        self._stopping = False
        self.completed = 0

    async def run(self) -> None:
        """Consume until `terminate`; then wait for the running tasks to be recorded. Health checks are
        answered meanwhile, on the health port if one is set (HealthPortError when it cannot be had)."""
        from auger.health import serve_health

        options = self.options
        await queue.install(options.url)
        health = None if options.health_port is None else await serve_health(options.health_host,
                                                                              options.health_port, self.health)
        firing = asyncio.ensure_future(self.scheduler.run()) if self.scheduler is not None else None
        try:
            await self.consumer.run()
            while self._running:
                await asyncio.sleep(0.1)
        finally:
            if firing is not None:
                await asyncio.wait([firing], timeout=5)
                firing.cancel()
            if health is not None:
                health.close()
                await health.wait_closed()
            await self.store.aclose()

    @property
    def running(self) -> int:
        """How many tasks this worker runs now."""
        return len(self._running)

    async def health(self) -> tuple[int, dict[str, Any]]:
        """What `GET /health` answers: the store's reachability and the running tasks' count."""
        from auger.health import health

        return await health(self.store, running=self.running)

    def terminate(self) -> None:
        """Take no new task; give the running ones `drain_s` to end, then interrupt them."""
        self._stopping = True
        self.consumer.stop()
        if self.scheduler is not None:
            self.scheduler.stop()
        asyncio.get_running_loop().call_later(self.options.drain_s, self._interrupt_running)

    def _interrupt_running(self) -> None:
        for running in self._running.values():
            running.terminated = True
            if running.session is not None and not running.session.shut_down:
                try:
                    running.session.submit(Interrupt(TERMINATED))
                except RuntimeError:
                    pass

    # -- one delivery -----------------------------------------------------------------------
    async def _deliver(self, task_id: str) -> None:
        async with self._slots:
            if self._stopping:  # taken while stopping: back to the queue for another worker
                await self._redeliver(task_id, 0)
                return
            try:
                await self._run_task(task_id)
            except StoreError as exc:
                log.warning("task %s: the store failed (%s); another delivery will take it", task_id[:8], exc)
                await self._redeliver(task_id, self.options.lease_timeout_s)

    async def _redeliver(self, task_id: str, delay_s: float) -> None:
        record = await self.tasks.get(task_id)
        if record is not None and record.state not in FINAL:
            await queue.enqueue(self.store, task_id, queue=record.queue, priority=record.priority,
                                delay_s=delay_s)

    async def _run_task(self, task_id: str) -> None:
        key = lease_key(task_id)
        holder = await self.store.claim(key)
        if holder is not None:  # a duplicate delivery: look again once that lease could be stale
            log.info("task %s runs on %s: delivery dropped", task_id[:8], holder)
            await self._redeliver(task_id, self.options.lease_timeout_s)
            return
        generation = self.store.generation(key)
        assert generation is not None, "just claimed"
        running = self._running[task_id] = _Running(task_id)
        try:
            verdict, before, parked_diff = await self.tasks.begin_attempt(task_id, generation)
            if verdict not in ("run", "resume") or before is None:
                return
            try:
                await self._attempt(before, generation, running, parked_diff if verdict == "resume" else None)
            except (StoreError, asyncio.CancelledError):
                raise
            except Exception as exc:  # a bug: the task fails with it rather than stay running with no delivery
                log.exception("task %s failed", task_id[:8])
                await self.tasks.finish(task_id, generation, "failed", None, error=f"{type(exc).__name__}: {exc}")
        finally:
            self._running.pop(task_id, None)
            await self.store.release(key)

    async def _attempt(self, task: TaskRecord, generation: int, running: _Running,
                       parked_diff: str | None = None) -> None:
        """One attempt: a fresh session on a fresh checkout — or, for a parked task that was answered
        (`parked_diff` given), its session resumed on a checkout of the same base brought to where the
        parked attempt left it, continued with the answer."""
        from auger.engine.session.sessions import SessionManager
        from auger.engine.workspace import Workspace
        from auger.models.registry import ProviderError, client_for

        spec = task.spec
        resuming = parked_diff is not None and task.parked is not None
        try:  # the database is not trusted either: the stored spec is checked again, then held to the policy
            if task.refusal is not None:
                raise TaskRefused(task.refusal)
            mode = self.policy.admit(spec)
            delivery = self._delivery(spec)
        except TaskRefused as exc:
            await self._refuse(task, generation, str(exc))
            return
        previous = None if resuming else task.session_id  # an attempt before this one: died, or was given back
        where = self.options.data_dir / "checkouts" / f"{task.id}-{task.attempts + 1}-{new_hex(6)}"
        try:
            tree = await checkout(spec.repo, str(task.parked["base"]) if resuming and task.parked else spec.ref,
                                  where)
            if resuming:
                await tree.apply(parked_diff or "")
        except CheckoutError as exc:
            await self.tasks.finish(task.id, generation, "failed", None, error=str(exc))
            return
        try:
            try:
                config = self.session_config(tree.path, spec, mode)
                client = client_for(config)
            except TaskRefused as exc:
                await self._refuse(task, generation, str(exc))
                return
            except ProviderError as exc:
                await self.tasks.finish(task.id, generation, "failed", None, error=str(exc))
                return
            manager = SessionManager(Workspace.open(tree.path, config), self.store)
            reviewed: tuple[Any, Any] | None = None
            if spec.kind == "review":
                result, reason, reviewed = await self._review(task, tree, manager, client)
                if result.session_id:
                    await self.tasks.attach_session(task.id, result.session_id, generation)
                outcome: tuple[TaskResult, str, dict[str, Any] | None] = (result, reason, None)
            else:
                if resuming:
                    session = await self._resume_parked(manager, task, client, mode, tree)
                else:
                    session = await manager.create(client, mode=mode, interactive=True)
                running.session = session
                await self.store.claim(session.id)
                try:
                    cancelled = await self.tasks.attach_session(task.id, session.id, generation)
                    if previous:
                        await self._interrupted(previous, session.id)
                    if cancelled:
                        session.submit(Interrupt("cancelled"))
                    outcome = await self._drive(session, task, tree, None if resuming else UserTurn(spec.prompt))
                finally:
                    await self.store.release(session.id)
        finally:
            tree.remove()
        result, reason, parked = outcome
        if parked is not None and not running.terminated:
            if await self.tasks.park(task.id, generation, {**parked, "base": tree.base}, result.diff):
                log.info("task %s parked: it waits for an answer to %s", task.id[:8], parked["request"]["request_id"])
            else:
                log.warning("task %s: the lease was lost to another worker; its park is dropped", task.id[:8])
            return
        if running.terminated and reason == "cancelled":
            await self.tasks.release(task.id, generation)
            await self._redeliver(task.id, 0)
            return
        cancel = reason == "cancelled" and await self.tasks.cancel_requested(task.id)
        state = "done" if reason == "complete" else "cancelled" if cancel else "failed"
        error = result.exit_reason if state == "failed" and result.exit_reason.startswith("review") else None
        if state == "done" and delivery is not None:
            try:
                shipped = await (delivery.review(spec, task.id, tree.base, *reviewed) if reviewed is not None
                                 else delivery.change(spec, task.id, tree.base, result.diff, result.final_message))
                result = dataclasses.replace(result, delivery=shipped)
            except DeliveryError as exc:
                state, error = "failed", f"delivery failed: {exc}"
                result = dataclasses.replace(result, delivery={"error": str(exc)})
        if await self.tasks.finish(task.id, generation, state, result, error=error):
            self.completed += 1
        else:
            log.warning("task %s: the lease was lost to another worker; this attempt's result is dropped",
                        task.id[:8])

    def _delivery(self, spec: TaskSpec) -> Delivery | None:
        """Where a task's result goes past the database, when it asks for that: the worker's forge, and its
        name for the task's repository. TaskRefused when this worker has no forge, or it knows no such
        repository: the operator decides where its credentials push, never the task."""
        if spec.deliver == "none":
            return None
        if self.forge is None:
            raise TaskRefused(f"deliver {spec.deliver}: this worker delivers nothing past the database (its operator "
                              "gives it a [forge] to push and post with)")
        repository = self.forge.repository(spec.repo)
        if repository is None:
            raise TaskRefused(f"deliver {spec.deliver}: repository {spec.repo} is not one this worker's forge knows "
                              "([forge] hosts, [forge.repos])")
        return Delivery(self.forge, repository, self.options.data_dir)

    async def _review(self, task: TaskRecord, tree: Checkout, manager: SessionManager, client: ModelClient
                      ) -> tuple[TaskResult, str, tuple[Any, Any] | None]:
        """A review task: its ref reviewed against its base in a plan-mode session (engine/agents/review.py); the
        findings, and the change they are about, for the delivery."""
        from auger.changes.review_change import ReviewError, ReviewTarget, collect_change
        from auger.engine.agents.review import ReviewFailed, run_review
        from auger.fleet.checkout import resolve_branch
        from auger.models.registry import stored_usage

        spec = task.spec
        try:
            base = await resolve_branch(tree.path, spec.base or "HEAD")
            change = await collect_change(tree.path, ReviewTarget("base", base))
            reviewed = await run_review(manager, client, change, spec.prompt)
        except (ReviewError, CheckoutError) as exc:
            return TaskResult("", "", "", [], ev.Usage(), None, f"review: {exc}"), "error", None
        except ReviewFailed as exc:
            usage, _ = await stored_usage(self.store, exc.session_id)
            return TaskResult(exc.session_id, "", "", [], usage, None, f"review: {exc}"), "error", None
        lines = [f"{reviewed.verdict}: {reviewed.summary}"] + [
            f"- {f.file or 'general'}{f':{f.line_start}' if f.line_start else ''} {f.title}: {f.body}"
            for f in reviewed.findings]
        usage, cost = await stored_usage(self.store, reviewed.session_id, manager.workspace.config)
        return (TaskResult(reviewed.session_id, "\n".join(lines), "", [], usage, cost, "complete"), "complete",
                (reviewed, change))

    async def _resume_parked(self, manager: SessionManager, task: TaskRecord, client: ModelClient, mode: str,
                             tree: Checkout) -> Session:
        """The parked attempt's session, opened here on `tree` and continued with the answer it waited
        for: the call that asked runs (or is denied) as the answer says, decided again by the policy of
        now, and the model goes on from its output."""
        assert task.parked is not None and task.answer is not None and task.session_id is not None
        answer = task.answer
        decision = ApprovalDecision(str(answer["request_id"]), ApprovalOption(answer["decision"]),
                                    feedback=answer.get("feedback"), by=str(answer.get("by") or ""))
        await self.store.update_session(task.session_id, cwd=str(tree.path))
        session = await manager.resume(task.session_id, client=client, switch=True, mode=mode, interactive=True,
                                       parked=True)
        session.continue_parked(decision, str(task.parked["call_id"]))
        return session

    def session_config(self, root: Path, spec: TaskSpec, mode: str) -> Config:
        """The task's session configuration: the operator's own, with the project's safe keys (as for any
        session in that checkout), and the task's choices applied as data — a provider and model by name,
        the mode already admitted, budgets no larger than the operator's. The worker's settings win over
        the repository's: a provider the task did not name is the worker's own. TaskRefused when the
        result would send a key anywhere the operator's configuration does not send it."""
        from auger.config import load_config

        own = self.own
        config = load_config([*self.options.overrides, "generate_titles=false"],
                             {**self.options.flags, "db_path": self.options.url}, project_dir=root)
        provider = spec.provider or own.endpoint_provider or own.provider
        model = spec.model if spec.model is not None else own.model if provider == own.provider else None
        config = dataclasses.replace(
            config, provider=provider, model=model, mode=mode, remote_approvals=True,
            session_token_budget=_smaller(own.session_token_budget, spec.token_budget),
            session_cost_budget=_smaller(own.session_cost_budget, spec.cost_budget))
        if provider not in self.policy.providers:
            raise TaskRefused(f"provider {provider!r} is not one this worker offers")
        check_endpoint(provider, config, own)
        return config

    async def _refuse(self, task: TaskRecord, generation: int, reason: str) -> None:
        """A task the worker may not run as given: failed at once, with the reason in its record."""
        log.warning("task %s refused: %s", task.id[:8], reason)
        await self.tasks.finish(task.id, generation, "failed", None, error=f"refused: {reason}",
                                exit_reason="refused")

    async def _drive(self, session: Session, task: TaskRecord, tree: Checkout, prompt: UserTurn | None
                     ) -> tuple[TaskResult, str, dict[str, Any] | None]:
        """Run the session's turn to its end — the task's prompt, or (None) a parked turn being continued —
        relaying ops left in the store; the result, the end reason, and what the turn parked on, if it did.

        An approval of the session's own tool call unanswered for the task's approval timeout parks the
        task: the turn stops without the request being withdrawn, and the task waits in the database,
        holding no worker, until someone answers it. Anything else unanswered that long (a sub-agent's
        question, the loop guard's, an MCP server's) is denied, by `timeout`."""
        from auger.engine.session.sessions import run_prompt
        from auger.models.registry import stored_usage

        final = ""
        turn_diffs: list[str] = []
        waiting: dict[str, asyncio.TimerHandle] = {}
        parked: list[Envelope] = []
        loop = asyncio.get_running_loop()

        def on_envelope(envelope: Envelope) -> None:
            nonlocal final
            event = envelope.event
            if isinstance(event, ev.ApprovalRequest):
                waiting[event.request_id] = loop.call_later(task.spec.approval_timeout_s, _timed_out, envelope)
            elif isinstance(event, ev.ApprovalResolved) and event.request_id in waiting:
                waiting.pop(event.request_id).cancel()
            elif envelope.parent_call_id is not None:
                return
            elif isinstance(event, ev.AgentMessage):
                final = event.text
            elif isinstance(event, ev.TurnDiff):
                turn_diffs.append(event.diff)

        def _timed_out(envelope: Envelope) -> None:
            request = envelope.event
            assert isinstance(request, ev.ApprovalRequest)
            waiting.pop(request.request_id, None)
            if envelope.parent_call_id is None and not parked and session.park(request.request_id):
                parked.append(envelope)
                return
            answer = ApprovalOption.DENY if ApprovalOption.DENY in request.options else ApprovalOption.ABORT
            session.decide(ApprovalDecision(request.request_id, answer, feedback="no answer in time", by="timeout"))

        relay = asyncio.ensure_future(self._relay(session))
        try:
            prompts = (prompt,) if prompt is not None else ()
            ended = await run_prompt(session, *prompts, turns=1, on_envelope=on_envelope)
        finally:
            relay.cancel()
            for handle in waiting.values():
                handle.cancel()
        reason = ended[-1].reason if ended else "error"
        diff = await tree.diff()
        usage, cost = await stored_usage(self.store, session.id, session.workspace.config)
        result = TaskResult(session.id, final, diff, turn_diffs, usage, cost, str(reason))
        if parked and reason == "cancelled":
            request = parked[0].event
            assert isinstance(request, ev.ApprovalRequest) and request.details is not None
            return result, str(reason), {"request": parked[0].to_json(), "call_id": request.details.call_id}
        return result, str(reason), None

    async def _relay(self, session: Session) -> None:
        """Ops other processes left for the session (an approval from `auger serve`, a cancel), applied."""
        while not session.shut_down:
            for text in await self.store.take_ops(session.id):
                try:
                    op = Op.from_json(json.loads(text))
                except (ValueError, KeyError, TypeError) as exc:
                    log.warning("session %s: an op left for it is not one (%s)", session.id[:8], exc)
                    continue
                if not isinstance(op, RELAYED):  # the table is not trusted: a mode or model switch stays out
                    log.warning("session %s: a %s op left for it is not one a worker takes", session.id[:8],
                                type(op).__name__)
                    continue
                try:
                    if isinstance(op, ApprovalDecision):
                        refused = session.decide(op)
                        if refused:
                            log.info("session %s: %s", session.id[:8], refused)
                    else:
                        session.submit(op)
                except RuntimeError:  # shutting down
                    return
            await self.store.wait_ops(session.id, self.options.poll_s)

    async def _interrupted(self, previous: str, retry: str) -> None:
        """The attempt that ran in `previous` is gone: say so in its log and link the retry to it."""
        if await self.store.claim(previous) is None:
            try:
                await self.store.append(previous, "fleet", TurnAborted("the worker running this task stopped; "
                                                                       f"retried in session {retry}"))
            finally:
                await self.store.release(previous)
        await self.store.link_child(LinkRecord(retry, previous, "", "retry", "running"))
