"""Leases: one UPDATE renews every lease a worker holds; a stopping worker hands its executions back."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import psycopg

from kestrel_core.db.statements import notify_channel, render

# Renew the leases of the executions this worker is running and say which (id, claim_epoch) it
# still holds: a row that is missing was swept, cancelled or reclaimed, and its thread must
# stop at the next boundary. Only ids in flight are renewed: an execution the worker gave up
# on (its database write failed) lets its lease lapse and is retried elsewhere.
HEARTBEAT = """
WITH mine AS (
    -- Locked in id order, the order the worker's batched step boundaries lock them in
    -- (boundary.py): two statements locking the same rows in different orders can deadlock.
    SELECT id FROM {schema}.workflow_executions
     WHERE status = 'running' AND owner_id = %(worker_id)s AND id = ANY(%(ids)s)
     ORDER BY id
       FOR NO KEY UPDATE
), renewed AS (
    UPDATE {schema}.workflow_executions e SET lease_expires = now() + %(lease)s
      FROM {async_commit}, mine
     WHERE e.id = mine.id
    RETURNING e.id, e.claim_epoch
), beat AS (
    UPDATE {schema}.workers SET last_heartbeat = now(), stopped_at = NULL
     WHERE worker_id = %(worker_id)s
)
SELECT id, claim_epoch FROM renewed
"""

# On shutdown: hand back what did not finish so another worker picks it up at once.
RELEASE = """
WITH released AS (
    UPDATE {schema}.workflow_executions
       SET status = 'enqueued', lease_expires = NULL, run_at = now(), updated_at = now()
     WHERE status = 'running' AND owner_id = %(worker_id)s
    RETURNING id, workflow_name
), woke AS (
    SELECT pg_notify(%(channel)s, name) FROM (SELECT DISTINCT workflow_name AS name FROM released) n
)
SELECT id FROM released, (SELECT count(*) FROM woke) w
"""


def heartbeat(
    conn: psycopg.Connection, schema: str, worker_id: str, lease: timedelta, execution_ids: Sequence[int]
) -> set[tuple[int, int]]:
    """Renew the leases ``worker_id`` holds on ``execution_ids``; returns the (execution_id, claim_epoch)
    pairs it still holds."""
    rows = conn.execute(
        render(HEARTBEAT, schema), {"worker_id": worker_id, "lease": lease, "ids": list(execution_ids)}
    ).fetchall()
    return {(row[0], row[1]) for row in rows}


def release_all(conn: psycopg.Connection, schema: str, worker_id: str) -> list[int]:
    """Re-enqueue every execution ``worker_id`` still runs; returns their ids."""
    rows = conn.execute(render(RELEASE, schema), {"worker_id": worker_id, "channel": notify_channel(schema)})
    return [row[0] for row in rows]
