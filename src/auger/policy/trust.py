"""Trust modes: what may happen without asking, as one pure decision table.

| effect \\ mode           | plan  | safe  | auto (sandboxed)          |
|-------------------------|-------|-------|---------------------------|
| read_only               | allow | allow | allow                     |
| local_mutation          | deny  | ask   | allow (ask if outside)    |
| remote_action           | deny  | ask   | ask                       |
| destructive             | deny  | ask   | ask                       |

Exec-policy rules adjust it: `forbidden` always denies; `prompt` always asks (plan
still denies what it denies); `allow` turns an ask into allow, except for destructive
actions and anything touching paths outside the project, which always ask. `auto`
without a working sandbox behaves as `safe`: its promise rests on the sandbox.
"""

from __future__ import annotations

from auger.policy.types import MODES, Decision, Effect, Verdict

READ_ONLY, LOCAL_MUTATION, DESTRUCTIVE = Effect.READ_ONLY, Effect.LOCAL_MUTATION, Effect.DESTRUCTIVE
ALLOW, ASK, DENY = Verdict.ALLOW, Verdict.ASK, Verdict.DENY


def effective_mode(mode: str, sandboxed: bool) -> str:
    return "safe" if mode == "auto" and not sandboxed else mode


def decide(mode: str, effect: str, *, outside: bool = False, rule: str | None = None,
           sandboxed: bool = True) -> Decision:
    """The verdict for one action. `rule` is the strictest matching exec-policy decision, if any."""
    if mode not in MODES:
        raise ValueError(f"unknown trust mode {mode!r}")
    mode = effective_mode(mode, sandboxed)
    if rule == "forbidden":
        return Decision(DENY, "forbidden by an exec-policy rule")
    if mode == "plan" and effect != READ_ONLY:
        return Decision(DENY, "plan mode allows read-only actions only")
    if rule == "prompt":
        return Decision(ASK, "an exec-policy rule asks for approval")
    if effect == READ_ONLY:
        return Decision(ALLOW, "read-only")
    if effect == DESTRUCTIVE:
        return Decision(ASK, "destructive actions always ask")
    if outside:
        return Decision(ASK, "touches paths outside the project")
    if rule == "allow":
        return Decision(ALLOW, "allowed by an exec-policy rule")
    if mode == "auto" and effect == LOCAL_MUTATION:
        return Decision(ALLOW, "auto mode: changes inside the project run in the sandbox")
    return Decision(ASK, f"{mode} mode asks before {effect.replace('_', ' ')}s")
