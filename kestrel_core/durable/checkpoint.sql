-- durable/checkpoint.py: Checkpoints: loaded for a replay, and those that are not a step's.

-- name: load
-- On a replay: read every checkpoint once (this worker is the only writer while it holds the
-- claim, so the copy stays true), and close as abandoned any attempt an earlier claim left open
-- (a net: since schema version 34 the transition that ended that claim closed it). Fenced: only
-- while the claim is current (a late worker must not close the new claim's running attempts,
-- nor read checkpoints as if it still held the execution); the row is locked meanwhile, as a
-- boundary write locks it. No row at all: the claim is not current (nothing was closed); one
-- row of NULLs: it is, and there is no checkpoint yet. An approval gate's checkpoint comes
-- with its wait row's decision: only decide_approval and the sweep write that (the worker role
-- has no right to), so the replay trusts the checkpoint only where the decision backs it
-- (context.py).
WITH fence AS (
    {lock_if_claim_is_current}
), abandoned AS (
    UPDATE {schema}.step_attempts a
       SET outcome = 'abandoned', finished_at = clock_timestamp(),
           error = 'abandoned: its worker stopped before finishing (killed, lost its lease, or shut down)'
      FROM fence
     WHERE a.execution_id = fence.id AND a.outcome = 'running'
       AND (a.owner_id, a.claim_epoch) IS DISTINCT FROM (%(worker_id)s::text, %(claim_epoch)s::bigint)
)
SELECT o.step_id, o.output, o.error, o.attempts, o.seq, w.kind, w.decision, w.decided_by
  FROM fence LEFT JOIN {schema}.operation_outputs o ON o.execution_id = fence.id
  LEFT JOIN {schema}.workflow_waits w ON w.execution_id = o.execution_id AND w.step_id = o.step_id;

-- name: record
-- A checkpoint that is not a step's (a child started, children awaited): fenced, written once.
WITH fence AS (
    {lock_if_claim_is_current}
), checkpoint AS (
    INSERT INTO {schema}.operation_outputs (execution_id, step_id, output, error, owner_id, seq)
    SELECT id, %(step)s, %(output)s, %(error)s, %(worker_id)s, %(position)s FROM fence
    ON CONFLICT DO NOTHING
)
SELECT EXISTS (SELECT 1 FROM fence);

-- name: release
-- Hand one claim back (its runner thread died: worker.py): enqueued again at once, fenced.
WITH released AS (
    UPDATE {schema}.workflow_executions
       SET status = 'enqueued', lease_expires = NULL, run_at = now(), updated_at = now()
     WHERE {claim_is_current}
    RETURNING id, workflow_name
), closed AS (
    -- Its worker's writes are fenced out from now on: the attempt it had open is closed here
    -- (lifecycle: release).
    UPDATE {schema}.step_attempts a SET outcome = 'abandoned', finished_at = greatest(now(), a.started_at)
     WHERE a.execution_id = ANY(ARRAY(SELECT s.id FROM released s)) AND a.outcome = 'running'
)
SELECT pg_notify(%(channel)s, workflow_name) FROM released;
