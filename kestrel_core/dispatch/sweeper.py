"""Sweeper: leaderless and idempotent, run by every worker.

It re-enqueues executions whose lease lapsed (their worker died or froze), and wakes waits that
are due: sleeps whose ``wake_at`` passed and approvals, child and event waits whose deadline
passed (``timed_out``). Workflow deadlines are swept by ``deadlines.sweep_deadlines``. Decided
approvals need no sweep: the decision re-enqueues at once.
SKIP LOCKED lets many workers sweep at once without blocking each other.
"""

from __future__ import annotations

import psycopg

from kestrel_core.db.statements import notify_channel, render

SWEEP_LEASES = """
WITH expired AS (
    SELECT id FROM {schema}.workflow_executions, {async_commit}
     WHERE status = 'running' AND lease_expires < now()
     ORDER BY lease_expires
     LIMIT %(batch)s
     FOR UPDATE SKIP LOCKED
), swept AS (
    UPDATE {schema}.workflow_executions e
       SET status = 'enqueued', lease_expires = NULL, run_at = now(), updated_at = now()
      FROM expired
     WHERE e.id = expired.id
    RETURNING e.id, e.workflow_name
), woke AS (
    SELECT pg_notify(%(channel)s, name) FROM (SELECT DISTINCT workflow_name AS name FROM swept) n
)
SELECT id FROM swept, (SELECT count(*) FROM woke) w
"""

# The function (migration 0013) resolves due waits, checkpoints each wake-up (an approval's
# as timed out) and re-enqueues their executions: SECURITY DEFINER, so that the worker role
# needs no right to write a decision itself.
SWEEP_WAITS = "SELECT id FROM {schema}.sweep_waits(%(batch)s) AS id"


def sweep_leases(conn: psycopg.Connection, schema: str, batch: int = 500) -> list[int]:
    """Re-enqueue running executions whose lease lapsed; returns their ids."""
    rows = conn.execute(render(SWEEP_LEASES, schema), {"batch": batch, "channel": notify_channel(schema)})
    return [row[0] for row in rows]


def sweep_waits(conn: psycopg.Connection, schema: str, batch: int = 500) -> list[int]:
    """Resolve due sleeps and timed-out approvals and re-enqueue them; returns execution ids."""
    rows = conn.execute(render(SWEEP_WAITS, schema), {"batch": batch})
    return [row[0] for row in rows]
