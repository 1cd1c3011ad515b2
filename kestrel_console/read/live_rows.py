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

# The live rows, each status through its partial index. Enqueued executions are counted from
# executions_ready (one narrow row per enqueued execution, migration 0015); a ready row can be
# stale (overview.py, QUEUE_DEPTH), so the parts that name executions count them from
# workflow_executions.
LIVE: dict[str, str] = {
    "running": """
    SELECT id, workflow_name, owner_id, lease_expires, created_at, started_at
      FROM {schema}.workflow_executions WHERE status = 'running'
""",
    "waiting": """
    SELECT workflow_name, created_at, started_at
      FROM {schema}.workflow_executions WHERE status = 'waiting'
""",
    "paused": """
    SELECT workflow_name FROM {schema}.workflow_executions WHERE status = 'paused'
""",
    "ready": """
    SELECT workflow_name, version, count(*) AS n
      FROM {schema}.executions_ready GROUP BY workflow_name, version
""",
    "finished": """
    SELECT workflow_name, status, sum(n)::bigint AS n
      FROM {schema}.execution_counts GROUP BY workflow_name, status
""",
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
    how = "AS MATERIALIZED" if materialized else "AS"
    return ",\n".join(f"{name} {how} ({body})" for name, body in LIVE.items() if name in names)


def ordered(part: LivePart) -> str:
    """The part's body with its order and limit."""
    tail = f" ORDER BY {part.order}" if part.order else ""
    if part.limit:
        tail += f" LIMIT {part.limit}"
    return part.body + tail


def statement(part: LivePart) -> str:
    """The part read alone: the live CTEs it reads (inlined), its own CTEs, its rows in order."""
    ctes = [c for c in (live_ctes(part.reads, materialized=False), part.ctes.strip()) if c]
    return "WITH " + ",\n".join(ctes) + "\n" + ordered(part)
