"""Retry policy for model calls: exponential backoff with full jitter, honouring Retry-After and, on a
429 without it, the refill time of the rate limit that was used up.

A whole streamed reply is the unit of retry: if a stream breaks part-way, the reply
is requested again and the caller is told (so it can discard the partial text).
Retry-After is the server's instruction for this request and is followed up to RETRY_AFTER_CEILING;
a rate-limit reset (models/rate_limits.py) says when a quota window refills, which may be minutes
away, so it is waited for only up to the policy's `max_delay`: the retry then lands when the limit
has room instead of spending its attempts on backoffs shorter than the window.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from dataclasses import dataclass
from typing import Awaitable, Callable

from auger.models.base import ModelClient, ModelError, ModelRequest, StreamEvent


RETRY_AFTER_CEILING = 120.0  # a server asking for longer is answered with an error, later


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    base_delay: float = 1.0
    max_delay: float = 60.0

    def delay(self, attempt: int, retry_after: float | None, reset_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        if retry_after is not None:  # the server knows best, within reason
            return min(max(retry_after, 0.0), RETRY_AFTER_CEILING)
        if reset_after is not None:  # a 429 naming when its limit refills: wait for it, within the policy
            return min(max(reset_after, 0.0), self.max_delay)
        ceiling = min(self.base_delay * (2 ** (attempt - 1)), self.max_delay)
        return ceiling / 2 + random.uniform(0, ceiling / 2)


def parse_retry_after(headers) -> float | None:
    """Seconds from `retry-after-ms` or `Retry-After` (seconds or an HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


async def stream_with_retry(
    client: ModelClient,
    request: ModelRequest,
    policy: RetryPolicy,
    on_event: Callable[[StreamEvent], Awaitable[None] | None],
    on_retry: Callable[[int, float, ModelError], Awaitable[None] | None],
    give_up: Callable[[ModelError], bool] | None = None,
) -> None:
    """Run one reply to completion, retrying retryable failures within the policy.

    `on_retry(attempt, delay, error)` is called before each wait; the caller must
    drop what it collected from the failed attempt. The last error is raised, and so is
    at once one that `give_up` says waiting will not mend (an overloaded provider, when
    another model can take the call: engine/turn/fallback.py).
    """
    attempt = 0
    while True:
        attempt += 1
        try:
            async for event in client.stream(request):
                result = on_event(event)
                if result is not None:
                    await result
            return
        except ModelError as exc:
            if not exc.retryable or attempt >= policy.max_attempts or (give_up is not None and give_up(exc)):
                raise
            delay = policy.delay(attempt, exc.retry_after, exc.reset_after)
            result = on_retry(attempt, delay, exc)
            if result is not None:
                await result
            await asyncio.sleep(delay)
