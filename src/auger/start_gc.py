"""The cyclic garbage collector is held back while a command starts, and frozen over what start-up made.

Start-up allocates a few hundred thousand objects that live as long as the process (modules, classes,
functions, records) and almost no cyclic garbage, yet with Python's default thresholds every 700 of them
trigger a young-generation collection, and each tenth of those walks the middle generation again: about a
tenth of importing the engine, for nothing found. So `hold` raises the young generation's threshold to
HELD, and `release` — called when the process's first model request has gone out (models/http.py), where
start-up ends — puts the thresholds back and freezes what exists then (`gc.freeze`): later collections,
full ones too, no longer walk the start-up objects, and a forked child shares their pages instead of
copying them as a collection touches them.

Only the commands that run one session hold it (`auger exec`, `resume`, `fork`, the terminal UI): what they
freeze lives as long as the process anyway. A server or worker holds nothing, since what its first
session leaves behind would stay frozen after that session ended; `auger serve` calls `serving` instead,
once its app is built and before any session: what exists then (the modules, the app, its routes) lives
as long as the server, and frozen, a full collection — a pause of the event loop, which every event
stream waits out — walks only what the sessions made since.

Running sessions, a process collects its young generation every YOUNG allocations instead of every 700
(`running_sessions`, called when a host sets up to run sessions: engine/session/sessions.py): a session's
step allocates tens of thousands of short-lived objects that reference counting frees, while the young
objects of a hundred sessions in flight made each collection take 0.3 ms — a twelfth of the CPU of a hundred
sessions' steps (bench/bench_sessions.py), for little found. What is found is found later, in a larger
collection; nothing else changes. A host that chose its own thresholds is left alone.

Holding back is not turning off: a held process that never sends a request (a run on an agent backend)
still collects, every HELD allocations instead of every 700, which bounds what cyclic garbage can pile up
meanwhile. Reference counting frees everything else as always.
"""

from __future__ import annotations

import gc

HELD = (100_000, 50, 100)  # thresholds while held: the young generation is collected 140 times less often
YOUNG = 10_000  # the young generation's threshold while sessions run (CPython's default: 700)
_DEFAULT_YOUNG = 700

_saved: tuple[int, int, int] | None = None  # the thresholds `hold` replaced, until `release`


def hold() -> None:
    """Hold the collector back until `release` (no-op when already held)."""
    global _saved
    if _saved is None:
        _saved = gc.get_threshold()
        gc.set_threshold(*HELD)


def release() -> None:
    """Freeze what exists now and give the collector its thresholds back, if `hold` held it; idempotent
    and cheap, so it can sit on a path every request takes."""
    global _saved
    if _saved is not None:
        saved, _saved = _saved, None
        gc.freeze()
        gc.set_threshold(*saved)


def running_sessions() -> None:
    """This process runs sessions: collect the young generation every YOUNG allocations, unless its host
    chose a threshold of its own (then it is left as it is). While held, `release` gives back YOUNG."""
    global _saved
    current = _saved if _saved is not None else gc.get_threshold()
    if current[0] != _DEFAULT_YOUNG:
        return
    raised = (YOUNG, current[1], current[2])
    if _saved is not None:
        _saved = raised
    else:
        gc.set_threshold(*raised)


def held() -> bool:
    """Whether the collector is held back now."""
    return _saved is not None


def serving() -> None:
    """A server is about to serve: freeze what exists now (see the module docstring)."""
    gc.freeze()
