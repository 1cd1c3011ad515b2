-- dispatch/deadlines.py: Workflow deadlines, measured from the execution's start.

-- name: stamp
-- Fenced, and a fence itself: it says whether the claim is current (the row locked meanwhile,
-- so a cancel or a sweep either waits for it or was seen) and the deadline not passed yet.
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
                false);

-- name: lock_due_waits
-- Lock order everywhere: wait rows, then executions (sweeper.py, the operator functions,
-- send_event). A parked execution's open waits are locked first, in their own statement; one
-- whose wait someone else holds (being decided, sent to, woken) is left for the next sweep.
SELECT w.execution_id FROM {schema}.workflow_waits w
  JOIN {schema}.workflow_executions e ON e.id = w.execution_id
 WHERE e.deadline_at <= now() AND e.status = 'waiting' AND w.resolved_at IS NULL
 ORDER BY e.deadline_at
 LIMIT %(batch)s
   FOR UPDATE OF w SKIP LOCKED;

-- name: sweep_deadlines
-- The trigger execution_finished (migration 0008) closes the waits and wakes a waiting parent;
-- an attempt a running execution had open is closed here (abandoned: its worker is fenced out).
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
SELECT id FROM ended;
