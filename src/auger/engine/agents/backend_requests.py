"""The requests an agent running a session's turn makes of auger, answered by auger's own rules.

An agent (auger/backends) asks during its prompt; engine/agents/backend_turn.py hands each request here, in
the turn's task:

    permission  read the whole request (backends/permissions.py: every field, whatever its kind says)
                → the user's `before_tool` hooks (a block rejects it; so does a rewrite, because auger
                cannot change what the agent runs) → `decide_call` (rules, trust mode, session grants)
                → ask the client (headless: refused unless approve_all) → "allow once" or "reject once"
    fs read     `before_tool` hooks (as `read_file`) → a protected file refused (secrets/protected.py)
                → read beneath the session's root handle → `after_tool` hooks, which may rewrite the text
                the agent is given
    fs write    `before_tool` hooks (as `write_file`; a rewrite is checked like the agent's own input)
                → path and git guard → an existing protected file refused → `decide_call` as for native
                `write_file` (a file the agent got permission to change in this prompt is not asked about
                twice) → the session's mutation hooks around an atomic write (the turn's snapshot, the
                session's own files, pending mode's queue) → `after_tool` hooks

Files are opened beneath the root handle the session's tools use, on the directory they work on: in
pending mode that is the copy (the project's absolute paths name its files), so the agent's writes
are queued for review like auger's own and its reads see them. Hooks are the same object the session's
tool runtime runs, reached through `_hook` alone.

A write makes the file the session's own (engine/session/own_files.py) when the file is new, or when it did
not exist as the agent got permission to change it in this prompt: an agent may write the file itself as
well, without waiting for auger's write (opencode, once its permission is allowed, sends fs/write_text_file
and then writes the file with its own tool), so by the time the request is answered the file may already be
there, made by the agent with the permission auger gave.
"""

from __future__ import annotations

import asyncio
import difflib
import os
from typing import TYPE_CHECKING, Any

from auger.backends import files as agent_files
from auger.backends.base import FileEdit, PermissionAsked, ReadRequested, WriteRequested
from auger.engine.turn.host import TurnHost
from auger.engine.turn.tool_runtime import ABORT, APPROVE, APPROVE_SESSION, DENY_CALL, PlannedCall
from auger.engine.turn.turn import TurnAbortedByUser
from auger.engine.turn.turn_context import TurnContext
from auger.policy.types import Classification, Effect, Verdict
from auger.protocol import events as ev

if TYPE_CHECKING:
    from auger.backends.permissions import AgentRequest
    from auger.engine.hooks import HookResult
    from auger.policy.fs import RootHandle
    from auger.tools.base import ToolSpec


class AgentRequests:
    """Answers the requests of one backend turn's agent."""

    def __init__(self, ctx: TurnContext, host: TurnHost, agent: str) -> None:
        self.ctx = ctx
        self.host = host
        self.agent = agent
        self._permitted: set[str] = set()  # files the agent got permission to change in the running prompt
        self._creating: set[str] = set()  # of those, the ones that did not exist when it got it
        self._count = 0  # reads and writes so far, for their call ids

    def new_prompt(self) -> None:
        self._permitted, self._creating = set(), set()

    async def answer(self, request: PermissionAsked | ReadRequested | WriteRequested) -> None:
        from auger.backends.acp_client import RequestRefused

        if isinstance(request, PermissionAsked):
            await self._permission(request)
            return
        try:
            if isinstance(request, ReadRequested):
                _resolve(request.answer, await self._read(request))
            else:
                await self._write(request)
                _resolve(request.answer, None)
        except agent_files.FileRefused as exc:
            if not request.answer.done():
                request.answer.set_exception(RequestRefused(str(exc)))

    async def reported(self, call_id: str, tool: str, arguments: dict[str, Any], ok: bool, output: str) -> str:
        """The output of a call the agent ran, as auger records it: after the `after_tool` hooks."""
        result = await self._hook("after_tool", {"call_id": call_id, "tool": tool, "args": arguments, "ok": ok,
                                                 "output": output}, tool)
        return result.output if result is not None and result.output is not None else output

    # -- permission ---------------------------------------------------------------------
    async def _permission(self, asked: PermissionAsked) -> None:
        from auger.backends.permissions import pick, read_request, resolved

        root = self.ctx.runtime.root
        request = read_request(asked.kind, asked.title, asked.raw_input, asked.locations, asked.edits, root)
        allowed = await self._permit(asked, request)
        if allowed and request.classification.effect != Effect.READ_ONLY:
            paths = {resolved(p, root) for p in request.paths}
            self._permitted |= paths
            self._creating |= {p for p in paths if not os.path.lexists(p)}
        _resolve(asked.answer, pick(asked.options, allowed))

    async def _permit(self, asked: PermissionAsked, request: AgentRequest) -> bool:
        from auger.policy.decision import decide_call

        runtime, c = self.ctx.runtime, request.classification
        args = request.hook_args(asked.title, asked.raw_input)
        hooked = await self._hook("before_tool", {"call_id": asked.call_id, "tool": request.hook_tool, "args": args,
                                                  "agent": self.agent}, request.hook_tool)
        if hooked is not None and hooked.blocked is not None:
            self._warn(f"{self.agent}'s {request.hook_tool} call refused: a hook blocked it: {hooked.blocked}")
            return False
        if hooked is not None and hooked.args is not None and hooked.args != args:
            self._warn(f"{self.agent}'s {request.hook_tool} call refused: a hook rewrote it, and auger cannot change "
                       "what another agent runs")
            return False
        sandboxed = runtime.policy.sandboxed and request.confined
        decision = decide_call(request.tool, c, runtime.policy.rules, self.ctx.mode, sandboxed=sandboxed,
                               grants=runtime.grants)
        if decision.verdict == Verdict.ALLOW:
            return True
        if decision.verdict == Verdict.DENY:
            return False
        if not runtime.policy.interactive:
            return runtime.policy.approve_all
        return await self._ask(asked.call_id, request.tool, c, decision.reason,
                               f"{self.agent} wants to {asked.kind}: {c.subject}", _diff(asked))

    async def _ask(self, call_id: str, name: str, c: Classification, reason: str, message: str,
                   diff: str | None = None) -> bool:
        """An approval_request; True when approved (once or for the session). Abort ends the turn."""
        details: dict[str, Any] = {"call_id": call_id, "tool": name, "effect": c.effect, "reason": reason,
                                   "subject": c.subject, "findings": list(c.reasons),
                                   "outside_paths": list(c.outside_paths), "diff": diff}
        answer = await self.host.ask(turn_id=self.ctx.turn_id, kind="tool", message=f"{message} ({reason})",
                                     options=[APPROVE, APPROVE_SESSION, DENY_CALL, ABORT], headless_default=DENY_CALL,
                                     details=details)
        if answer.decision == ABORT:
            raise TurnAbortedByUser()
        if answer.decision == APPROVE_SESSION:
            self.ctx.runtime.grants.add(name, c)
        return answer.decision in (APPROVE, APPROVE_SESSION)

    # -- files --------------------------------------------------------------------------
    async def _read(self, request: ReadRequested) -> str:
        from auger.tools.files import READ_FILE

        call_id = self._next_id("read")
        args: dict[str, Any] = {"path": agent_files.relative(self._root_handle(), request.path)}
        if request.line is not None:
            args["offset"] = request.line
        if request.limit is not None:
            args["limit"] = request.limit
        args = await self._checked(READ_FILE, call_id, args, "read")
        self._refuse_protected(args["path"], "read")
        text = await asyncio.to_thread(agent_files.read_text, self._root_handle(), args["path"], args.get("offset"),
                                       args.get("limit"))
        text = await self.reported(call_id, READ_FILE.name, args, True, text)
        secrets = self.ctx.runtime.shared.secrets  # the agent's model is outside auger: it reads markers too
        return secrets.redactor.redact(text).text if secrets is not None else text

    async def _write(self, request: WriteRequested) -> None:
        from auger.backends.permissions import resolved
        from auger.policy.decision import decide_call
        from auger.tools.files import WRITE_FILE

        runtime, handle = self.ctx.runtime, self._root_handle()
        call_id = self._next_id("write")
        args = await self._checked(WRITE_FILE, call_id, {"path": agent_files.relative(handle, request.path),
                                                         "content": request.content}, "written")
        rel, refusal = agent_files.write_refusal(handle, args["path"])
        if refusal:
            raise agent_files.FileRefused(refusal)
        self._refuse_protected(rel, "written")
        c = WRITE_FILE.classify({"path": rel}, runtime.root)
        decision = decide_call(WRITE_FILE.name, c, runtime.policy.rules, self.ctx.mode,
                               sandboxed=runtime.policy.sandboxed, grants=runtime.grants)
        if decision.verdict == Verdict.DENY:
            raise agent_files.FileRefused(f"not written: {decision.reason}")
        permitted = resolved(rel, runtime.root) in self._permitted
        if decision.verdict == Verdict.ASK and not permitted:
            if not runtime.policy.interactive:
                if not runtime.policy.approve_all:
                    raise agent_files.FileRefused(f"not written: {decision.reason}, and nobody can approve it "
                                                  "in a headless run")
            elif not await self._ask(call_id, WRITE_FILE.name, c, decision.reason,
                                     f"{self.agent} wants to write {rel}"):
                raise agent_files.FileRefused(f"the user did not allow writing {rel}")
        content = await asyncio.to_thread(self._revealed, handle, rel, args["content"])
        planned = PlannedCall(self.ctx.turn_id, call_id, WRITE_FILE.name, {"path": rel, "content": args["content"]}, c)
        await self.before_change(planned)
        created = await asyncio.to_thread(agent_files.write_text, handle, rel, content)
        if created or resolved(rel, runtime.root) in self._creating:  # the agent's own tool may have made it first
            runtime.state.created_files.add(runtime.root / rel)
        await self.after_change(planned)
        await self.reported(call_id, WRITE_FILE.name, planned.args, True, f"Wrote {rel}")

    def _revealed(self, handle: RootHandle, rel: str, content: str) -> str:
        """`content` with the secret markers it keeps from the file put back (the agent read the file redacted,
        as auger's own model does: auger/secrets/redact.py `reveal`); FileRefused for one that cannot be."""
        secrets = self.ctx.runtime.shared.secrets
        if secrets is None or "[secret:" not in content:
            return content
        from auger.secrets.redact import Unrestorable

        try:
            current = agent_files.read_text(handle, rel)
        except agent_files.FileRefused:
            current = ""
        try:
            return secrets.redactor.reveal(content, current)
        except Unrestorable as exc:
            raise agent_files.FileRefused(f"not written: {exc.explain(rel)}") from None

    async def _checked(self, spec: ToolSpec, call_id: str, args: dict[str, Any], done: str) -> dict[str, Any]:
        """The arguments after the `before_tool` hooks (a rewrite validated as the tool's own); a block
        is a refusal the agent reads."""
        from auger.tools.base import ToolError

        hooked = await self._hook("before_tool", {"call_id": call_id, "tool": spec.name, "args": args,
                                                  "agent": self.agent}, spec.name)
        if hooked is None:
            return args
        if hooked.blocked is not None:
            raise agent_files.FileRefused(f"not {done}: a hook blocked it: {hooked.blocked}")
        if hooked.args is None:
            return args
        try:
            rewritten = spec.validate(hooked.args)
        except ToolError as exc:
            raise agent_files.FileRefused(f"not {done}: {exc} (in the arguments a before_tool hook rewrote)") from None
        rewritten["path"] = agent_files.relative(self._root_handle(), rewritten["path"])
        return rewritten

    def _refuse_protected(self, rel: str, done: str) -> None:
        """A protected file (secrets/protected.py) that exists is neither read nor overwritten for the agent, as for
        auger's own file tools (by its name, where a link leads, or its inode); the user is told."""
        protected = self.ctx.runtime.state.protected
        if protected is None:
            return
        path = protected.root / rel
        try:
            st = os.stat(path)
        except OSError:
            return  # nothing there to read or overwrite
        real = os.path.relpath(os.path.realpath(path), protected.root)
        reason = protected.check(rel, st) or (protected.check(real, st) if not real.startswith("..") else None)
        if reason is not None:
            self._warn(f"{self.agent} was refused: protected file {reason.path}")
            raise agent_files.FileRefused(f"not {done}: {reason.describe()}; the agent may not read or change "
                                          "protected files (the user can allow one in [secrets] allow)")

    # -- the session's parts ------------------------------------------------------------
    async def before_change(self, planned: PlannedCall) -> None:
        """The session's before-mutation hooks (the snapshot a turn diff and undo start from)."""
        for hook in self.ctx.runtime.before_mutation:
            await hook(planned)

    async def after_change(self, planned: PlannedCall) -> None:
        """The session's after-mutation hooks (its own files; in pending mode, what changed is queued)."""
        for hook in self.ctx.runtime.after_mutation:
            await hook(planned)

    async def _hook(self, event: str, data: dict[str, Any], subject: str) -> HookResult | None:
        """Run the session's user and plugin hooks of `event` (the object its tool runtime runs); None
        when there are none. What went wrong in a hook is a warning, as for native calls."""
        hooks = self.ctx.runtime.hooks
        if hooks is None or not hooks.has(event):
            return None
        result = await hooks.run(event, {"turn_id": self.ctx.turn_id, **data}, subject=subject)
        for message in result.warnings:
            self._warn(message)
        return result

    def _root_handle(self) -> RootHandle:
        """The session's handle on the directory its tools work on (pending mode: the copy)."""
        from auger.policy.fs import RootHandle

        state, root = self.ctx.runtime.state, self.ctx.runtime.root
        if state.root_handle is None or state.root_handle.path != root:
            state.root_handle = RootHandle(root)
        return state.root_handle

    def _warn(self, message: str) -> None:
        self.host.emit(ev.WarningEvent(message, self.ctx.turn_id))

    def _next_id(self, what: str) -> str:
        self._count += 1
        return f"{self.ctx.turn_id}-{what}-{self._count}"


def _diff(asked: PermissionAsked) -> str | None:
    """The change to show at an approval: the agent's own diff text (opencode sends one), else its diffs."""
    given = asked.arguments.get("diff")
    if isinstance(given, str):
        return given
    return "".join(_unified(edit) for edit in asked.edits) or None


def _unified(edit: FileEdit) -> str:
    old = (edit.old or "").splitlines(keepends=True)
    new = edit.new.splitlines(keepends=True)
    before = "/dev/null" if edit.old is None else f"a/{edit.path.lstrip('/')}"
    return "".join(difflib.unified_diff(old, new, before, f"b/{edit.path.lstrip('/')}"))


def _resolve(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():  # the prompt may have ended (and refused it) meanwhile
        future.set_result(value)
