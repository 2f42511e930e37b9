"""What every tool runtime of one session shares: the session's own, each sub-agent's at any depth, and
whatever runs calls for the session next. These must hold whoever makes a call:

    the user's and plugins' hooks (engine/hooks.py): a guard that blocks a command, or a redaction that
        hides a secret from the model, holds for a sub-agent's call as for the session's;
    the session's trust mode as it is *now*: `set_mode` takes effect for the next call decided anywhere —
        in a running turn, in a running sub-agent — not at the next turn;
    the writable roots the user granted (engine/session/writable_roots.py), for the same reason;
    the session's redaction of secret values (auger/secrets): one numbering, one set of values learned, so a
        marker means the same text in a sub-agent's output as in the session's.

A `ToolRuntime` cannot be built without a `SessionShared` (it is a required argument, and a sub-agent's
runtime is given its parent's), so a new path that runs calls cannot forget the hooks or decide with a
mode fixed when it started. A sub-agent's definition may ask for a stricter mode than the session's: that
is the runtime's `cap`, and the effective mode of a call is the stricter of the two (`effective_mode`).

Parts that hold something the mode shaped when they started (an MCP server confined at start) `listen`
to learn of a change; everything else reads `SessionMode.now` when it decides.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Awaitable, Callable

from auger.context.agents import stricter
from auger.store.base import log_failure

if TYPE_CHECKING:
    from auger.engine.hooks import Hooks
    from auger.engine.session.writable_roots import WritableRoots
    from auger.secrets.scrub import Scrubber

log = logging.getLogger("auger.session")

ModeListener = Callable[[str, str], Awaitable[None]]  # (the new mode, the previous one)


class SessionMode:
    """The session's trust mode now, and who must be told when it changes."""

    def __init__(self, mode: str) -> None:
        self._mode = mode
        self._listeners: list[ModeListener] = []

    @property
    def now(self) -> str:
        return self._mode

    def listen(self, listener: ModeListener) -> Callable[[], None]:
        """Call `listener(new, previous)` after each change; returns what stops it."""
        self._listeners.append(listener)

        def stop() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return stop

    async def change(self, mode: str) -> None:
        """Switch now (every call decided from here on sees `mode`), then tell the listeners in order. A
        listener that fails is logged: the switch has happened and the others are still told."""
        previous, self._mode = self._mode, mode
        if mode == previous:
            return
        for listener in list(self._listeners):
            try:
                await listener(mode, previous)
            except Exception as exc:
                log_failure(log, f"a listener of the mode change to {mode}", exc)


@dataclass(frozen=True)
class SessionShared:
    mode: SessionMode
    hooks: Hooks | None = None  # the user's and plugins' hooks; None when the session has none
    roots: WritableRoots | None = None  # writable roots the user granted (None: none can be: a test's runtime)
    secrets: Scrubber | None = None  # redaction of secret values (None: a test's runtime, which redacts nothing)


def effective_mode(shared: SessionShared, cap: str | None) -> str:
    """The mode a call is decided (and sandboxed) in now: the session's, never weaker than `cap`."""
    return stricter(shared.mode.now, cap)


def narrower(cap: str | None, mode: str | None) -> str | None:
    """A sub-agent's cap: its parent's narrowed by its own definition's mode (None: no cap)."""
    return mode if cap is None else stricter(cap, mode)
