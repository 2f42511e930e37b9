"""The tool runtime: the one path every tool call takes, from the model's JSON to its output.

    parse the arguments → find the tool → validate → `before_tool` hooks (may deny; rewritten
    arguments are validated again) → the tool's gate (a check that needs the conversation: web_fetch's
    URL provenance; a refusal is final) → classify → decide (policy/decision.py, pure)
    → allow, deny, or grant-or-ask the user → `before_mutation` hooks → run (sandboxed)
    → if it was refused only for protected files, say so and ask → re-run with those files granted for
    this call alone → if the sandbox blocked it, ask → re-run outside → `after_tool` hooks (may rewrite
    the output the model sees) → `after_mutation` hooks → `after_call` hooks (the diagnostics: what the
    change introduced, appended to the result) → redact the outcome's text (auger/secrets)

and returns a typed outcome: Ran (the tool ran; its result may still be an error the model reads),
Failed (the call could not run: unknown tool — or one a toolset holds back, which says why — bad
arguments, a ToolError, a tool bug: any exception a handler raises, on the loop or on its thread — see
tools/threads.py — but a cancellation or a StoreError), Denied (policy or the user refused; the message
says why) or Aborted (the user ended the turn at an approval). A StoreError (the store is full: a mutation
hook could not record its snapshot) is the session's failure, not the tool's: it ends the turn with its
one line.
Nothing here records or announces the output: the turn does, in its durable order.

Redaction is the last step because this is where text from outside enters the session: whatever produced
it — a command, a file, a fetched page, an MCP server, a sub-agent, a hook — a call's output (and the
message of a call that failed or was refused) leaves here with its secret values replaced by markers, the
model is told in a line, and a secret_redacted event follows the call's end. The calls a tool makes on its
caller's behalf (run_code's) come through here too, so a program never holds a value it could encode past
the redactor. Before anything runs, a call whose arguments carry a value the configuration or environment
says is secret (secrets/known.py: a provider key, an MCP credential, a secret variable) is refused: auger
never sends one anywhere, by web_fetch, an MCP server, a command or any other tool.

Tools only declare what they need (effect, classifier, previewer); decisions are made here, in the
mode the session is in at that moment (capped by a sub-agent's own: engine/session/shared.py), never one
passed in by a caller. `before_tool`/`after_tool` are the user's and plugins' hooks (engine/hooks.py),
shared by every runtime of the session and run for every call here (and for a backend agent's
requests, engine/agents/backend_requests.py); a hook never gets
around policy, because what it rewrites is checked after it.
Mutation hooks are the engine's own async callables (snapshots for undo, the session's own files);
they run only for calls that may change something (effect other than read-only). `after_call` hooks see
every call that ran, with its result, which they may add to (engine/session/code_intel.py: the errors a change
introduced, and what a check that outlasted an earlier call found since).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from auger.engine.turn.call_outcome import Aborted, Denied, Failed, Outcome, Ran
from auger.engine.session.shared import SessionShared, effective_mode
from auger.lazy_dataclass import Deferred, dataclass
from auger.policy.decision import Grants, decide_call
from auger.policy.rules import RuleSet, append_rule
from auger.policy.types import PROTECTED_BLOCKED, Classification, Effect, Mode, Verdict
from auger.protocol import events as ev
from auger.protocol.items import Item, ProtectedRead, ToolCall
from auger.protocol.jsontext import loads as loads_bounded
from auger.protocol.vocab import Refusal
from auger.store.base import StoreError
from auger.tools.base import (
    CallsAborted,
    CommandSandbox,
    OutputArchive,
    ProtectedFileRefused,
    SessionToolState,
    ToolCaller,
    ToolContext,
    Transcript,
    ToolError,
    ToolResult,
    ToolSpec,
)
from auger.tools.router import ToolRouter

if TYPE_CHECKING:
    from auger.context.skills import SkillIndex
    from auger.engine.hooks import Hooks
    from auger.engine.turn.host import CallHost

log = logging.getLogger("auger.tools")

APPROVE, APPROVE_SESSION, APPROVE_ALWAYS, APPROVE_ROOT, DENY_CALL, ABORT = (
    "approve", "approve_session", "approve_always", "approve_writable_root", "deny", "abort")


@dataclass(frozen=True)
class PlannedCall(Deferred):
    """A call that passed policy, as hooks see it."""

    turn_id: str
    call_id: str
    tool: str
    args: dict[str, Any]
    classification: Classification


MutationHook = Callable[[PlannedCall], Awaitable[None]]
ResultHook = Callable[[PlannedCall, ToolResult], Awaitable[None]]


@dataclass(frozen=True)
class Policy:
    """The session's standing policy inputs; the mode is read when a call is decided (it may change any time)."""

    rules: RuleSet
    sandboxed: bool
    approve_all: bool
    interactive: bool
    user_rules_path: Path | None  # where an approve-always answer saves its rule; None: it is not offered


class ToolRuntime:
    """One per session, and one per sub-agent: its router, policy, grants and the state its tools share;
    `shared` (hooks, the session's mode) is the session's whoever runs the calls."""

    def __init__(self, router: ToolRouter, policy: Policy, *, shared: SessionShared, root: Path,
                 state: SessionToolState, archive: OutputArchive, env: dict[str, str] | None,
                 sandbox: CommandSandbox | None, skills: SkillIndex | None = None, cap: str | None = None) -> None:
        self.router = router
        self.policy = policy
        self.shared = shared
        self.cap = cap  # a sub-agent's: the mode its definition (and its parents') asked for; None: the session's
        self.root = root
        self.cwd: Path | None = None  # where commands run by default (the session's working directory); None: root
        self.state = state
        self.archive = archive
        self.env = env
        self.sandbox = sandbox
        self.skills = skills  # replaced when the session re-reads its skills
        self.grants = Grants()
        self.before_mutation: list[MutationHook] = []
        self.after_mutation: list[MutationHook] = []
        self.after_call: list[ResultHook] = []
        # (tool, args, classification) -> the call only deletes files this session created (engine/session/own_files.py)
        self.deletes_own: Callable[[str, dict[str, Any], Classification], bool] | None = None
        self.transcript: Transcript | None = None  # the caller's conversation, for tools that check provenance
        self.record: Callable[[str, Item], Awaitable[None]] | None = None  # commits an item to the session

    @property
    def hooks(self) -> Hooks | None:
        """The user's and plugins' hooks (engine/hooks.py): the session's, for every runtime of it."""
        return self.shared.hooks

    def mode(self) -> str:
        """The mode a call is decided in now: the session's current one, capped by `cap`."""
        return effective_mode(self.shared, self.cap)

    @property
    def roots(self) -> tuple[Path, ...]:
        """The writable roots the user granted the session (engine/session/writable_roots.py)."""
        return self.shared.roots.paths if self.shared.roots is not None else ()

    def starts_early(self, call: ToolCall) -> bool:
        """Whether `call` may start before the reply that made it is complete (engine/turn/reply_calls.py): a
        tool whose calls only read (`ToolSpec.starts_early`) and have no gate (a gate reads the conversation,
        which the reply is part of: web_fetch's provenance), arguments that validate, a read-only
        classification the policy allows unasked now. Never with `before_tool` or `after_tool` hooks: a hook
        is the user's program, run once per call, for a call that stands. Decides only; `run` runs it all."""
        spec = self.router.get(call.name)
        if spec is None or not (spec.starts_early and spec.parallel_safe) or spec.gate is not None:
            return False
        if self.hooks is not None and (self.hooks.has("before_tool") or self.hooks.has("after_tool")):
            return False
        arguments = parse_arguments(call.arguments)
        if isinstance(arguments, BadJSON):
            return False
        try:
            c = spec.classify(spec.validate(arguments), self.root)
        except ToolError:
            return False
        if c.effect != Effect.READ_ONLY:
            return False
        policy = self.policy
        decision = decide_call(spec.name, c, policy.rules, self.mode(), sandboxed=policy.sandboxed, grants=self.grants,
                               roots=self.roots)
        return decision.verdict == Verdict.ALLOW

    def refused_unasked(self, name: str, args: dict[str, Any]) -> str | None:
        """Why a call the engine makes for the user (a goal's check command: engine/turn/goal.py) would be refused
        now before running: the policy denies it, or it needs an approval and nobody can give one (a headless
        run without approve_all). None: it may run, perhaps once the user approved it. Decides only (the same
        `decide_call` as `run`); the call still takes the whole pipeline when it runs."""
        spec = self.router.get(name)
        if spec is None:
            return f"there is no tool named {name!r}"
        try:
            c = spec.classify(spec.validate(args), self.root)
        except ToolError as exc:
            return str(exc)
        policy = self.policy
        decision = decide_call(spec.name, c, policy.rules, self.mode(), sandboxed=policy.sandboxed, grants=self.grants,
                               roots=self.roots)
        if decision.verdict == Verdict.DENY:
            return f"{decision.reason} (mode {self.mode()})"
        if decision.verdict == Verdict.ASK and not policy.interactive and not policy.approve_all:
            return (f"it needs approval ({decision.reason}, mode {self.mode()}) and this is a headless run with nobody "
                    "to approve it (run it in another mode, or with --approve-all)")
        return None

    async def run(self, call: ToolCall, host: CallHost, *, turn_id: str) -> Outcome:
        return self._redacted(await self._run(call, host, turn_id), host, turn_id, call.call_id)

    async def _run(self, call: ToolCall, host: CallHost, turn_id: str) -> Outcome:
        arguments = parse_arguments(call.arguments)
        shown = call.arguments if isinstance(arguments, BadJSON) else arguments
        host.emit(ev.ToolCallStarted(turn_id, call.call_id, call.name, shown))
        secrets = self.shared.secrets
        known = secrets.redactor.known_in(call.arguments) if secrets is not None else None
        if known is not None:
            assert secrets is not None
            return Denied(f"Not run: the arguments of this {call.name} call carry {secrets.redactor.label(known)}, "
                          "a secret auger never sends anywhere. Do the task without it.", Refusal.POLICY)
        spec = self.router.get(call.name)
        if spec is None:
            held_back = self.router.not_offered(call.name)
            return Failed(f"Error: {held_back}" if held_back else f"Error: there is no tool named {call.name!r}. "
                          f"Available tools: {', '.join(self.router.names)}")
        if isinstance(arguments, BadJSON):
            return Failed(f"Error: the arguments for {call.name} {arguments.reason}. "
                          "Send a JSON object that matches the tool's parameters.")
        ctx = ToolContext(root=self.root, state=self.state, call_id=call.call_id, archive=self.archive,
                          turn_id=turn_id, env=self.env, sandbox=self.sandbox, skills=self.skills, mode=self.mode,
                          cwd=self.cwd, transcript=self.transcript,
                          secrets=self.shared.secrets.redactor if self.shared.secrets is not None else None,
                          call_tool=self._inner_calls(host, turn_id, call) if spec.calls_tools else None,
                          emit_output=lambda stream, text: host.emit(
                              ev.ToolOutputDelta(turn_id, call.call_id, stream, text)))
        try:
            args = spec.validate(arguments)
            rewritten = await self._before_tool(host, turn_id, call.call_id, spec, args)
            if isinstance(rewritten, Denied):
                return rewritten
            args = rewritten
            refused = await spec.gate(args, ctx) if spec.gate is not None else None
            if refused is not None:
                return Denied(f"Not run: {refused}", Refusal.POLICY)
            c = spec.classify_call(args, ctx)
            mode = self.mode()
            refusal = await self._permit(host, turn_id, mode, spec, args, c, ctx)
            if refusal is not None:
                return refusal
            planned = PlannedCall(turn_id, call.call_id, spec.name, args, c)
            mutates = c.effect != Effect.READ_ONLY
            if mutates:
                await _run_hooks(self.before_mutation, planned)
            result = await self._call(host, turn_id, spec, args, ctx, c)
            if result.sandbox_denial and await self._allow_unsandboxed(host, turn_id, mode, call.call_id, spec, c,
                                                                       result.sandbox_denial):
                ctx.sandbox = None
                result = await self.router.call(spec, args, ctx)
                result.output = "Re-run outside the sandbox with the user's approval.\n" + result.output
            await self._after_tool(host, turn_id, call.call_id, spec.name, args, result)
            if mutates:
                await _run_hooks(self.after_mutation, planned)
            for hook in self.after_call:
                await hook(planned, result)
            return Ran(result)
        except CallsAborted as exc:
            return Aborted(f"{exc} (at the approval of a call {call.name} made)")
        except ToolError as exc:
            return Failed(f"Error: {exc}")
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except StoreError:  # the session's failure, not the tool's (a snapshot it cannot record): the turn ends
            raise
        except BaseException as exc:  # a tool bug (SystemExit too) must not end the turn: the model tries another way
            log.error("tool %s failed", call.name, exc_info=exc)
            return Failed(f"Error: internal error in tool {call.name}: {type(exc).__name__}: {exc}")

    async def _call(self, host: CallHost, turn_id: str, spec: ToolSpec, args: dict[str, Any], ctx: ToolContext,
                    c: Classification) -> ToolResult:
        """Run the tool. One refused only for protected files is told to the user (without a byte of them);
        in an interactive session the user may let this one call have them, and it runs again with them
        granted (`ToolContext.protected_grant`). Headless — even with --approve-all — the refusal stands."""
        try:
            return await self.router.call(spec, args, ctx)
        except ProtectedFileRefused as refused:
            paths = ", ".join(refused.paths)
            files = "files" if len(refused.paths) > 1 else "file"
            host.emit(ev.WarningEvent(f"{spec.name} was refused: protected {files} {paths}", turn_id))
            if not self.policy.interactive:
                raise
            details = {"call_id": ctx.call_id, "tool": spec.name, "effect": c.effect, "subject": paths,
                       "reason": "; ".join(r.describe() for r in refused.reasons)}
            answer = await host.ask(
                turn_id=turn_id, kind="protected_read", options=[APPROVE, DENY_CALL], headless_default=DENY_CALL,
                message=f"{spec.name} wants to read or change the protected {files} {paths} ({details['reason']}). "
                        "Allow this one call?", details=details)
            if answer.decision != APPROVE:
                raise
            ctx.protected_grant = frozenset(refused.paths)
            if self.record is not None:
                await self.record(turn_id, ProtectedRead(ctx.call_id, spec.name, list(refused.paths)))
            host.emit(ev.WarningEvent(f"{spec.name} may read {paths} for this one call (allowed by the user)", turn_id))
            return await self.router.call(spec, args, ctx)

    def _redacted(self, outcome: Outcome, host: CallHost, turn_id: str, call_id: str) -> Outcome:
        """The outcome with the secret values in its text replaced by markers: a result's output (the model
        told in a line) and full output, or the message of a call that did not run."""
        secrets = self.shared.secrets
        if secrets is None:
            return outcome
        redactor = secrets.redactor
        if not isinstance(outcome, Ran):
            redaction = redactor.redact(outcome.message)
            if redaction.count:
                host.emit(ev.SecretRedacted(turn_id, call_id, sorted(redaction.kinds), redaction.count))
                return dataclasses.replace(outcome, message=redaction.text)
            return outcome
        result = outcome.result
        redaction = redactor.redact(result.output)
        kinds = redaction.kinds
        result.output = redaction.text
        if result.full_output is not None:
            full = redactor.redact(result.full_output)
            result.full_output = full.text
            kinds = kinds | full.kinds  # the output is most often the full output's start: counted once
        for problem in result.diagnostics:  # a language server's words, told in the output too: counted once
            problem.message = redactor.redact(problem.message).text
        if kinds:
            count = sum(kinds.values())
            result.output += (f"\n[auger replaced {count} secret value{'s' if count > 1 else ''} with [secret:…] "
                              "markers; an edit that keeps a marker in its place keeps the value]")
            result.events.append(ev.SecretRedacted(turn_id, call_id, sorted(kinds), count))
        return outcome

    def _inner_calls(self, host: CallHost, turn_id: str, call: ToolCall) -> ToolCaller:
        """The calls a tool that runs tools (run_code) makes for this call: each through `run`, as this call's
        children (engine/turn/inner_calls.py, loaded by the first such tool)."""
        from auger.engine.turn.inner_calls import InnerCalls

        return InnerCalls(self, host, turn_id, call)

    async def _before_tool(self, host: CallHost, turn_id: str, call_id: str, spec: ToolSpec,
                           args: dict[str, Any]) -> dict[str, Any] | Denied:
        """The arguments to go on with (a hook's rewrite, validated like the model's), or a hook's denial."""
        if self.hooks is None or not self.hooks.has("before_tool"):
            return args
        result = await self.hooks.run("before_tool", {"turn_id": turn_id, "call_id": call_id, "tool": spec.name,
                                                      "args": args}, subject=spec.name)
        for message in result.warnings:
            host.emit(ev.WarningEvent(message, turn_id))
        if result.blocked is not None:
            return Denied(f"Not run: a hook blocked this {spec.name} call: {result.blocked}", Refusal.HOOK)
        if result.args is None:
            return args
        try:
            return spec.validate(result.args)
        except ToolError as exc:
            raise ToolError(f"{exc} (in the arguments a before_tool hook rewrote)") from None

    async def _after_tool(self, host: CallHost, turn_id: str, call_id: str, tool: str, args: dict[str, Any],
                          result: ToolResult) -> None:
        """Let hooks rewrite what the model sees; the full output is then dropped, so `recall` cannot
        show what a hook took out."""
        if self.hooks is None or not self.hooks.has("after_tool"):
            return
        outcome = await self.hooks.run("after_tool", {"turn_id": turn_id, "call_id": call_id, "tool": tool,
                                                      "args": args, "ok": result.ok, "output": result.output},
                                       subject=tool)
        for message in outcome.warnings:
            host.emit(ev.WarningEvent(message, turn_id))
        if outcome.output is not None:
            result.output, result.full_output = outcome.output, None

    async def _permit(self, host: CallHost, turn_id: str, mode: str, spec: ToolSpec, args: dict[str, Any],
                      c: Classification, ctx: ToolContext) -> Denied | Aborted | None:
        """None when the call may run: policy allows it, a grant covers it, or the user approves it."""
        policy = self.policy
        decision = decide_call(spec.name, c, policy.rules, mode, sandboxed=policy.sandboxed, grants=self.grants,
                               roots=self.roots)
        if decision.verdict == Verdict.ALLOW:
            return None
        if decision.verdict == Verdict.ASK and self.deletes_own is not None and self.deletes_own(spec.name, args, c):
            return None  # removing the session's own new files is allowed like a read
        if decision.verdict == Verdict.DENY:
            return Denied(f"Not run: {decision.reason}. ({spec.name}: {c.subject})", Refusal.POLICY)
        if not policy.interactive:
            if policy.approve_all:
                return None
            return Denied(f"Not run: this {c.effect.replace('_', ' ')} needs the user's approval ({decision.reason}), "
                          "and this is a headless run with nobody to approve it. Find a way that does not "
                          "need it, or finish and say what approval is needed.", Refusal.UNAPPROVED)
        details: dict[str, Any] = {"call_id": ctx.call_id, "tool": spec.name, "effect": c.effect,
                                   "reason": decision.reason, "subject": c.subject, "findings": list(c.reasons),
                                   "outside_paths": list(c.outside_paths)}
        if spec.previewer is not None:
            details["diff"] = await spec.previewer(args, ctx) or None  # "": nothing to preview for this call
        options = [APPROVE, APPROVE_SESSION]
        if c.commands and c.effect != Effect.DESTRUCTIVE and self.policy.user_rules_path is not None:
            options.append(APPROVE_ALWAYS)
        root = self.shared.roots.offer(c) if self.shared.roots is not None and c.commands else None
        if root is not None:
            options.append(APPROVE_ROOT)
            details["writable_root"] = str(root)
        options += [DENY_CALL, ABORT]
        message = f"{spec.name} wants to run: {c.subject}" if c.commands else f"{spec.name} wants to change {c.subject}"
        answer = await host.ask(turn_id=turn_id, kind="tool", message=f"{message} ({decision.reason})",
                                options=options, headless_default=DENY_CALL, details=details)
        if answer.decision == ABORT:
            return Aborted("The user aborted the turn at this approval.")
        if answer.decision not in (APPROVE, APPROVE_SESSION, APPROVE_ALWAYS, APPROVE_ROOT):
            feedback = f" The user said: {answer.feedback}" if answer.feedback else ""
            return Denied(f"The user denied this {spec.name} call ({c.subject}).{feedback}", Refusal.UNAPPROVED)
        if answer.decision == APPROVE_ROOT:
            assert root is not None and self.shared.roots is not None  # only ever offered with one
            why = await self.shared.roots.grant(root, turn_id)
            if why is not None:  # judged again as it is granted: something changed since it was offered
                return Denied(f"Not run: {root} cannot be made writable ({why}).", Refusal.POLICY)
        elif answer.decision != APPROVE:
            self.grants.add(spec.name, c)
            if answer.decision == APPROVE_ALWAYS:
                self._remember(host, turn_id, c)
        if self.mode() != mode:  # switched while the user was asked: the mode now decides (plan refuses)
            return await self._permit(host, turn_id, self.mode(), spec, args, c, ctx)
        return None

    def _remember(self, host: CallHost, turn_id: str, c: Classification) -> None:
        """Append "allow" rules for an approve-always answer. The user approved the command whether or
        not the rule file can be written, so a write failure is a warning, never a lost approval."""
        from auger.policy.effects import unwrap  # the classifier is loaded by now: this call was classified

        path = self.policy.user_rules_path
        if path is None:  # never offered then; an answer naming it anyway approves for the session
            return
        try:
            for argv in c.commands:
                append_rule(path, unwrap(argv), "allow")
        except (OSError, UnicodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            host.emit(ev.WarningEvent(f"the rule was not saved: {reason} ({path}); approved for this session",
                                      turn_id))

    async def _allow_unsandboxed(self, host: CallHost, turn_id: str, mode: str, call_id: str, spec: ToolSpec,
                                 c: Classification, why: str) -> bool:
        """After the sandbox blocked a command: may it run again outside? Only a person can say yes — and not
        for a protected file (secrets/protected.py): those a command never reads, whoever approves."""
        if not self.policy.interactive or Mode.PLAN in (mode, self.mode()) or PROTECTED_BLOCKED in why:
            return False
        answer = await host.ask(
            turn_id=turn_id, kind="unsandboxed", message=f"The sandbox blocked `{c.subject}`: {why}. "
                                                         "Run it again without the sandbox?",
            options=[APPROVE, DENY_CALL], headless_default=DENY_CALL,
            details={"call_id": call_id, "tool": spec.name, "subject": c.subject, "effect": c.effect, "reason": why})
        return answer.decision == APPROVE


async def _run_hooks(hooks: list[MutationHook], call: PlannedCall) -> None:
    for hook in hooks:
        await hook(call)


class BadJSON:
    """Arguments the model sent that cannot be used, and why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


def parse_arguments(raw: str) -> object:
    """The call's arguments, or why they cannot be used; nesting is bounded, because everything
    after this point (validation, events, the JSON output) walks the value recursively."""
    if not raw.strip():
        return {}
    try:
        return loads_bounded(raw)
    except json.JSONDecodeError as exc:
        return BadJSON(f"are not valid JSON ({exc})")
    except ValueError as exc:  # valid, but nested too deeply to be walked safely
        return BadJSON(f"are {exc}")
