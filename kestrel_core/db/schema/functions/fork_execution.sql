-- fork_execution(): its current definition (created with migration 0028).
--
-- An operator starts a new execution from a chosen step of a finished or waiting one, audited:
-- the new execution keeps the origin's checkpoints before that step (and their attempts, for
-- its timeline), and runs the step and everything after it again. Its input is the origin's
-- unless one is given; its code version the origin's unless one is given, and a version must
-- be served by a live worker (one that beat within 30 s), else nothing would ever run it. A
-- step after a decided approval gate or a child's start is refused (below).
-- Returns the new execution's id.
CREATE OR REPLACE FUNCTION {schema}.fork_execution(
    p_execution_id bigint, p_from_step text, p_input jsonb, p_input_given boolean,
    p_version text, p_by text, p_comment text
) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    e workflow_executions%ROWTYPE;
    from_seq integer;
    v_version text;
    new_id bigint;
BEGIN
    e := lock_execution(p_execution_id, 'fork', true);
    IF e.status IN ('enqueued', 'running') THEN
        RAISE EXCEPTION 'cannot fork: execution % is %', p_execution_id, e.status
            USING ERRCODE = 'KS409',
                  HINT = 'Fork a finished or waiting execution: cancel this one first, or wait until it stops.';
    END IF;
    SELECT seq INTO from_seq FROM operation_outputs
     WHERE execution_id = p_execution_id AND step_id = p_from_step;
    IF from_seq IS NULL THEN
        RAISE EXCEPTION 'cannot fork: execution % has no step % (only a step it reached can be forked from)',
            p_execution_id, quote_literal(p_from_step)
            USING ERRCODE = 'KS404', HINT = 'See its steps with: kestrel-console show ' || p_execution_id;
    END IF;
    -- A decision is made on one execution and audited there: a fork that kept a decided gate's
    -- checkpoint would replay a decision no one made on it (UnauditedDecision). Fork from the
    -- gate or before it instead: the gate is asked again.
    IF EXISTS (SELECT 1 FROM workflow_waits w
                 JOIN operation_outputs o ON o.execution_id = w.execution_id AND o.step_id = w.step_id
                WHERE w.execution_id = p_execution_id AND w.kind = 'approval' AND o.seq < from_seq) THEN
        RAISE EXCEPTION 'cannot fork: execution % passed an approval gate before step %', p_execution_id,
            quote_literal(p_from_step)
            USING ERRCODE = 'KS409',
                  HINT = 'Fork from the gate itself or a step before it: the gate is asked again.';
    END IF;
    -- A child belongs to the execution that started it (parent_id, its engine key): a fork that
    -- kept the start would wait for a child that is not its own. Fork from the start instead.
    IF EXISTS (SELECT 1 FROM workflow_executions c
                 JOIN operation_outputs o
                   ON o.execution_id = p_execution_id AND c.engine_key = 'child:' || p_execution_id || ':' || o.step_id
                WHERE c.parent_id = p_execution_id AND o.seq < from_seq) THEN
        RAISE EXCEPTION 'cannot fork: execution % started a child before step %', p_execution_id,
            quote_literal(p_from_step)
            USING ERRCODE = 'KS409',
                  HINT = 'Fork from the step that starts the child, or one before it: the fork starts its own.';
    END IF;
    v_version := coalesce(p_version, e.version);
    IF v_version IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM workers w, unnest(w.workflows, w.versions) AS r(name, version)
         WHERE w.stopped_at IS NULL AND w.last_heartbeat > clock_timestamp() - interval '30 seconds'
           AND r.name = e.workflow_name AND (r.version = v_version OR r.version = '')
    ) THEN
        RAISE EXCEPTION 'cannot fork: no live worker runs workflow % at version %',
            quote_literal(e.workflow_name), quote_literal(v_version)
            USING ERRCODE = 'KS409',
                  HINT = 'Start a worker with that code, or fork with another --version.';
    END IF;
    -- claims = 1: its first claim is not a first run (claim.py's first_run): it has checkpoints
    -- to replay.
    INSERT INTO workflow_executions (workflow_name, input, queue, priority, concurrency_key, version, timeout, claims)
    VALUES (e.workflow_name, CASE WHEN p_input_given THEN p_input ELSE e.input END, e.queue, e.priority,
            e.concurrency_key, v_version, e.timeout, 1)
    RETURNING id INTO new_id;
    INSERT INTO operation_outputs (execution_id, step_id, output, error, started_at, created_at, attempts,
                                   owner_id, seq, claim_epoch)
    SELECT new_id, step_id, output, error, started_at, created_at, attempts, owner_id, seq, 0
      FROM operation_outputs
     WHERE execution_id = p_execution_id AND seq < from_seq;
    INSERT INTO step_attempts (execution_id, step_id, attempt, owner_id, claim_epoch, started_at, finished_at,
                               outcome, error)
    -- (an attempt its origin still has open is not the fork's to run: it is copied abandoned)
    SELECT new_id, a.step_id, a.attempt, a.owner_id, 0, a.started_at,
           CASE WHEN a.outcome = 'running' THEN greatest(now(), a.started_at) ELSE a.finished_at END,
           CASE WHEN a.outcome = 'running' THEN 'abandoned' ELSE a.outcome END, a.error
      FROM step_attempts a
      JOIN operation_outputs o ON o.execution_id = a.execution_id AND o.step_id = a.step_id
     WHERE a.execution_id = p_execution_id AND o.seq < from_seq;
    INSERT INTO execution_forks (fork_id, origin_id, from_step) VALUES (new_id, p_execution_id, p_from_step);
    INSERT INTO operator_actions (actor, db_user, action, execution_id, step_id, comment, from_status, details)
    VALUES (p_by, session_user, 'fork', p_execution_id, p_from_step, p_comment, e.status,
            jsonb_build_object('fork_id', new_id, 'version', v_version, 'input_given', p_input_given));
    PERFORM pg_notify({schema}.notify_channel(), e.workflow_name);
    RETURN new_id;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.fork_execution(bigint, text, jsonb, boolean, text, text, text) FROM PUBLIC;
