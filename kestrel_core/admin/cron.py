"""Cron arithmetic for schedules, on croniter: validate an expression and a timezone, and find
the ticks after (or up to) an instant.

Ticks are computed in the schedule's timezone (so ``0 9 * * *`` in Europe/Paris is 09:00 in
Paris, summer and winter) and returned as UTC instants, which is how the database stores them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter

from kestrel_core.base.errors import InvalidArgument

CRON_HELP = (
    "use 5 fields (minute hour day-of-month month day-of-week, e.g. '*/5 * * * *'), "
    "6 with seconds last (e.g. '* * * * * */10' = every 10 s), or @hourly/@daily/@weekly/..."
)


# Any expression that ever fires does so within a few years of this instant (29 February:
# 2004); croniter raises CroniterBadDateError for one that never does (30 February).
_PROBE_FROM = datetime(2001, 1, 1, tzinfo=UTC)


def check_cron(expression: str) -> str:
    """Return the expression (stripped) if croniter accepts it with 5 or 6 fields and it ever
    fires, else ValueError (a date that does not exist, 31 April, would fail every tick later)."""
    if not isinstance(expression, str) or not expression.strip():
        raise InvalidArgument(f"empty cron expression: {CRON_HELP}")
    text = " ".join(expression.split())
    fields = len(text.split(" "))
    if not (text.startswith("@") or fields in (5, 6)) or not croniter.is_valid(text):
        raise InvalidArgument(f"invalid cron expression {expression!r}: {CRON_HELP}")
    try:
        croniter(text, _PROBE_FROM).get_next(datetime)
    except CroniterBadDateError:
        raise InvalidArgument(
            f"cron expression {expression!r} never fires: no such date "
            "(day-of-month past the end of every month it names)"
        ) from None
    return text


def check_timezone(name: str) -> ZoneInfo:
    """The zone for an IANA name such as 'UTC' or 'Europe/Paris', else ValueError."""
    try:
        if not isinstance(name, str) or not name.strip():
            raise ZoneInfoNotFoundError(name)
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidArgument(
            f"unknown timezone {name!r}: use an IANA name such as 'UTC', 'Europe/Paris' or 'America/New_York'"
        ) from None


def next_after(expression: str, tz: str, after: datetime) -> datetime:
    """The first tick strictly after ``after`` (an aware datetime), as a UTC instant."""
    start = after.astimezone(check_timezone(tz))
    tick: datetime = croniter(expression, start).get_next(datetime)
    return tick.astimezone(UTC)


def ticks_due(expression: str, tz: str, first: datetime, now: datetime, limit: int) -> tuple[list[datetime], datetime]:
    """The ticks from ``first`` (itself a tick) up to ``now``, at most ``limit`` of them, and the
    tick that follows the last one returned (or ``first`` if none is due)."""
    ticks: list[datetime] = []
    tick = first
    it = croniter(expression, first.astimezone(check_timezone(tz)))
    while tick <= now and len(ticks) < limit:
        ticks.append(tick)
        tick = it.get_next(datetime).astimezone(UTC)
    return ticks, tick


def latest_at_or_before(expression: str, tz: str, now: datetime) -> datetime:
    """The most recent tick at or before ``now``."""
    after = next_after(expression, tz, now)
    tick: datetime = croniter(expression, after.astimezone(check_timezone(tz))).get_prev(datetime)
    return tick.astimezone(UTC)


def nth_latest(expression: str, tz: str, now: datetime, n: int) -> datetime:
    """The ``n``-th most recent tick at or before ``now`` (n=1 is the latest)."""
    tick = latest_at_or_before(expression, tz, now)
    it = croniter(expression, tick.astimezone(check_timezone(tz)))
    for _ in range(n - 1):
        tick = it.get_prev(datetime).astimezone(UTC)
    return tick
