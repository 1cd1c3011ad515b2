-- durable/children.py: Child workflows: start one durably and once, park until children finish.

-- name: start_child
-- Placed like any enqueue (enqueue.sql's place_one, pasted in as {place_one}: the given queue, else
-- the workflow's bound queue, else the default; priority defaults to the queue's; a keyed child
-- marks its queue keyed). A child already started (its engine key taken) is skipped by the key
-- trigger (execution_key_taken) and found in execution_keys.
{place_one}
, fence AS (
    {lock_if_claim_is_current}
), child AS (
    INSERT INTO {schema}.workflow_executions
           (workflow_name, input, engine_key, run_at, priority, queue, concurrency_key, version,
            parent_id, trace_context)
    SELECT %(name)s, %(input)s, %(key)s, coalesce(%(run_at)s, now()), p.priority, p.queue, %(ckey)s,
           %(version)s, fence.id, %(trace)s
      FROM fence, placed p
    RETURNING id
), found AS (
    SELECT id FROM child
    UNION ALL
    SELECT execution_id FROM {schema}.execution_keys
     WHERE key = %(key)s AND NOT EXISTS (SELECT 1 FROM child)
       AND EXISTS (SELECT 1 FROM fence)
), checkpoint AS (
    INSERT INTO {schema}.operation_outputs (execution_id, step_id, output, owner_id, seq)
    SELECT %(eid)s, %(step)s,
           jsonb_build_object('child_id', found.id, 'workflow', %(name)s::text), %(worker_id)s, %(position)s
      FROM found
    ON CONFLICT DO NOTHING
), woke AS (
    SELECT pg_notify(%(channel)s, %(name)s) FROM child
)
SELECT EXISTS (SELECT 1 FROM fence), (SELECT id FROM found), (SELECT count(*) FROM woke);

-- name: children
SELECT id, workflow_name, status, output, error FROM {schema}.workflow_executions
 WHERE parent_id = %(eid)s;

-- name: park_on_children
-- Park on the children still live once locked; nothing is written when none is. Only this
-- execution's own children count: only their completion wakes it.
WITH fence AS (
    {lock_if_claim_is_current}
), live AS (
    SELECT id FROM {schema}.workflow_executions
     WHERE id = ANY(%(ids)s) AND parent_id = %(eid)s AND status IN {live_statuses}
       AND EXISTS (SELECT 1 FROM fence)
     ORDER BY id
       FOR SHARE
), wait AS (
    INSERT INTO {schema}.workflow_waits (execution_id, step_id, kind, wake_at, details, seq)
    SELECT %(eid)s, %(step)s, 'child', now() + %(after)s::interval, %(details)s, %(position)s
     WHERE EXISTS (SELECT 1 FROM live)
    ON CONFLICT (execution_id, step_id) DO UPDATE SET resolved_at = NULL, details = EXCLUDED.details
     WHERE {schema}.workflow_waits.decision IS NULL
), parked AS (
    UPDATE {schema}.workflow_executions
       SET status = 'waiting', lease_expires = NULL, updated_at = now()
     WHERE id IN (SELECT id FROM fence) AND EXISTS (SELECT 1 FROM live)
)
SELECT EXISTS (SELECT 1 FROM fence), EXISTS (SELECT 1 FROM live);
