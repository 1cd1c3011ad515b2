"""Durations for people: one formatter (``duration``) for the CLI tables, the TUI columns and
sentences."""

from __future__ import annotations

import math
from datetime import timedelta


def duration(
    value: float | timedelta | None,
    *,
    compact: bool = False,
    subsecond: bool = True,
    clamp: bool = False,
    missing: str = "",
) -> str:
    """'350 ms', '1.2 s', '42 s', '3 m 04 s', '2 h 05 m', '3 d 04 h'; ``missing`` ('') for None.

    The one duration formatter of the console; each caller picks its options:
    ``compact`` drops the spaces ('3m04s', the TUI's narrow columns); ``subsecond=False`` rounds
    to whole seconds (sentences); ``clamp`` shows a negative value as 0 (an age or a wait that
    the clocks made slightly negative), else negative values keep their sign.
    """
    if value is None:
        return missing
    if isinstance(value, timedelta):
        value = value.total_seconds()
    value = float(value)
    if clamp and value < 0:
        value = 0.0
    if not math.isfinite(value):  # an ad-hoc query's *_s column may hold 'NaN' or 'Infinity'
        return str(value)
    sign, value = ("-" if value < 0 else ""), abs(value)
    sp = "" if compact else " "
    if subsecond and value < 1:
        return f"{sign}{value * 1000:.0f}{sp}ms"
    if subsecond and value < 10:
        return f"{sign}{value:.1f}{sp}s"
    whole = int(round(value))
    if whole < 60:
        text = f"{whole}{sp}s"
    elif whole < 3600:
        text = f"{whole // 60}{sp}m{sp}{whole % 60:02d}{sp}s"
    elif whole < 86400:
        text = f"{whole // 3600}{sp}h{sp}{whole % 3600 // 60:02d}{sp}m"
    else:
        text = f"{whole // 86400}{sp}d{sp}{whole % 86400 // 3600:02d}{sp}h"
    return sign + text
