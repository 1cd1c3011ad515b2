"""What Postgres did during a measurement: commits, statements and row writes per workflow.

Deltas of the server's cumulative statistics, taken before and after the measured run:

- commits: ``pg_stat_database.xact_commit`` (in autocommit every statement is one);
- statements: ``pg_stat_statements.calls`` of top-level statements, only when the extension is
  loaded by the server (``shared_preload_libraries``; a restart), else reported as skipped;
- row writes per table of the schema: ``pg_stat_user_tables`` n_tup_ins / upd / hot_upd / del.

Lag: PG15 backends publish their table and database counters at most once a second; one that
goes idle less than a second after its last flush keeps the rest for 10 s (PGSTAT_IDLE_INTERVAL;
measured: a whole warm-up was still unpublished 0.6 s after it ended). So the "before" snapshot
waits SETTLE_S after the warm-up, and the "after" one is taken once the workers have stopped
and their backends have exited (a backend publishes its counters when it ends). Both include
the harness's own polls (a few per second). pg_stat_statements counts at once (no lag).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import psycopg

COMMITS = "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
# A partitioned table's rows are written in its partitions (migration 0022): summed under
# the partitioned table's name.
TABLE_WRITES = """
SELECT (SELECT r.relname FROM pg_class r WHERE r.oid = coalesce(pg_partition_root(s.relid), s.relid)),
       sum(n_tup_ins), sum(n_tup_upd), sum(n_tup_hot_upd), sum(n_tup_del)
  FROM pg_stat_user_tables s WHERE schemaname = %(schema)s
 GROUP BY 1
"""
PRELOAD = "SELECT current_setting('shared_preload_libraries')"
CREATE_EXTENSION = "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
# Columns as in the PG15 documentation of pg_stat_statements (toplevel: since PG14).
STATEMENTS = """
SELECT queryid, query, calls, total_exec_time, rows
  FROM pg_stat_statements
 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND toplevel
"""
# Publish this session's own pending counters at its next transaction end (PG15+).
FORCE_FLUSH = "SELECT pg_stat_force_next_flush()"
OTHER_BACKENDS = """
SELECT count(*) FROM pg_stat_activity
 WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
"""

SETTLE_S = 10.5
HOW_TO_ENABLE = (
    "statements per workflow: pg_stat_statements is not loaded; to count them add it to "
    "shared_preload_libraries in postgresql.conf and restart Postgres"
)
_TRANSACTION_CONTROL = re.compile(
    r"\s*(BEGIN|COMMIT|ROLLBACK|END|START\s+TRANSACTION|SAVEPOINT|RELEASE)\b", re.IGNORECASE
)
WRITES = ("inserts", "updates", "hot_updates", "deletes")


def commits(conn: psycopg.Connection) -> int:
    """Committed transactions of the current database so far (lags: see the module's doc)."""
    return int(conn.execute(COMMITS).fetchone()[0])


def preloaded(setting: str) -> bool:
    """Whether a ``shared_preload_libraries`` value loads pg_stat_statements."""
    names = (part.strip().strip('"').rsplit("/", 1)[-1] for part in setting.split(","))
    return any(re.sub(r"\.so$", "", name) == "pg_stat_statements" for name in names)


def statements_unavailable(conn: psycopg.Connection) -> str | None:
    """None when pg_stat_statements can be read in this database (created here if needed),
    else why not."""
    if not preloaded(conn.execute(PRELOAD).fetchone()[0]):
        return HOW_TO_ENABLE
    try:
        conn.execute(CREATE_EXTENSION)
    except psycopg.Error as exc:
        return f"statements per workflow: cannot create the pg_stat_statements extension: {exc}".strip()
    return None


@dataclass
class Snapshot:
    """The cumulative counters at one moment."""

    commits: int
    tables: dict[str, tuple[int, int, int, int]]
    statements: dict[int, tuple[str, int, float]] | None


def snapshot(conn: psycopg.Connection, schema: str, *, statements: bool) -> Snapshot:
    """Read the counters (after publishing this session's own, where the server can)."""
    if conn.info.server_version >= 150000:
        conn.execute(FORCE_FLUSH)
    tables = {row[0]: tuple(int(v) for v in row[1:]) for row in conn.execute(TABLE_WRITES, {"schema": schema})}
    stmts = None
    if statements:
        stmts = {row[0]: (row[1], int(row[2]), float(row[3])) for row in conn.execute(STATEMENTS)}
    return Snapshot(commits(conn), tables, stmts)  # type: ignore[arg-type]


def wait_backends_gone(conn: psycopg.Connection, timeout: float = 15.0) -> None:
    """Block until no other session is connected to this database (so all have flushed)."""
    deadline = time.monotonic() + timeout
    while conn.execute(OTHER_BACKENDS).fetchone()[0] and time.monotonic() < deadline:
        time.sleep(0.05)


def delta(before: Snapshot, after: Snapshot, n: int) -> dict[str, Any]:
    """Per-workflow figures between two snapshots of a run of ``n`` workflows."""
    out: dict[str, Any] = {"commits_per_workflow": round((after.commits - before.commits) / n, 2)}
    writes: dict[str, dict[str, Any]] = {}
    for table, counts in sorted(after.tables.items()):
        old = before.tables.get(table, (0, 0, 0, 0))
        d = dict(zip(WRITES, (a - b for a, b in zip(counts, old))))
        if any(d.values()):
            writes[table] = {
                **{f"{k}_per_workflow": round(v / n, 3) for k, v in d.items()},
                **d,
                "hot_pct": round(100.0 * d["hot_updates"] / d["updates"], 1) if d["updates"] else None,
            }
    out["writes"] = writes
    if after.statements is None or before.statements is None:
        out["statements_per_workflow"] = None
        return out
    calls: list[dict[str, Any]] = []
    for qid, (query, n_calls, total_ms) in after.statements.items():
        _, old_calls, old_ms = before.statements.get(qid, (query, 0, 0.0))
        if n_calls > old_calls:
            calls.append(
                {
                    "query": " ".join(query.split())[:200],
                    "calls": n_calls - old_calls,
                    "total_ms": round(total_ms - old_ms, 1),
                    "transaction_control": bool(_TRANSACTION_CONTROL.match(query)),
                }
            )
    calls.sort(key=lambda c: c["total_ms"], reverse=True)
    work = sum(c["calls"] for c in calls if not c["transaction_control"])
    out["statements_per_workflow"] = round(work / n, 2)
    out["transaction_control_per_workflow"] = round(sum(c["calls"] for c in calls if c["transaction_control"]) / n, 2)
    out["top_statements"] = [{**c, "calls_per_workflow": round(c["calls"] / n, 3)} for c in calls[:12]]
    return out
