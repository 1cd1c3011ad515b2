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
from kestrel_core.db.sql_files import statements_beside
from kestrel_core.db.statements import render
from kestrel_core.dispatch.enqueue import MAX_DELAY

SQL = statements_beside(__file__)


def stamp(
    conn: psycopg.Connection, schema: str, *, execution_id: int, worker_id: str, claim_epoch: int, timeout: timedelta
) -> bool:
    """Set the execution's deadline if it has none yet (fenced by the claim); whether the
    claim is still current and its deadline not passed (else nothing may run under it)."""
    row = conn.execute(
        render(SQL.stamp, schema),
        {"eid": execution_id, "worker_id": worker_id, "claim_epoch": claim_epoch, "timeout": timeout},
    ).fetchone()
    return bool(row and row[0])


def sweep_deadlines(conn: psycopg.Connection, schema: str, batch: int = 500) -> list[int]:
    """End live executions past their deadline as error; returns their ids."""
    with conn.transaction():
        parked = [row[0] for row in conn.execute(render(SQL.lock_due_waits, schema), {"batch": batch})]
        rows = conn.execute(render(SQL.sweep_deadlines, schema), {"batch": batch, "parked": parked})
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
