-- sweep_waits() as it was, a SQL function (migration 0013 to schema version 38): the oracle its PL/pgSQL successor is compared with in tests/core/test_fleet_review.py. Not applied by migrate.
--
-- The sweep of due waits (kestrel_core/sweeper.py), SECURITY DEFINER so that the worker role
-- needs no UPDATE on workflow_waits' decision columns: a timeout is written only here.
-- Lock order: wait rows first, then executions (as the operator functions do).
CREATE OR REPLACE FUNCTION {schema}.sweep_waits(p_batch integer) RETURNS SETOF bigint
LANGUAGE sql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
WITH due AS (
    SELECT execution_id, step_id FROM workflow_waits
     WHERE resolved_at IS NULL AND wake_at <= now()
     ORDER BY wake_at
     LIMIT least(greatest(p_batch, 1), 10000)
     FOR UPDATE SKIP LOCKED
), resolved AS (
    UPDATE workflow_waits w
       SET resolved_at = now(),
           decision = CASE WHEN w.kind = 'approval' THEN 'timed_out' END,
           decided_at = CASE WHEN w.kind = 'approval' THEN now() END
      FROM due
     WHERE w.execution_id = due.execution_id AND w.step_id = due.step_id
    RETURNING w.execution_id, w.step_id, w.kind, w.wake_at, w.created_at, w.details
), checkpointed AS (
    -- The wake-up is the wait's checkpoint: replay returns it and does not wait again.
    INSERT INTO operation_outputs (execution_id, step_id, output, started_at)
    SELECT execution_id, step_id,
           CASE kind WHEN 'approval'
                THEN jsonb_build_object('approved', false, 'by', NULL, 'comment', NULL,
                                        'timed_out', true, 'decided_at', now())
                WHEN 'sleep' THEN jsonb_build_object('slept_until', wake_at)
                -- a child or event wait whose timeout passed
                ELSE jsonb_build_object('timed_out', true, 'key', details -> 'key') END,
           created_at
      FROM resolved
    ON CONFLICT DO NOTHING
), woken AS (
    UPDATE workflow_executions e
       SET status = 'enqueued', run_at = now(), updated_at = now()
      FROM resolved
     WHERE e.id = resolved.execution_id AND e.status = 'waiting'
       -- an undecided gate holds its execution (guard_waiting_executions would refuse, and
       -- fail the whole batch): a sleep beside it resolves, the execution stays parked
       AND NOT EXISTS (SELECT 1 FROM workflow_waits g
                        WHERE g.execution_id = e.id AND g.kind = 'approval' AND g.resolved_at IS NULL
                          AND NOT EXISTS (SELECT 1 FROM resolved r
                                           WHERE r.execution_id = g.execution_id AND r.step_id = g.step_id))
    RETURNING e.id, e.workflow_name
), woke AS (
    SELECT pg_notify({schema}.notify_channel(), name) FROM (SELECT DISTINCT workflow_name AS name FROM woken) n
)
SELECT id FROM woken, (SELECT count(*) FROM woke) w
$$;
REVOKE EXECUTE ON FUNCTION {schema}.sweep_waits(integer) FROM PUBLIC;
