-- dispatch/lease.py: Leases: the heartbeat renews them, a stopping worker hands its executions back.

-- name: heartbeat
-- Renew the leases of the executions this worker is running and say which (id, claim_epoch) it
-- still holds: a row that is missing was swept, cancelled or reclaimed, and its thread must
-- stop at the next boundary. Only ids in flight are renewed: an execution the worker gave up
-- on (its database write failed) lets its lease lapse and is retried elsewhere.
--
-- A row another session holds locked (an operator's SELECT ... FOR UPDATE, a cancel or a step
-- boundary in flight) is skipped, never waited for: one lock must not stall the renewal of
-- every other lease. It is still held as far as this statement's snapshot shows
-- (``busy``), so the worker does not give it up; its id goes into the worker's row, and the
-- lease sweep leaves it alone while this worker beats (sweeper.py), until a later beat renews
-- it. The worker's row itself is skipped likewise when locked.
--
-- A running execution an operator paused keeps its claim alive while this worker still runs its
-- code (a step in flight): its lease is renewed too, but it is not held (the worker stops at its
-- next boundary, and lets go: let_go). A resume meanwhile gives it back to this claim
-- (resume_execution): the step in flight is checkpointed, not run again by a new claim.
WITH mine AS (
    SELECT id FROM {schema}.workflow_executions
     WHERE status IN ('running', 'paused') AND owner_id = %(worker_id)s AND id = ANY(%(ids)s)
       AND (status = 'running' OR lease_expires IS NOT NULL)
       FOR NO KEY UPDATE SKIP LOCKED
), renewed AS (
    UPDATE {schema}.workflow_executions e SET lease_expires = now() + %(lease)s
      FROM {async_commit}, mine
     WHERE e.id = mine.id
    RETURNING e.id, e.claim_epoch, e.status
), held AS (
    SELECT id, claim_epoch FROM {schema}.workflow_executions
     WHERE status = 'running' AND owner_id = %(worker_id)s AND id = ANY(%(ids)s)
), busy AS (
    SELECT h.id, h.claim_epoch FROM held h
     WHERE NOT EXISTS (SELECT 1 FROM renewed r WHERE r.id = h.id AND r.status = 'running')
), beat AS (
    UPDATE {schema}.workers SET last_heartbeat = now(), stopped_at = NULL, lease = %(lease)s,
           busy = ARRAY(SELECT id FROM busy ORDER BY id), free_slots = %(free_slots)s
     WHERE ctid = ANY(ARRAY(SELECT ctid FROM {schema}.workers
                             WHERE worker_id = %(worker_id)s FOR NO KEY UPDATE SKIP LOCKED))
)
SELECT id, claim_epoch, true FROM renewed WHERE status = 'running'
 UNION ALL
SELECT id, claim_epoch, false FROM busy;

-- name: release
-- On shutdown: hand back what did not finish so another worker picks it up at once; the
-- attempts it had open are closed (lifecycle: release) and workers woken ({abandon_and_wake}).
-- A row another session holds locked (an operator's FOR UPDATE, a cancel under way) is skipped,
-- not waited for: the others go back at once, it waits out its lease and is swept. Rows are
-- named by id, never by ctid: the table is partitioned, and a ctid names a row in every range.
WITH let_go AS (
    UPDATE {schema}.workflow_executions SET lease_expires = NULL
     WHERE id = ANY(ARRAY(SELECT id FROM {schema}.workflow_executions
                           WHERE status = 'paused' AND owner_id = %(worker_id)s AND lease_expires IS NOT NULL
                             FOR NO KEY UPDATE SKIP LOCKED))
       AND status = 'paused' AND owner_id = %(worker_id)s
), handed_back AS (
    UPDATE {schema}.workflow_executions
       SET status = 'enqueued', lease_expires = NULL, run_at = now(), updated_at = now()
     WHERE id = ANY(ARRAY(SELECT id FROM {schema}.workflow_executions
                           WHERE status = 'running' AND owner_id = %(worker_id)s
                             FOR NO KEY UPDATE SKIP LOCKED))
       AND status = 'running' AND owner_id = %(worker_id)s
    RETURNING id, workflow_name
), {abandon_and_wake};

-- name: let_go
-- A claim that stopped running an execution an operator paused lets go of it: its lease cleared,
-- so a resume sends it to be claimed afresh (resume_execution) instead of back to this claim.
UPDATE {schema}.workflow_executions SET lease_expires = NULL
 WHERE id = %(eid)s AND owner_id = %(worker_id)s AND claim_epoch = %(claim_epoch)s
   AND status = 'paused' AND lease_expires IS NOT NULL;

-- name: in_bounded_transaction
-- The bounds of a heartbeat or a stop's release, set for its transaction alone, where a
-- session setting does not hold (through PgBouncer, transaction pooling: a SET lands on
-- whichever server connection the bouncer picked): lock_timeout, so that a lock the statement
-- cannot skip (a partition's ACCESS EXCLUSIVE lock: a drop, a detach; a LOCK TABLE) is given up
-- on, not waited for as long as it is held (a stop that cannot release leaves the leases to
-- lapse and be swept); and an idle-in-transaction bound, so that a client freezing before its
-- COMMIT holds its rows' locks no longer.
SELECT set_config('lock_timeout', %(ms)s, true), set_config('idle_in_transaction_session_timeout', %(ms)s, true);
