"""The dashboard's refresh: one statement that reads the live rows once for every part that
counts them.

Seven dashboard reads each read the same ~10,000 live executions, the running ones from the
heap four times (queue depth, stuck leases, workers, activity), the waiting ones twice, and
``executions_ready`` three times (queue depth, unserved, unrunnable). Here the running and
waiting rows, the ready rows grouped by (workflow, version) and the finished counters grouped
by (workflow, status) are each read once, into MATERIALIZED CTEs (live_rows.py), and every part is
computed from them in the same statement. Each part's SQL is written once, next to its separate
read (overview.py, workers.py), which stays for the CLI and the other screens: the same body
on the same live rows, read there alone.

A statement returns one row type, so each part's columns go into typed slots of one wide row
(``part``, ``ord``, then text, bigint, timestamptz, float8, boolean and text[] slots) and
``unpack`` gives every part back its column names: values keep their SQL types.
"""

from __future__ import annotations

from typing import Any

from psycopg import sql

from kestrel_core.db import statements_beside

from .live_rows import LIVE, LivePart, live_ctes, ordered
from .overview import ACTIVITY_PART, QUEUE_DEPTH_PART, STATUS_COUNTS_PART, activity_params, counts_by_status
from .overview import SQL as OVERVIEW_SQL
from .session import Part, ReaderSession
from .workers import (
    DEFAULT_BEAT_S,
    STUCK_LEASES_PART,
    UNRUNNABLE_PART,
    UNSERVED_PART,
    WORKERS_PART,
    worker_state,
)

SQL = statements_beside(__file__)

# The parts of the one statement, each with its rows in the order its separate read returns them.
PARTS: tuple[LivePart, ...] = (
    STATUS_COUNTS_PART,
    QUEUE_DEPTH_PART,
    STUCK_LEASES_PART,
    WORKERS_PART,
    UNSERVED_PART,
    UNRUNNABLE_PART,
    ACTIVITY_PART,
)

# Paused queues the dashboard names (one line each), at most.
PAUSED_QUEUES_SHOWN = 10

_SLOT_TYPES = ("text", "bigint", "timestamptz", "float8", "boolean", "text[]")
_SLOT_PREFIX = {"text": "t", "bigint": "i", "timestamptz": "ts", "float8": "f", "boolean": "b", "text[]": "a"}


def _slots() -> tuple[list[tuple[str, str]], dict[str, list[tuple[str, str]]]]:
    """The wide row's slots (name, type) and, per part, which slot holds each column."""
    need = {t: max(sum(1 for _, ft in p.columns if ft == t) for p in PARTS) for t in _SLOT_TYPES}
    slots = [(f"{_SLOT_PREFIX[t]}{i}", t) for t in _SLOT_TYPES for i in range(need[t])]
    where: dict[str, list[tuple[str, str]]] = {}
    for p in PARTS:
        used = {t: 0 for t in _SLOT_TYPES}
        where[p.name] = []
        for name, t in p.columns:
            where[p.name].append((name, f"{_SLOT_PREFIX[t]}{used[t]}"))
            used[t] += 1
    return slots, where


_slot_list, SLOTS_OF = _slots()


def _statement() -> str:
    """The live CTEs (each read once), the parts' own CTEs, one CTE per part (its rows numbered
    in its order), then the parts' rows in one wide row type, each part's rows in its order."""
    ctes = [live_ctes(tuple(LIVE), materialized=True)]
    ctes += [p.ctes.strip() for p in PARTS if p.ctes]
    selects: list[sql.Composable] = []
    for p in PARTS:
        name = sql.SQL(p.name)
        window = sql.SQL(SQL.window_order).format(order=sql.SQL(p.order)) if p.order else sql.SQL("")
        rows = ordered(p) if p.limit else p.body
        part_rows = sql.SQL(SQL.part_rows).format(name=name, window=window, rows=sql.SQL(rows))
        ctes.append(part_rows.as_string(None))
        held = {slot: column for column, slot in SLOTS_OF[p.name]}
        values = sql.SQL(", ").join(
            sql.SQL(SQL.slot_column).format(column=sql.SQL(held[slot]), type=sql.SQL(t), slot=sql.SQL(slot))
            if slot in held
            else sql.SQL(SQL.slot_null).format(type=sql.SQL(t), slot=sql.SQL(slot))
            for slot, t in _slot_list
        )
        selects.append(sql.SQL(SQL.part_select).format(part=sql.Literal(p.name), values=values, name=name))
    return (
        sql.SQL(SQL.dashboard_live)
        .format(ctes=sql.SQL(",\n".join(ctes)), selects=sql.SQL(SQL.union_all).join(selects))
        .as_string(None)
    )


# The whole refresh but approvals and recent errors (which read no live execution), one statement.
DASHBOARD_LIVE = _statement()


def unpack(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The wide rows back into each part's rows, with its column names (every part present)."""
    out: dict[str, list[dict[str, Any]]] = {part: [] for part in SLOTS_OF}
    for row in rows:
        out[row["part"]].append({name: row[slot] for name, slot in SLOTS_OF[row["part"]]})
    return out


class DashboardReads(ReaderSession):
    """The dashboard's refresh."""

    def dashboard(self, *, minutes: int = 15, bucket_s: int = 60, errors_window_s: int = 3600) -> dict[str, Any]:
        """Everything the dashboard shows, read in one snapshot and one pipelined round trip
        (four statements: the live parts, the approvals, the recent errors, the paused queues).

        Keys: status_counts, queue_depth, stuck_leases, workers, unserved_workflows,
        unrunnable, approvals_summary, errors_last_hour, activity, paused_queues, elapsed_ms
        (time the reads took).
        """
        live = {
            "limit": 500,
            "dead_after": self.dead_after_s,
            "recent": 3600.0,
            "beat": DEFAULT_BEAT_S,
            **activity_params(minutes, bucket_s),
        }
        parts: list[Part] = [
            ("live", DASHBOARD_LIVE, live),
            ("approvals_summary", OVERVIEW_SQL.approvals_summary, None),
            ("errors_last_hour", OVERVIEW_SQL.errors_since, {"seconds": errors_window_s}),
            ("paused_queues", OVERVIEW_SQL.paused_queues, {"limit": PAUSED_QUEUES_SHOWN}),
        ]
        out = self._snapshot("dashboard", parts, prepared=True)
        out.update(unpack(out.pop("live")))
        out["status_counts"] = counts_by_status(out["status_counts"])
        for row in out["workers"]:
            row["state"] = worker_state(row)
        out["approvals_summary"] = out["approvals_summary"][0]
        out["errors_last_hour"] = out["errors_last_hour"][0]["count"]
        return out
