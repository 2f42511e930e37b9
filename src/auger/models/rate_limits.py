"""Rate limits as providers state them in response headers, read into one shape.

Why: a provider says how much of each limit is left and when it refills on every response, and on a
429 says which limit was hit. Shown to the user (the terminal's status line, a server's snapshot),
that explains a slowdown before it happens; on a 429 it lets the retry wait for the refill instead of
spending its attempts on a backoff that is shorter than the window (models/retry.py).

    OpenAI       x-ratelimit-{limit,remaining,reset}-{requests,tokens}; resets as durations ("1s",
                 "6m0s", "20ms", "1h2m3.5s")
    Anthropic    anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset};
                 resets as RFC 3339 times

A value that does not parse is left out (None); the raw headers are kept beside the windows.
"""

from __future__ import annotations

import datetime
import time
from dataclasses import field
from typing import Mapping

from auger.lazy_dataclass import Deferred, dataclass
from auger.lazy_regex import lazy_compile
from auger.protocol.events import RateLimitWindow

_OPENAI = lazy_compile(r"x-ratelimit-(limit|remaining|reset)-(requests|tokens)")
_ANTHROPIC = lazy_compile(r"anthropic-ratelimit-(requests|tokens|input-tokens|output-tokens)-(limit|remaining|reset)")
_DURATION = lazy_compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+(?:\.\d+)?)ms)?")


@dataclass(frozen=True)
class RateLimitSnapshot(Deferred):
    """What one response said about the provider's limits."""

    windows: tuple[RateLimitWindow, ...]
    headers: dict[str, str] = field(default_factory=dict)
    status: int = 200

    def reset_after(self) -> float | None:
        """Seconds until the limit that is used up refills (the longest, if several are); without one
        used up, None: nothing says which limit a 429 was about, so a backoff is the better guess."""
        exhausted = [w.reset_s for w in self.windows if w.remaining == 0 and w.reset_s is not None]
        return max(exhausted) if exhausted else None


def read_rate_limits(headers: Mapping[str, str], status: int = 200, *,
                     now: float | None = None) -> RateLimitSnapshot | None:
    """The rate limits `headers` state (names in any case), or None when they state none."""
    now = time.time() if now is None else now
    values: dict[str, dict[str, str]] = {}
    raw: dict[str, str] = {}
    for name, value in headers.items():
        key = name.lower()
        if (found := _OPENAI.fullmatch(key)) is not None:
            part, window = found.groups()
        elif (found := _ANTHROPIC.fullmatch(key)) is not None:
            window, part = found.groups()
        else:
            continue
        raw[key] = value
        values.setdefault(window.replace("-", "_"), {})[part] = value.strip()
    if not values:
        return None
    windows = tuple(RateLimitWindow(name, _count(parts.get("limit")), _count(parts.get("remaining")),
                                    _reset(parts.get("reset"), now)) for name, parts in values.items())
    return RateLimitSnapshot(windows, raw, status)


def _count(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _reset(text: str | None, now: float) -> float | None:
    """Seconds until a reset stated as a duration (OpenAI), an RFC 3339 time (Anthropic) or plain seconds."""
    if not text:
        return None
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    found = _DURATION.fullmatch(text)
    if found is not None and any(found.groups()):
        hours, minutes, seconds, millis = (float(g) if g else 0.0 for g in found.groups())
        return hours * 3600 + minutes * 60 + seconds + millis / 1000
    try:
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return max(0.0, when.timestamp() - now)
