"""Workflow deadlines: ``@app.workflow(timeout=...)``, measured from the execution's start.

The worker stamps ``deadline_at`` under its claim when it starts a workflow that has a
timeout (the first claim: ``started_at + timeout``; after a requeue, which clears it, from
that claim). The sweeper, leaderless like the other sweeps (SKIP LOCKED), ends every live execution past its
deadline as ``error``, whether it is enqueued, running or parked; the trigger
``execution_finished`` closes its waits, and a worker still running it is fenced out at its
next step boundary.
"""

from __future__ import annotations

from datetime import timedelta

import psycopg

from kestrel_core.base.errors import InvalidArgument
from kestrel_core.db.statements import render
from kestrel_core.dispatch.enqueue import MAX_DELAY

# Fenced, and a fence itself: it says whether the claim is current (the row locked meanwhile,
# so a cancel or a sweep either waits for it or was seen) and the deadline not passed yet.
STAMP = """
WITH fence AS (
    {lock_if_claim_is_current}
), stamped AS (
    UPDATE {schema}.workflow_executions e
       SET timeout = %(timeout)s,
           deadline_at = CASE WHEN e.claims = 1 THEN e.started_at ELSE now() END + %(timeout)s
      FROM fence
     WHERE e.id = fence.id AND e.deadline_at IS NULL
    RETURNING e.deadline_at
)
SELECT coalesce((SELECT deadline_at > now() FROM stamped),
                (SELECT x.deadline_at IS NULL OR x.deadline_at > now()
                   FROM {schema}.workflow_executions x JOIN fence ON x.id = fence.id),
                false)
"""

# Lock order everywhere: wait rows, then executions (sweeper.py, the operator functions,
# send_event). A parked execution's open waits are locked first, in their own statement; one
# whose wait someone else holds (being decided, sent to, woken) is left for the next sweep.
LOCK_DUE_WAITS = """
SELECT w.execution_id FROM {schema}.workflow_waits w
  JOIN {schema}.workflow_executions e ON e.id = w.execution_id
 WHERE e.deadline_at <= now() AND e.status = 'waiting' AND w.resolved_at IS NULL
 ORDER BY e.deadline_at
 LIMIT %(batch)s
   FOR UPDATE OF w SKIP LOCKED
"""

# The trigger execution_finished (migration 0008) closes the waits and wakes a waiting parent;
# an attempt a running execution had open is closed here (abandoned: its worker is fenced out).
SWEEP_DEADLINES = """
WITH due AS (
    SELECT id FROM {schema}.workflow_executions
     WHERE deadline_at <= now()
       AND (status IN ('enqueued', 'running') OR (status = 'waiting' AND id = ANY(%(parked)s)))
     ORDER BY deadline_at
     LIMIT %(batch)s
     FOR UPDATE SKIP LOCKED
), ended AS (
    UPDATE {schema}.workflow_executions e
       SET status = 'error', lease_expires = NULL, finished_at = now(), updated_at = now(),
           error = 'timed out after ' || trim_scale(extract(epoch FROM e.timeout))::text
                   || 's (deadline from start)'
      FROM due
     WHERE e.id = due.id
    RETURNING e.id
), closed AS (
    -- Its worker's writes are fenced out from now on: the attempt it had open is closed here
    -- (lifecycle: deadline).
    UPDATE {schema}.step_attempts a SET outcome = 'abandoned', finished_at = greatest(now(), a.started_at)
     WHERE a.execution_id = ANY(ARRAY(SELECT s.id FROM ended s)) AND a.outcome = 'running'
)
SELECT id FROM ended
"""


def stamp(
    conn: psycopg.Connection, schema: str, *, execution_id: int, worker_id: str, claim_epoch: int, timeout: timedelta
) -> bool:
    """Set the execution's deadline if it has none yet (fenced by the claim); whether the
    claim is still current and its deadline not passed (else nothing may run under it)."""
    row = conn.execute(
        render(STAMP, schema),
        {"eid": execution_id, "worker_id": worker_id, "claim_epoch": claim_epoch, "timeout": timeout},
    ).fetchone()
    return bool(row and row[0])


def sweep_deadlines(conn: psycopg.Connection, schema: str, batch: int = 500) -> list[int]:
    """End live executions past their deadline as error; returns their ids."""
    with conn.transaction():
        parked = [row[0] for row in conn.execute(render(LOCK_DUE_WAITS, schema), {"batch": batch})]
        rows = conn.execute(render(SWEEP_DEADLINES, schema), {"batch": batch, "parked": parked})
        return [row[0] for row in rows]


def checked_timeout(timeout: timedelta | float | None) -> timedelta | None:
    """A workflow's ``timeout`` (a timedelta, or seconds) as a timedelta, checked when it is
    registered: positive, and at most ``MAX_DELAY``, so that its deadline stays in the
    database's calendar (before, a longer one failed the deadline stamp of every claim, forever)."""
    if isinstance(timeout, (int, float)):
        timeout = timedelta(seconds=timeout)
    if timeout is not None and timeout <= timedelta(0):
        raise InvalidArgument("a workflow timeout must be positive")
    if timeout is not None and timeout > MAX_DELAY:
        raise InvalidArgument(f"a workflow timeout is at most {MAX_DELAY.days} days, not {timeout}")
    return timeout
