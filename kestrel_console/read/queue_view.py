"""How a queue's numbers read for people, the same in the CLI table and the Queues screen."""

from __future__ import annotations

from typing import Any

from ..humanize import duration


def limit_text(used: int, limit: int | None) -> str:
    """'2/3' against a limit, else just the count."""
    return f"{used}/{limit}" if limit is not None else str(used)


def rate_text(row: dict[str, Any]) -> str:
    """'4/5 per 2 s' (claims started in the current window / the limit), or '-'."""
    if row["rate_limit"] is None:
        return "-"
    return f"{row['rate_used']}/{row['rate_limit']} per {duration(row['rate_period_s'])}"
