"""When a schedule is due: a cron expression (five fields, read in a time zone) or a fixed interval
(`@every 90s`, `@every 1h30m`), as the next due time after a given moment.

Nothing here reads a clock: the scheduler passes the moment in — the database's clock on PostgreSQL, so
machines whose clocks disagree agree on what is due (fleet/schedules.py).

Cron, as Vixie cron reads it: `minute hour day-of-month month day-of-week`, each field `*`, a number, a
range `a-b`, a step `*/n` or `a-b/n`, or a comma-separated list of those; months and weekdays also by
their English names (`jan`, `mon`); Sunday is 0 or 7. When both day fields are restricted a day matching
either one is due (`0 9 1 * mon`: the 1st, and every Monday); a field written from `*` (`*/2`) counts as
unrestricted. `@hourly`, `@daily` (`@midnight`), `@weekly`, `@monthly`, `@yearly` (`@annually`) are
the usual shorthands. Wall-clock times are those of `tz` (an IANA name, default UTC): a time a change to
daylight saving skips never happens, and one it repeats happens once (the first).

An interval counts from its anchor (the schedule's creation): due at anchor + k × period.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datetime import tzinfo

MIN_INTERVAL_S = 1.0
MAX_INTERVAL_S = 366 * 86400.0
SEARCH_YEARS = 8  # a cron expression due less often than this (Feb 30th) is refused
_MONTHS = {name: i for i, name in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                                              "nov", "dec"), start=1)}
_DAYS = {name: i for i, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
_MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
           "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_INTERVAL = re.compile(r"(?:\d{1,9}[smhd])+")


class CadenceError(ValueError):
    """An expression that names no time (the message says which part and why)."""


@dataclass(frozen=True)
class _Field:
    values: frozenset[int]
    star: bool  # written from `*`: unrestricted, for the day-of-month/day-of-week rule


@dataclass(frozen=True)
class Cadence:
    """A parsed cron expression or interval; `next_after(t)` is its first due time strictly after `t`."""

    text: str  # normalised: the five fields, or `@every Ns`
    tz: str = "UTC"
    period_s: float | None = None  # an interval's
    anchor: float = 0.0  # an interval counts from here
    _fields: tuple[_Field, ...] = ()

    def next_after(self, t: float) -> float:
        if self.period_s is not None:
            steps = math.floor((t - self.anchor) / self.period_s) + 1
            return self.anchor + max(steps, 1) * self.period_s
        return _next_cron(self._fields, _zone(self.tz), t)

    def due_between(self, after: float, upto: float, limit: int = 10_000) -> int:
        """How many due times fall in (after, upto], counted up to `limit`."""
        count, t = 0, after
        while count < limit:
            t = self.next_after(t)
            if t > upto:
                break
            count += 1
        return count


def parse(text: str, tz: str = "UTC", anchor: float = 0.0) -> Cadence:
    """A cadence from `0 3 * * 1-5`, `@daily` or `@every 10m`; CadenceError for anything else."""
    if not isinstance(text, str) or len(text) > 200 or any(ord(c) < 32 for c in text):
        raise CadenceError("a schedule is a cron expression of five fields or '@every DURATION'")
    _zone(tz)
    words = text.strip().lower().split()
    if words[:1] == ["@every"]:
        if len(words) != 2 or not _INTERVAL.fullmatch(words[1]):
            raise CadenceError(f"{text!r}: an interval is '@every' and a duration like 30s, 10m, 1h30m or 1d")
        period = float(sum(int(n) * _UNITS[u] for n, u in re.findall(r"(\d+)([smhd])", words[1])))
        if not MIN_INTERVAL_S <= period <= MAX_INTERVAL_S:
            raise CadenceError(f"{text!r}: an interval is from 1 second to 366 days")
        return Cadence(f"@every {int(period)}s", tz, period, anchor)
    if len(words) == 1 and words[0] in _MACROS:
        words = _MACROS[words[0]].split()
    if len(words) != 5:
        raise CadenceError(f"{text!r}: a cron expression has five fields (minute hour day-of-month month "
                           "day-of-week), or is @hourly, @daily, @weekly, @monthly or @yearly")
    fields = (_field(words[0], 0, 59, {}, "minute"), _field(words[1], 0, 23, {}, "hour"),
              _field(words[2], 1, 31, {}, "day of month"), _field(words[3], 1, 12, _MONTHS, "month"),
              _field(words[4], 0, 7, _DAYS, "day of week"))
    dow = fields[4]
    if 7 in dow.values:  # Sunday, either way
        fields = (*fields[:4], _Field(frozenset((dow.values - {7}) | {0}), dow.star))
    cadence = Cadence(" ".join(words), tz, None, anchor, fields)
    try:
        cadence.next_after(0.0)
    except CadenceError:
        raise CadenceError(f"{text!r} is never due (no such day)") from None
    return cadence


def _field(text: str, low: int, high: int, names: dict[str, int], what: str) -> _Field:
    values: set[int] = set()
    for part in text.split(","):
        base, slash, step_text = part.partition("/")
        step = 1
        if slash:
            if not step_text.isdigit() or not 1 <= int(step_text) <= high:
                raise CadenceError(f"{what} step {step_text!r} must be a number from 1 to {high}")
            step = int(step_text)
        if base == "*":
            start, end = low, high
        else:
            first, dash, last = base.partition("-")
            start = _value(first, low, high, names, what)
            end = _value(last, low, high, names, what) if dash else (high if slash else start)
            if end < start:
                raise CadenceError(f"{what} range {base!r} runs backwards")
        values.update(range(start, end + 1, step))
    return _Field(frozenset(values), text.startswith("*"))


def _value(text: str, low: int, high: int, names: dict[str, int], what: str) -> int:
    if text in names:
        return names[text]
    if not text.isdigit() or not low <= int(text) <= high:
        raise CadenceError(f"{what} {text!r} must be a number from {low} to {high}"
                           + (" or a name" if names else ""))
    return int(text)


def _zone(name: str) -> tzinfo:
    if name == "UTC":
        return UTC
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_+\-]+(?:/[A-Za-z0-9_+\-]+){0,2}", name):
            raise ValueError
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CadenceError(f"time zone {name!r} is not an IANA zone name (like UTC or Europe/Paris)") from None


def _next_cron(fields: tuple[_Field, ...], zone: tzinfo, t: float) -> float:
    """The first wall-clock minute matching `fields` strictly after `t`, as a timestamp."""
    minutes, hours, dom, months, dow = fields
    local = datetime.fromtimestamp(t, zone).replace(tzinfo=None, second=0, microsecond=0) + timedelta(minutes=1)
    limit = local + timedelta(days=366 * SEARCH_YEARS)
    while local < limit:
        if local.month not in months.values:
            local = (local.replace(day=1) + timedelta(days=32)).replace(day=1, hour=0, minute=0)
            continue
        weekday = (local.weekday() + 1) % 7  # Sunday is 0
        in_dom, in_dow = local.day in dom.values, weekday in dow.values
        day_ok = in_dom or in_dow if not dom.star and not dow.star else in_dom and in_dow
        if not day_ok:
            local = local.replace(hour=0, minute=0) + timedelta(days=1)
            continue
        if local.hour not in hours.values:
            local = local.replace(minute=0) + timedelta(hours=1)
            continue
        if local.minute not in minutes.values:
            local += timedelta(minutes=1)
            continue
        moment = local.replace(tzinfo=zone)
        stamp = moment.timestamp()
        if datetime.fromtimestamp(stamp, zone).replace(tzinfo=None) == local and stamp > t:
            return stamp
        local += timedelta(minutes=1)  # a time the clocks skip, or the repeat of one already due
    raise CadenceError("never due")
