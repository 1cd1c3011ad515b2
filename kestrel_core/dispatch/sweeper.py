"""Sweeper: leaderless and idempotent, run by every worker.

It re-enqueues executions whose lease lapsed (their worker died or froze), and wakes waits that
are due: sleeps whose ``wake_at`` passed and approvals, child and event waits whose deadline
passed (``timed_out``); about once a minute it folds the counters of finished executions.
Workflow deadlines are swept by ``deadlines.sweep_deadlines``. Decided approvals need no sweep:
the decision re-enqueues at once.
SKIP LOCKED lets many workers sweep at once without blocking each other.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import timedelta

import psycopg

from kestrel_core.db.statements import notify_channel, one_row, render

# Expired leases: all of them (``owner`` NULL), or those of one owner, read through the
# running rows' owner index (the one index over running rows: migration 0016), so that the walk
# crosses that owner's entries only (LeaseSweep). An execution its worker found locked by
# another session at its last beat (``workers.busy``, lease.py) is left alone while that worker
# beats within its lease: the lock, not the worker, kept its lease from being renewed, and the
# next beat after the lock renews it.
log = logging.getLogger("kestrel.sweeper")

SWEEP_LEASES = """
WITH expired AS (
    SELECT e.id FROM {schema}.workflow_executions e, {async_commit}
     WHERE e.status = 'running' AND e.lease_expires < now()
       AND (%(owner)s::text IS NULL OR e.owner_id = %(owner)s::text)
       AND NOT EXISTS (
             SELECT 1 FROM {schema}.workers w
              WHERE w.worker_id = e.owner_id AND e.id = ANY(w.busy)
                AND w.stopped_at IS NULL AND w.last_heartbeat + w.lease > now())
     ORDER BY e.lease_expires
     LIMIT %(batch)s
     FOR UPDATE OF e SKIP LOCKED
), swept AS (
    UPDATE {schema}.workflow_executions e
       SET status = 'enqueued', lease_expires = NULL, run_at = now(), updated_at = now()
      FROM expired
     WHERE e.id = expired.id
    RETURNING e.id, e.workflow_name
), closed AS (
    -- Its worker's writes are fenced out from now on: the attempt it had open is closed here
    -- (lifecycle: sweep-lapsed).
    UPDATE {schema}.step_attempts a SET outcome = 'abandoned', finished_at = greatest(now(), a.started_at)
     WHERE a.execution_id = ANY(ARRAY(SELECT s.id FROM swept s)) AND a.outcome = 'running'
), woke AS (
    SELECT pg_notify(%(channel)s, name) FROM (SELECT DISTINCT workflow_name AS name FROM swept) n
)
SELECT id FROM swept, (SELECT count(*) FROM woke) w
"""
# The workers that stopped beating (or stopped) within LOOK_BACK, oldest beat first: whose
# executions a sweep by owner looks at. A worker row without a lease (written by code older
# than migration 0023) counts as dead a minute after its last beat.
DEAD_OWNERS = """
SELECT w.worker_id FROM {schema}.workers w
 WHERE w.last_heartbeat > now() - %(look_back)s
   AND (w.stopped_at IS NOT NULL OR w.last_heartbeat + coalesce(w.lease, interval '1 minute') < now())
 ORDER BY w.last_heartbeat
"""

# The function (migration 0013) resolves due waits, checkpoints each wake-up (an approval's
# as timed out) and re-enqueues their executions: SECURITY DEFINER, so that the worker role
# needs no right to write a decision itself.
SWEEP_WAITS = "SELECT id FROM {schema}.sweep_waits(%(batch)s) AS id"


# The counters of finished executions, folded (function file fold_finished_counts): every
# block of ids but the ``keep`` newest goes into one row per (workflow, status), so that the
# console's sums read a few hundred rows at any history size, not one per 1,024 executions.
FOLD_COUNTS = "SELECT {schema}.fold_finished_counts(%(keep)s)"
FOLD_KEEP_BLOCKS = 64
FOLD_EVERY_S = 60.0


def fold_counts(conn: psycopg.Connection, schema: str, keep: int = FOLD_KEEP_BLOCKS) -> int:
    """Fold the counter rows of old id blocks; returns how many rows were folded."""
    row = conn.execute(render(FOLD_COUNTS, schema), {"keep": keep}).fetchone()
    return int(one_row(row, "FOLD_COUNTS")[0])


# The dashboard's activity per closed minute (function file fold_activity): recorded once,
# with the counters' fold, so that a refresh reads the last minutes live, not the 15-minute
# window. A minute is recorded once it closed ACTIVITY_SETTLE_S ago (the transactions that
# started in it have committed by then); a day of minutes is kept.
FOLD_ACTIVITY = "SELECT {schema}.fold_activity(%(settle)s, %(lookback)s, %(keep)s)"
ACTIVITY_SETTLE_S = 60
ACTIVITY_LOOKBACK_MIN = 60
ACTIVITY_KEEP_MIN = 24 * 60


def fold_activity(
    conn: psycopg.Connection,
    schema: str,
    settle_s: int = ACTIVITY_SETTLE_S,
    lookback_min: int = ACTIVITY_LOOKBACK_MIN,
    keep_min: int = ACTIVITY_KEEP_MIN,
) -> int:
    """Record the activity counts of the minutes closed since the last call; returns how many."""
    params = {"settle": settle_s, "lookback": lookback_min, "keep": keep_min}
    row = conn.execute(render(FOLD_ACTIVITY, schema), params).fetchone()
    return int(one_row(row, "FOLD_ACTIVITY")[0])


def sweep_leases(conn: psycopg.Connection, schema: str, batch: int = 500, owner: str | None = None) -> list[int]:
    """Re-enqueue running executions whose lease lapsed (of ``owner`` alone, if given); returns
    their ids."""
    params = {"batch": batch, "channel": notify_channel(schema), "owner": owner}
    rows = conn.execute(render(SWEEP_LEASES, schema), params)
    return [row[0] for row in rows]


# While a full lease sweep is cancelled by the server (a statement_timeout shorter than its walk
# through the dead index entries a long hold left: every claim of every worker leaves one),
# the sweep goes owner by owner through the workers that stopped beating (DEAD_OWNERS): each
# walk crosses the entries of one dead worker only, which stopped growing when it died. A full
# sweep is tried again after FULL_RETRY_S, doubling per failure up to FULL_RETRY_MAX_S. Not
# reached meanwhile: an execution whose lease lapsed while its worker still beats (the worker
# gave up on it after a failed write), until a full sweep succeeds.
# A walk by owner must go through the owner index, its cost bounded by that owner's entries:
# never a scan of the table, which the planner may pick when its statistics predate the hold
# (and a plan the setting prices that high is not worth compiling).
BY_OWNER_PLAN = "SELECT set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true)"
FULL_RETRY_S = 5.0
FULL_RETRY_MAX_S = 60.0
LOOK_BACK = timedelta(days=1)


@dataclass
class LeaseSweep:
    """One worker's lease sweep: full while the server lets it finish, else by dead owner
    (above). ``run(conn, schema)`` sweeps once and returns the ids it re-enqueued."""

    batch: int = 500
    failed_full: int = 0
    full_again_at: float = float("-inf")  # time.monotonic()
    next_owner: int = 0  # where the round of dead owners is
    by_owner: bool = False  # full sweeps cancelled: sweeping by owner

    def run(self, conn: psycopg.Connection, schema: str, budget_s: float = 0.05) -> list[int]:
        """Sweep: a full walk, or dead owners one by one for up to ``budget_s``."""
        now = time.monotonic()
        if now >= self.full_again_at:
            try:
                full = sweep_leases(conn, schema, self.batch)
            except psycopg.errors.QueryCanceled:
                self.failed_full += 1
                self.full_again_at = time.monotonic() + min(
                    FULL_RETRY_MAX_S, FULL_RETRY_S * 2 ** (self.failed_full - 1)
                )
                if not self.by_owner:
                    log.warning(
                        "event=lease_sweep_cancelled took_s=%.3f (sweeping the workers that stopped beating,"
                        " one by one)",
                        time.monotonic() - now,
                    )
                self.by_owner = True
                return []
            self.failed_full, self.by_owner = 0, False
            return full
        owners = [row[0] for row in conn.execute(render(DEAD_OWNERS, schema), {"look_back": LOOK_BACK})]
        swept: list[int] = []
        deadline = now + budget_s
        for _ in range(len(owners)):
            if time.monotonic() >= deadline:
                break
            owner = owners[self.next_owner % len(owners)]
            self.next_owner += 1
            try:
                with conn.transaction():
                    conn.execute(BY_OWNER_PLAN)
                    swept += sweep_leases(conn, schema, self.batch, owner)
            except psycopg.errors.QueryCanceled:
                log.warning("event=lease_sweep_cancelled owner=%s (the next owner)", owner)
        return swept


def sweep_waits(conn: psycopg.Connection, schema: str, batch: int = 500) -> list[int]:
    """Resolve due sleeps and timed-out approvals and re-enqueue them; returns execution ids."""
    rows = conn.execute(render(SWEEP_WAITS, schema), {"batch": batch})
    return [row[0] for row in rows]


# Ready rows whose execution is not enqueued as they say (any more): a claim that locked one
# and rolled back while a cancel or requeue went on, hand-written SQL, or code older than
# migration 0015 left running across the upgrade. A claim that meets one deletes it, but one
# no claim meets (a workflow no worker serves, a future run_at) would linger, and the console
# counts enqueued executions from this table (issue 22). Locked rows are left to the claim
# holding them. O(ready rows), once a minute, off the claim's path.
DROP_STALE_READY = """
DELETE FROM {schema}.executions_ready r
 WHERE r.ctid = ANY(ARRAY(
        SELECT s.ctid FROM {schema}.executions_ready s
         WHERE NOT EXISTS (
               SELECT 1 FROM {schema}.workflow_executions e
                WHERE e.id = s.id AND e.status = 'enqueued'
                  AND -e.priority::bigint = s.neg_priority AND e.run_at = s.run_at
                  AND e.workflow_name = s.workflow_name AND e.queue = s.queue
                  AND e.version IS NOT DISTINCT FROM s.version
                  AND e.concurrency_key IS NOT DISTINCT FROM s.concurrency_key)
           FOR UPDATE SKIP LOCKED))
"""


def drop_stale_ready(conn: psycopg.Connection, schema: str) -> int:
    """Delete the ready rows whose execution is no longer enqueued as they say; returns how many."""
    return conn.execute(render(DROP_STALE_READY, schema)).rowcount


# The history's id ranges ahead of the id sequence (function file ensure_partitions,
# migration 0022): each worker makes sure of them once a minute, so that no insert finds its
# range missing, with no superuser and no scheduler outside. A lock not had within the
# function's lock_timeout raises LockNotAvailable: the next minute tries again.
ENSURE_PARTITIONS = "SELECT {schema}.ensure_partitions()"


def ensure_partitions(conn: psycopg.Connection, schema: str) -> int:
    """Create the id ranges missing ahead; returns how many were created."""
    row = conn.execute(render(ENSURE_PARTITIONS, schema)).fetchone()
    return int(one_row(row, "ENSURE_PARTITIONS")[0])
