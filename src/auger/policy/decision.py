"""The policy decision for one tool call, as a pure function: classification, rules, mode, sandbox and
session grants in, a Decision out.

    rules (forbidden / prompt / allow, strictest matching simple command)
      → trust table (policy/trust.py: effect × mode, `auto` without a sandbox acting as `safe`)
      → a call that always asks (`Classification.asks`) asks where the table would allow it
      → a call that continues an allowed one (`Classification.continues`) does not ask again
      → grants (an ask the user already approved for this session becomes allow)

Outside paths that all lie beneath a writable root the user granted the session (policy/writable_roots.py)
count as inside the project: the trust table decides the call as it would a change to the project.

The tool runtime and `auger policy check` both call `decide_call`, so what the command line shows
is what a session would do. Nothing here asks, runs or remembers: grants are passed in, and recorded
by whoever got the user's answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from auger.policy.rules import RuleSet
from auger.policy.trust import decide
from auger.policy.types import Classification, Decision, Effect, Verdict
from auger.policy.writable_roots import covered


class Grants:
    """What the user approved "for this session". Exact: approving `git push origin main` covers that
    argv and nothing else, and never a destructive or outside-the-project action."""

    def __init__(self) -> None:
        self._keys: set[tuple[str, ...]] = set()

    @staticmethod
    def _keys_of(tool: str, c: Classification) -> set[tuple[str, ...]]:
        if c.commands:
            return {(tool, *argv) for argv in c.commands}
        return {(tool, c.subject)}

    def add(self, tool: str, c: Classification) -> None:
        self._keys.update(self._keys_of(tool, c))

    def covers(self, tool: str, c: Classification, outside: bool) -> bool:
        """`outside`: the call touches paths outside the project and the session's writable roots."""
        if c.effect == Effect.DESTRUCTIVE or outside:
            return False  # never covered by an earlier approval
        keys = self._keys_of(tool, c)
        return bool(keys) and keys <= self._keys


def decide_call(tool: str, c: Classification, rules: RuleSet, mode: str, *, sandboxed: bool,
                grants: Grants | None = None, roots: Sequence[Path] = ()) -> Decision:
    """The verdict for one call; the reason names the matching rule, if one decided. `roots`: the
    session's writable roots."""
    outcome = rules.evaluate([_unwrap(argv) for argv in c.commands]) if c.commands else None
    outside = bool(c.outside_paths) and not covered(roots, c)
    decision = decide(mode, c.effect, outside=outside, rule=outcome.decision if outcome else None,
                      sandboxed=sandboxed)
    if decision.verdict == Verdict.ALLOW and c.asks:
        decision = Decision(Verdict.ASK, c.asks)
    elif decision.verdict == Verdict.ASK and c.continues:
        decision = Decision(Verdict.ALLOW, c.continues)
    rule = outcome.rule.describe() if outcome and outcome.rule else ""
    reason = f"{decision.reason} [{rule}]" if rule else decision.reason
    if decision.verdict == Verdict.ASK and grants is not None and grants.covers(tool, c, outside):
        return Decision(Verdict.ALLOW, "approved earlier in this session", rule)
    return Decision(decision.verdict, reason, rule)


def _unwrap(argv: tuple[str, ...]) -> tuple[str, ...] | list[str]:
    """The command a wrapper (`env`, `nice`, `timeout`…) runs, as rules should see it. The classifier
    loads with the first command that needs it, not at start-up."""
    from auger.policy.effects import unwrap

    return unwrap(argv)
