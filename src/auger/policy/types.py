"""The policy vocabulary: what an action does (Effect), how much the user trusts the agent (Mode), and
what policy says about one call (Verdict, Decision, Classification).

It lives at the bottom of the policy layer so that the classifier, the rules, the decision and the
tools all speak it without importing each other upward. The enums are `str`-valued: they compare
equal to the strings stored in sessions, configs and JSON events.
"""

from __future__ import annotations

from enum import StrEnum

from auger.lazy_dataclass import Deferred, dataclass
from auger.protocol.vocab import Effect as Effect, Mode as Mode  # one vocabulary: the protocol's, re-exported


class Verdict(StrEnum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


MODES = tuple(m.value for m in Mode)


@dataclass(frozen=True)
class Decision(Deferred):
    verdict: Verdict
    reason: str  # one line, shown to the user at an approval and to the model when a call is refused
    rule: str = ""  # the exec-policy rule that decided, described, if one did


@dataclass(frozen=True)
class Classification(Deferred):
    """What a call would do, decided before it runs; the policy decision reads only this."""

    effect: str
    subject: str  # what a user approves: the command line, or the file's path
    commands: tuple[tuple[str, ...], ...] = ()  # simple commands (shell), for rules and session grants
    outside_paths: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    # Why this call asks even where its effect would be allowed (plan still refuses it): it changes what the
    # agent is told in every later session (a note for the memory file), so only the user may decide.
    asks: str = ""
    # Why this call needs no approval of its own where its effect would ask: it continues an action policy
    # already let run (keystrokes to an interactive process it allowed or the user approved). Plan mode and
    # rules still refuse what they refuse.
    continues: str = ""
    # Each of `outside_paths` resolved to a real path ("" where that cannot be known, as `~user`): what a
    # writable root the user granted must hold for the path to count as the session's to write.
    outside_real: tuple[str, ...] = ()


# Why a command could not read a protected file (secrets/protected.py), as the sandbox explains a failure
# (policy/sandbox.py); the tool runtime offers no unsandboxed re-run for it.
PROTECTED_BLOCKED = ("blocked by the sandbox: this is a protected file (a secret the agent may not read: .env, keys, "
                     "what .augerignore lists); the user can allow one with `[secrets] allow` in their user config")
