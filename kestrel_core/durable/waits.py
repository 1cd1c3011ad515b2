"""Parking an execution on a durable sleep or an approval gate.

One fenced statement writes the ``workflow_waits`` row and flips the execution to ``waiting``
(releasing its lease). Nothing waits in memory: the sweeper or a decision re-enqueues it, and
the replay finds the wait's checkpoint.
"""

from __future__ import annotations

from datetime import timedelta

import psycopg
from psycopg.types.json import Jsonb

from kestrel_core.db.statements import render
from kestrel_core.durable.checkpoint import Fence

PARK = """
WITH fence AS (
    {lock_if_claim_is_current}
), wait AS (
    INSERT INTO {schema}.workflow_waits (execution_id, step_id, kind, wake_at, details, seq)
    SELECT id, %(step)s, %(kind)s, now() + %(after)s::interval, %(details)s, %(position)s FROM fence
    -- A replay after a cancel + requeue reopens the same gate or sleep (same deadline).
    ON CONFLICT (execution_id, step_id) DO UPDATE SET resolved_at = NULL
     WHERE {schema}.workflow_waits.decision IS NULL
), parked AS (
    UPDATE {schema}.workflow_executions
       SET status = 'waiting', lease_expires = NULL, updated_at = now()
     WHERE id IN (SELECT id FROM fence)
)
SELECT EXISTS (SELECT 1 FROM fence)
"""


def park(
    conn: psycopg.Connection,
    schema: str,
    at: Fence,
    *,
    kind: str,
    after: timedelta | None,
    details: Jsonb | None = None,
) -> bool:
    """Create the wait and set the execution ``waiting``; False when the claim is no longer ours."""
    row = conn.execute(render(PARK, schema), at.params(kind=kind, after=after, details=details)).fetchone()
    return bool(row and row[0])
