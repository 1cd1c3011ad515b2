"""The TUI's refresh presets and query budgets (what it was started with is a
``kestrel_console.settings.Settings``)."""

from __future__ import annotations

# Refresh intervals `+` and `-` step through, in seconds.
REFRESH_PRESETS: tuple[float, ...] = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
# Ad-hoc SQL and reports are not on a refresh path: they get a longer, fixed budget.
ADHOC_TIMEOUT_MS = 30_000
ADHOC_MAX_ROWS = 1000


def statement_timeout_ms(interval_s: float) -> int:
    """A refresh query's budget: well inside the refresh interval, so a slow query is
    cancelled before the next refresh is due (never less than 300 ms, never more than 5 s)."""
    return int(min(5000.0, max(300.0, interval_s * 800.0)))


def step_preset(current: float, direction: int) -> float:
    """The next faster (direction < 0) or slower (> 0) preset from ``current``."""
    if direction > 0:
        slower = [p for p in REFRESH_PRESETS if p > current]
        return slower[0] if slower else REFRESH_PRESETS[-1]
    faster = [p for p in REFRESH_PRESETS if p < current]
    return faster[-1] if faster else REFRESH_PRESETS[0]
