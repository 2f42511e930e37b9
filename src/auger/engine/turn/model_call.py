"""One model reply, streamed and retried: the only place the engine talks to a model client.

Turns, compaction summaries and titles all call `call_model`. Deltas are handed to
`on_delta` as they arrive (a turn emits them; a summary or a title passes None and stays
quiet), and each tool call to `on_call` as soon as its arguments are complete (a turn starts
reads then: engine/turn/reply_calls.py); a retry discards the failed attempt's partial reply and is
reported through `on_retry`; the rate limits each response states (a failed one's too) go to `on_limits`.
The caller records and accounts the reply: nothing here touches a session.

Pages a provider's hosted web search cited are listed under the reply's text ("Sources:"), streamed
like the text, so every front end shows them; all the pages it returned are kept in `Reply.sources`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from auger.models.base import (
    Completed, ModelClient, ModelError, ModelRequest, RateLimitReport, ReasoningDelta, ReasoningDone, StreamEvent,
    TextDelta, ToolCallReady, UsageReport, WebSource, WebSources,
)
from auger.models.rate_limits import RateLimitSnapshot
from auger.models.retry import RetryPolicy, stream_with_retry
from auger.protocol.events import Event, RateLimits, Retrying, Usage

NO_RETRY = RetryPolicy(max_attempts=1)


@dataclass
class Reply:
    # Deltas are collected in lists and joined once: appending to a str attribute copies it every time.
    text_parts: list[str] = field(default_factory=list)
    reasoning_parts: list[str] = field(default_factory=list)
    reasoning_items: list[ReasoningDone] = field(default_factory=list)
    calls: list[ToolCallReady] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    warning: str | None = None
    duration_ms: int = 0  # the whole call, retries and their waits included
    sources: list[WebSource] = field(default_factory=list)  # what a hosted web search returned or cited

    @property
    def text(self) -> str:
        return "".join(self.text_parts)

    @property
    def reasoning(self) -> str:
        return "".join(self.reasoning_parts)


async def call_model(client: ModelClient, request: ModelRequest, retry: RetryPolicy = NO_RETRY, *,
                     on_delta: Callable[[StreamEvent], None] | None = None,
                     on_retry: Callable[[int, float, ModelError], None] | None = None,
                     on_limits: Callable[[RateLimitSnapshot], None] | None = None,
                     on_call: Callable[[ToolCallReady], None] | None = None) -> Reply:
    """The complete reply; raises ModelError when it cannot be had within the retry policy."""
    reply = Reply()
    started = time.monotonic()

    def limits(snapshot: RateLimitSnapshot | None) -> None:
        if snapshot is not None and on_limits is not None:
            on_limits(snapshot)

    def on_event(event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            reply.text_parts.append(event.text)
        elif isinstance(event, ReasoningDelta):
            reply.reasoning_parts.append(event.text)
        elif isinstance(event, ReasoningDone):
            reply.reasoning_items.append(event)
        elif isinstance(event, ToolCallReady):
            reply.calls.append(event)
            if on_call is not None:
                on_call(event)
        elif isinstance(event, WebSources):
            reply.sources.extend(event.sources)
            footer = sources_footer(event.sources, after=reply.text)
            if footer:
                on_event(TextDelta(footer))
        elif isinstance(event, UsageReport):
            reply.usage = event.usage
        elif isinstance(event, Completed):
            reply.finish_reason = event.finish_reason
            reply.warning = event.warning
        elif isinstance(event, RateLimitReport):
            limits(event.limits)
        if on_delta is not None and isinstance(event, (TextDelta, ReasoningDelta)):
            on_delta(event)

    def retried(attempt: int, delay: float, error: ModelError) -> None:
        nonlocal reply
        reply = Reply()  # the failed attempt's partial reply is discarded
        limits(error.rate_limits)
        if on_retry is not None:
            on_retry(attempt, delay, error)

    try:
        await stream_with_retry(client, request, retry, on_event, retried)
    except ModelError as exc:
        limits(exc.rate_limits)
        if exc.retryable:
            raise ModelError(f"model request failed after {retry.max_attempts} attempts: {exc}",
                             retryable=False, status=exc.status) from exc
        raise
    reply.duration_ms = int((time.monotonic() - started) * 1000)
    return reply


def sources_footer(sources: list[WebSource], *, after: str = "") -> str:
    """The cited pages as a list to follow the reply's text ("" when none was cited)."""
    cited: dict[str, str] = {}
    for source in sources:
        if source.cited and source.url not in cited:
            cited[source.url] = source.title
    if not cited:
        return ""
    lines = [f"- [{title}]({url})" if title else f"- {url}" for url, title in cited.items()]
    return ("\n\n" if after else "") + "Sources:\n" + "\n".join(lines)


def announce_retries(emit: Callable[[Event], None], turn_id: str,
                     retry: RetryPolicy) -> Callable[[int, float, ModelError], None]:
    """An `on_retry` that tells the client a reply is being requested again, and why (a 429 waiting for
    its limit to refill says so)."""
    def on_retry(attempt: int, delay: float, error: ModelError) -> None:
        reason = str(error)
        if error.retry_after is None and error.reset_after is not None:
            reason += f" (waiting for the rate limit to reset in {error.reset_after:.1f}s)"
        emit(Retrying(turn_id, attempt, retry.max_attempts, round(delay, 3), reason))

    return on_retry


def announce_limits(emit: Callable[[Event], None], turn_id: str) -> Callable[[RateLimitSnapshot], None]:
    """An `on_limits` that tells the client the provider's rate limits as a response stated them."""
    def on_limits(snapshot: RateLimitSnapshot) -> None:
        emit(RateLimits(turn_id, list(snapshot.windows), dict(snapshot.headers), snapshot.status))

    return on_limits
