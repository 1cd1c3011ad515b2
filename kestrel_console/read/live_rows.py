"""The live rows and the parts counted from them, each written once.

The dashboard's refresh reads the running, waiting and paused executions, the ready rows and the
finished counters once, into CTEs, and computes seven parts from them (dashboard.py); the CLI
and the other screens read a part alone (overview.py, workers.py). Both run the same SQL: a part
(``LivePart``, defined next to its separate read) is written against the CTE names of ``LIVE``
and ``statement`` composes its separate read as the live CTEs it names, its own CTEs and its
body. Alone, each live CTE is referenced once and PostgreSQL inlines it (its columns and filter
merge into the part's scan, as if written there: the same plan as a read of the table); in the
dashboard they are MATERIALIZED, read once for all parts. A CTE a statement does not name is not
in it.
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg import sql

from kestrel_core.db import statements_beside

SQL = statements_beside(__file__)

# The live rows, each status through its partial index. Enqueued executions are counted from
# executions_ready (one narrow row per enqueued execution, migration 0015); a ready row can be
# stale (overview.py, QUEUE_DEPTH), so the parts that name executions count them from
# workflow_executions.
LIVE: dict[str, str] = {
    "running": SQL.running,
    "waiting": SQL.waiting,
    "paused": SQL.paused,
    "ready": SQL.ready,
    "finished": SQL.finished,
}


@dataclass(frozen=True)
class LivePart:
    """One part: its columns (name, SQL type) as its body returns them, the ``LIVE`` CTEs its
    body or its own CTEs read, its own CTEs (``name AS (...)``, comma-separated, after the live
    ones), its body (a SELECT with no ORDER BY), the order of its rows (an ORDER BY list of its
    columns, empty for none) and, if any, the LIMIT of its rows (a parameter)."""

    name: str
    columns: tuple[tuple[str, str], ...]
    reads: tuple[str, ...]
    body: str
    order: str = ""
    limit: str = ""
    ctes: str = ""

    def __post_init__(self) -> None:
        if unknown := set(self.reads) - LIVE.keys():
            raise ValueError(f"{self.name} reads no such live rows: {sorted(unknown)}")


def live_ctes(names: tuple[str, ...], *, materialized: bool) -> str:
    """The ``LIVE`` CTEs of ``names`` (in LIVE's order), without ``WITH``."""
    cte = sql.SQL(SQL.live_cte_materialized if materialized else SQL.live_cte)
    return ",\n".join(
        cte.format(name=sql.SQL(name), body=sql.SQL(body)).as_string(None)
        for name, body in LIVE.items()
        if name in names
    )


def ordered(part: LivePart) -> str:
    """The part's body with its order and limit."""
    rows: sql.Composable = sql.SQL(part.body)
    if part.order:
        rows = sql.SQL(SQL.ordered).format(body=rows, order=sql.SQL(part.order))
    if part.limit:
        rows = sql.SQL(SQL.limited).format(rows=rows, limit=sql.SQL(part.limit))
    return rows.as_string(None)


def statement(part: LivePart) -> str:
    """The part read alone: the live CTEs it reads (inlined), its own CTEs, its rows in order."""
    ctes = [c for c in (live_ctes(part.reads, materialized=False), part.ctes.strip()) if c]
    return sql.SQL(SQL.part_alone).format(ctes=sql.SQL(",\n".join(ctes)), rows=sql.SQL(ordered(part))).as_string(None)
