"""Guards against runaway turns: a cap on model calls, and detection of a repeated identical call."""

from __future__ import annotations

import json

from auger.protocol.jsontext import loads as loads_bounded

DOOM_REPEATS = 3


class LoopGuard:
    def __init__(self, max_model_calls: int) -> None:
        self.max_model_calls = max_model_calls
        self.model_calls = 0
        self._allowance = max_model_calls
        self._last_key: str | None = None
        self._repeats = 0

    def at_cap(self) -> bool:
        return self.model_calls >= self._allowance

    def extend(self) -> None:
        """The user chose to continue: allow another full allotment of model calls."""
        self._allowance += self.max_model_calls

    def note_model_call(self) -> None:
        self.model_calls += 1

    def note_tool_call(self, name: str, arguments: str) -> int:
        """Record a call; return how many times in a row this exact call has now been made."""
        key = name + "\0" + _canonical(arguments)
        self._repeats = self._repeats + 1 if key == self._last_key else 1
        self._last_key = key
        return self._repeats


def doom_note(name: str, repeats: int) -> str:
    return (f"\n\n[auger] You have now called {name} with exactly the same arguments {repeats} times in a row; "
            "the result will not change. Stop repeating it: try a different approach, or explain what is blocking you.")


def _canonical(arguments: str) -> str:
    try:
        return json.dumps(loads_bounded(arguments), sort_keys=True)
    except ValueError:
        return arguments.strip()
