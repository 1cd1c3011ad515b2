-- durable/waits.py: Parking an execution on a durable sleep or an approval gate.

-- name: park
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
SELECT EXISTS (SELECT 1 FROM fence);
