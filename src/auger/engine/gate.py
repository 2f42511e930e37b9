"""The policy gate every tool call passes before it runs.

classify (effect, subject, simple commands, outside paths) → exec-policy rules →
trust mode → session grants → ask the user (or, headless, deny unless approve-all).
Grants are exact: approving `git push origin main` for the session covers that
argv and nothing else, and never a destructive or outside-the-project action.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from auger.policy.decision import Grants, decide_call
from auger.policy.rules import RuleSet, append_rule
from auger.policy.types import Classification, Verdict
from auger.tools.base import DESTRUCTIVE, ToolContext, ToolSpec

if TYPE_CHECKING:
    from auger.engine.session import Session

APPROVE, APPROVE_SESSION, APPROVE_ALWAYS, DENY_CALL, ABORT = (
    "approve", "approve_session", "approve_always", "deny", "abort")


@dataclass(frozen=True)
class Review:
    run: bool
    message: str = ""  # for the model when the call does not run
    abort: bool = False


class Gate:
    def __init__(self, session: Session, rules: RuleSet, *, sandboxed: bool, approve_all: bool,
                 user_rules_path: Path) -> None:
        self.session = session
        self.rules = rules
        self.sandboxed = sandboxed
        self.approve_all = approve_all
        self.user_rules_path = user_rules_path
        self.grants = Grants()

    def classify(self, spec: ToolSpec, args: dict[str, Any]) -> Classification:
        return spec.classify(args, self.session.agent.root)

    async def review(self, turn_id: str, call_id: str, spec: ToolSpec, args: dict[str, Any],
                     ctx: ToolContext) -> Review:
        c = self.classify(spec, args)
        decision = decide_call(spec.name, c, self.rules, self.session.mode, sandboxed=self.sandboxed,
                               grants=self.grants)
        reason = decision.reason
        if decision.verdict == Verdict.ALLOW:
            return Review(True)
        if decision.verdict == Verdict.DENY:
            return Review(False, f"Not run: {reason}. ({spec.name}: {c.subject})")
        if not self.session.interactive:
            if self.approve_all:
                return Review(True)
            return Review(False, f"Not run: this {c.effect.replace('_', ' ')} needs the user's approval ({reason}), "
                                 "and this is a headless run with nobody to approve it. Find a way that does not "
                                 "need it, or finish and say what approval is needed.")
        return await self._ask(turn_id, call_id, spec, args, ctx, c, reason)

    async def _ask(self, turn_id: str, call_id: str, spec: ToolSpec, args: dict[str, Any], ctx: ToolContext,
                   c: Classification, reason: str) -> Review:
        details: dict[str, Any] = {"call_id": call_id, "tool": spec.name, "effect": c.effect, "reason": reason,
                                   "subject": c.subject, "findings": list(c.reasons),
                                   "outside_paths": list(c.outside_paths)}
        if spec.previewer is not None:
            details["diff"] = await spec.previewer(args, ctx)
        options = [APPROVE, APPROVE_SESSION]
        if c.commands and c.effect != DESTRUCTIVE:
            options.append(APPROVE_ALWAYS)
        options += [DENY_CALL, ABORT]
        message = f"{spec.name} wants to run: {c.subject}" if c.commands else f"{spec.name} wants to change {c.subject}"
        answer = await self.session.ask(turn_id=turn_id, kind="tool", message=f"{message} ({reason})",
                                        options=options, headless_default=DENY_CALL, details=details)
        if answer.decision == APPROVE:
            return Review(True)
        if answer.decision in (APPROVE_SESSION, APPROVE_ALWAYS):
            self.grants.add(spec.name, c)
            if answer.decision == APPROVE_ALWAYS:
                from auger.policy.effects import unwrap

                for argv in c.commands:
                    append_rule(self.user_rules_path, unwrap(argv), "allow")
            return Review(True)
        if answer.decision == ABORT:
            return Review(False, "The user aborted the turn at this approval.", abort=True)
        feedback = f" The user said: {answer.feedback}" if answer.feedback else ""
        return Review(False, f"The user denied this {spec.name} call ({c.subject}).{feedback}")

    async def allow_unsandboxed(self, turn_id: str, call_id: str, spec: ToolSpec, args: dict[str, Any],
                                why: str) -> bool:
        """After the sandbox blocked a command: may it run again outside? Only a person can say yes."""
        if not self.session.interactive or self.session.mode == "plan":
            return False
        c = self.classify(spec, args)
        answer = await self.session.ask(
            turn_id=turn_id, kind="unsandboxed", message=f"The sandbox blocked `{c.subject}`: {why}. "
                                                         "Run it again without the sandbox?",
            options=[APPROVE, DENY_CALL], headless_default=DENY_CALL,
            details={"call_id": call_id, "tool": spec.name, "subject": c.subject, "effect": c.effect, "reason": why})
        return answer.decision == APPROVE
