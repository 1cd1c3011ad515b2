"""What the console was started with: database, operator, report folders, refresh, read-only."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kestrel_core.app import default_operator
from kestrel_core.connection import resolve_dsn
from kestrel_core.statements import check_schema_name

# Refresh intervals `+` and `-` step through, in seconds.
REFRESH_PRESETS: tuple[float, ...] = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
DEFAULT_REFRESH = 2.0
# Ad-hoc SQL and reports are not on a refresh path: they get a longer, fixed budget.
ADHOC_TIMEOUT_MS = 30_000
ADHOC_MAX_ROWS = 1000


@dataclass
class ConsoleConfig:
    dsn: str
    schema: str = "kestrel"
    operator: str = field(default_factory=default_operator)
    queries: list[Path] = field(default_factory=list)
    read_only: bool = False
    refresh: float = DEFAULT_REFRESH

    @classmethod
    def build(
        cls, settings: Any = None, *, dsn: str | None = None, schema: str | None = None,
        operator: str | None = None, queries: list[Path] | None = None, read_only: bool = False,
        refresh: float = DEFAULT_REFRESH,
    ) -> ConsoleConfig:
        """From a CLI ``Settings`` (anything with .dsn/.schema/.operator/.queries), a DSN
        string, or keywords; keywords win over the settings object."""
        if isinstance(settings, str):
            dsn, settings = dsn or settings, None
        base_dsn = dsn or getattr(settings, "dsn", None)
        return cls(
            dsn=resolve_dsn(base_dsn),
            schema=check_schema_name(schema or getattr(settings, "schema", None) or "kestrel"),
            operator=operator or getattr(settings, "operator", None) or default_operator(),
            queries=[Path(p) for p in (queries if queries is not None else getattr(settings, "queries", None) or [])],
            read_only=read_only,
            refresh=float(refresh),
        )


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
