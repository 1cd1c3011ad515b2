"""The console's reads of schedules (the CLI's ``schedule list``, ``status`` and the TUI's
Schedules screen), on a ``read.Reader``: one row per schedule with its next tick, its last
run and that run's status, whether it is paused, and whether a live worker runs its workflow."""

from __future__ import annotations

from typing import Any

from kestrel_core.db import statements_beside

from ..safe_text import visible
from .reader import Reader

SQL = statements_beside(__file__)


COLUMNS = [
    "name",
    "cron",
    "timezone",
    "workflow_name",
    "next_tick",
    "last_tick",
    "last_execution_id",
    "last_status",
    "paused",
    "paused_by",
    "paused_at",
    "catch_up",
    "source",
    "input",
    "created_by",
    "created_at",
    "served",
]


def schedules(reader: Reader) -> list[dict[str, Any]]:
    """Every schedule, by name."""
    return reader._rows("schedules", SQL.schedules, {"dead_after": reader.dead_after_s})


def why_not_ticking(row: dict[str, Any]) -> str | None:
    """Why a schedule is not enqueuing runs (or its runs would not start), in one sentence for
    a terminal (what it quotes from the database is escaped); None when nothing stands in its way."""
    if row["paused"]:
        return (
            f"paused by {visible(row['paused_by'] or '?')}: no ticks until "
            f"`kestrel-console schedule resume {visible(row['name'])}`"
        )
    if not row["ticking"]:
        return "no live worker: ticks are enqueued by workers' maintenance loops (start one)"
    if not row["served"]:
        return (
            f"no live worker runs workflow {row['workflow_name']!r}: its runs are enqueued "
            "but wait for a worker that has its code"
        )
    return None


def stalled(reader: Reader) -> list[tuple[dict[str, Any], str]]:
    """The schedules not enqueuing runs (or whose runs would not start), with the reason."""
    out = []
    for row in schedules(reader):
        reason = why_not_ticking(row)
        if reason:
            out.append((row, reason))
    return out
