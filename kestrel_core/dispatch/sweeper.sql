-- dispatch/sweeper.py: Sweeper: leaderless and idempotent, run by every worker.

-- name: sweep_leases
-- Expired leases: all of them (``owner`` NULL), or those of one owner, read through the
-- running rows' owner index (the one index over running rows: migration 0016), so that the walk
-- crosses that owner's entries only (LeaseSweep). An execution its worker found locked by
-- another session at its last beat (``workers.busy``, lease.py) is left alone while that worker
-- beats within its lease: the lock, not the worker, kept its lease from being renewed, and the
-- next beat after the lock renews it. The attempts they had open are closed (lifecycle:
-- sweep-lapsed) and workers woken ({abandon_and_wake}).
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
), handed_back AS (
    UPDATE {schema}.workflow_executions e
       SET status = 'enqueued', lease_expires = NULL, run_at = now(), updated_at = now()
      FROM expired
     WHERE e.id = expired.id
    RETURNING e.id, e.workflow_name
), {abandon_and_wake};

-- name: dead_owners
-- The workers that stopped beating (or stopped) within LOOK_BACK, oldest beat first: whose
-- executions a sweep by owner looks at. A worker row without a lease (written by code older
-- than migration 0023) counts as dead a minute after its last beat.
SELECT w.worker_id FROM {schema}.workers w
 WHERE w.last_heartbeat > now() - %(look_back)s
   AND (w.stopped_at IS NOT NULL OR w.last_heartbeat + coalesce(w.lease, interval '1 minute') < now())
 ORDER BY w.last_heartbeat;

-- name: sweep_waits
-- The function (migration 0013) resolves due waits, checkpoints each wake-up (an approval's
-- as timed out) and re-enqueues their executions: SECURITY DEFINER, so that the worker role
-- needs no right to write a decision itself.
SELECT id FROM {schema}.sweep_waits(%(batch)s) AS id;

-- name: fold_counts
-- The counters of finished executions, folded (function file fold_finished_counts): every
-- block of ids but the ``keep`` newest goes into one row per (workflow, status), so that the
-- console's sums read a few hundred rows at any history size, not one per 1,024 executions.
SELECT {schema}.fold_finished_counts(%(keep)s);

-- name: fold_activity
-- The dashboard's activity per closed minute (function file fold_activity): recorded once,
-- with the counters' fold, so that a refresh reads the last minutes live, not the 15-minute
-- window. A minute is recorded once it closed ACTIVITY_SETTLE_S ago (the transactions that
-- started in it have committed by then); a day of minutes is kept.
SELECT {schema}.fold_activity(%(settle)s, %(lookback)s, %(keep)s);

-- name: by_owner_plan
-- While a full lease sweep is cancelled by the server (a statement_timeout shorter than its walk
-- through the dead index entries a long hold left: every claim of every worker leaves one),
-- the sweep goes owner by owner through the workers that stopped beating (dead_owners): each
-- walk crosses the entries of one dead worker only, which stopped growing when it died. A full
-- sweep is tried again after FULL_RETRY_S, doubling per failure up to FULL_RETRY_MAX_S. Not
-- reached meanwhile: an execution whose lease lapsed while its worker still beats (the worker
-- gave up on it after a failed write), until a full sweep succeeds.
-- A walk by owner must go through the owner index, its cost bounded by that owner's entries:
-- never a scan of the table, which the planner may pick when its statistics predate the hold
-- (and a plan the setting prices that high is not worth compiling).
SELECT set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true);

-- name: drop_stale_ready
-- Ready rows whose execution is not enqueued as they say (any more): a claim that locked one
-- and rolled back while a cancel or requeue went on, hand-written SQL, or code older than
-- migration 0015 left running across the upgrade. A claim that meets one deletes it, but one
-- no claim meets (a workflow no worker serves, a future run_at) would linger, and the console
-- counts enqueued executions from this table. Locked rows are left to the claim
-- holding them. O(ready rows), once a minute, off the claim's path.
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
           FOR UPDATE SKIP LOCKED));

-- name: ensure_partitions
-- The history's id ranges ahead of the id sequence (function file ensure_partitions,
-- migration 0022): each worker makes sure of them once a minute, so that no insert finds its
-- range missing, with no superuser and no scheduler outside. A lock not had within the
-- function's lock_timeout raises LockNotAvailable: the next minute tries again.
SELECT {schema}.ensure_partitions();
