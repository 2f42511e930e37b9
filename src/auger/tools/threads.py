"""Blocking work of tool handlers, run on a thread: the one way handlers leave the event loop.

`asyncio.to_thread` cannot hand back a StopIteration raised on the thread: asyncio refuses to set
it on the awaiting future (inside a coroutine it would end a generator), logs a TypeError instead,
and the await never returns, so the turn waiting for the call hangs until the process is killed.
`in_thread` turns it into a RuntimeError, which the tool runtime reports as a failed call like any
other tool bug.
"""

from __future__ import annotations

import asyncio
from typing import Callable, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


async def in_thread(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """`fn(*args, **kwargs)` on a worker thread; whatever it raises comes back here."""
    return await asyncio.to_thread(_delivered, fn, *args, **kwargs)


def _delivered(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    try:
        return fn(*args, **kwargs)
    except StopIteration as exc:
        name = getattr(fn, "__qualname__", repr(fn))
        raise RuntimeError(f"{name} raised StopIteration") from exc
