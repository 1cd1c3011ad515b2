"""Sweeper: leaderless and idempotent, run by every worker.

It re-enqueues executions whose lease lapsed (their worker died or froze), and wakes waits that
are due: sleeps whose ``wake_at`` passed and approvals, child and event waits whose deadline
passed (``timed_out``). Workflow deadlines are swept by ``deadlines.sweep_deadlines``. Decided approvals need no sweep: the decision re-enqueues at once.
SKIP LOCKED lets many workers sweep at once without blocking each other.
"""

from __future__ import annotations

import psycopg

from .statements import notify_channel, render

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

# Lock order: wait rows first, then executions (as the operator functions do).
SWEEP_WAITS = """
WITH due AS (
    SELECT execution_id, step_id FROM {schema}.workflow_waits
     WHERE resolved_at IS NULL AND wake_at <= now()
     ORDER BY wake_at
     LIMIT %(batch)s
     FOR UPDATE SKIP LOCKED
), resolved AS (
    UPDATE {schema}.workflow_waits w
       SET resolved_at = now(),
           decision = CASE WHEN w.kind = 'approval' THEN 'timed_out' END,
           decided_at = CASE WHEN w.kind = 'approval' THEN now() END
      FROM due
     WHERE w.execution_id = due.execution_id AND w.step_id = due.step_id
    RETURNING w.execution_id, w.step_id, w.kind, w.wake_at, w.created_at, w.details
), checkpointed AS (
    -- The wake-up is the wait's checkpoint: replay returns it and does not wait again.
    INSERT INTO {schema}.operation_outputs (execution_id, step_id, output, started_at)
    SELECT execution_id, step_id,
           CASE kind WHEN 'approval'
                THEN jsonb_build_object('approved', false, 'by', NULL, 'comment', NULL,
                                        'timed_out', true, 'decided_at', now())
                WHEN 'sleep' THEN jsonb_build_object('slept_until', wake_at)
                -- a child or event wait whose timeout passed
                ELSE jsonb_build_object('timed_out', true, 'key', details -> 'key') END,
           created_at
      FROM resolved
    ON CONFLICT DO NOTHING
), woken AS (
    UPDATE {schema}.workflow_executions e
       SET status = 'enqueued', run_at = now(), updated_at = now()
      FROM resolved
     WHERE e.id = resolved.execution_id AND e.status = 'waiting'
    RETURNING e.id, e.workflow_name
), woke AS (
    SELECT pg_notify(%(channel)s, name) FROM (SELECT DISTINCT workflow_name AS name FROM woken) n
)
SELECT id FROM woken, (SELECT count(*) FROM woke) w
"""


def sweep_leases(conn: psycopg.Connection, schema: str, batch: int = 500) -> list[int]:
    """Re-enqueue running executions whose lease lapsed; returns their ids."""
    rows = conn.execute(render(SWEEP_LEASES, schema), {"batch": batch, "channel": notify_channel(schema)})
    return [row[0] for row in rows]


def sweep_waits(conn: psycopg.Connection, schema: str, batch: int = 500) -> list[int]:
    """Resolve due sleeps and timed-out approvals and re-enqueue them; returns execution ids."""
    rows = conn.execute(render(SWEEP_WAITS, schema), {"batch": batch, "channel": notify_channel(schema)})
    return [row[0] for row in rows]


def sweep(conn: psycopg.Connection, schema: str, batch: int = 500) -> tuple[list[int], list[int]]:
    """Both sweeps; returns (re-enqueued after lease expiry, woken waits)."""
    return sweep_leases(conn, schema, batch), sweep_waits(conn, schema, batch)
