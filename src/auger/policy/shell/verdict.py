"""The classifier's vocabulary of verdicts: the four effects, their order, and one finding.

Kept apart from everything else so that tables, handlers and the analyzer all speak the same words
without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from auger.policy.types import Effect

READ_ONLY, LOCAL_MUTATION, REMOTE_ACTION, DESTRUCTIVE = (
    Effect.READ_ONLY, Effect.LOCAL_MUTATION, Effect.REMOTE_ACTION, Effect.DESTRUCTIVE)

EFFECT_ORDER = (READ_ONLY, LOCAL_MUTATION, REMOTE_ACTION, DESTRUCTIVE)
RANK: dict[str, int] = {effect: rank for rank, effect in enumerate(EFFECT_ORDER)}


def strictest(*effects: str) -> str:
    """The strictest of `effects` (READ_ONLY when given none); unknown effect names raise ValueError."""
    best: str = READ_ONLY
    for effect in effects:
        rank = RANK.get(effect)
        if rank is None:
            raise ValueError(f"unknown effect {effect!r}; expected one of {EFFECT_ORDER}")
        if rank > RANK[best]:
            best = effect
    return best


@dataclass(frozen=True)
class CommandAnalysis:
    effect: str  # strictest over every simple command
    commands: tuple[tuple[str, ...], ...]  # argv of every simple command, in order, nested scripts included
    reasons: tuple[str, ...]  # one short sentence per non-read-only finding
    outside_paths: tuple[str, ...]  # path-like words resolving outside the project root, as written
    parse_error: str | None = None  # set when the line could not be parsed; effect is then >= LOCAL_MUTATION
    outside_real: tuple[str, ...] = ()  # each of outside_paths resolved to a real path ("": cannot be known)


class Finding(NamedTuple):
    """One verdict a program handler reaches about its command; the analyzer keeps the strictest."""

    effect: str
    reason: str = ""
