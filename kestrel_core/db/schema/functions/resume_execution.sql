-- resume_execution(): its current definition (created with migration 0030).
--
-- An operator lets a paused execution go on, audited: back to 'waiting' while one of its
-- waits is still open (its deadline unchanged), else to 'enqueued' (a wait that came due
-- while it was paused was checkpointed then: the replay passes it), where a worker replays it
-- from its checkpoints. An execution paused while running whose claim is still alive (its
-- worker still runs its code: a step was in flight; pause_execution kept the lease, the
-- heartbeat renews it, the worker clears it when it lets go) goes back to 'running' under that
-- same claim: its worker goes on from the step in flight, whose end it checkpoints, instead of
-- a new claim running that step a second time. Otherwise the attempt a pause let run on and
-- its worker has not closed yet is closed 'abandoned': from now on its writes are fenced out
-- (they need the execution running or paused under that claim). Returns the status it went to.
CREATE OR REPLACE FUNCTION {schema}.resume_execution(p_execution_id bigint, p_by text, p_comment text)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    e workflow_executions%ROWTYPE;
    open_waits integer;
    v_to text;
BEGIN
    -- The open waits locked first (the lock order of the sweeps and send_event): one resolved
    -- meanwhile is seen resolved, so the execution never goes back to waiting on none.
    SELECT count(*) INTO open_waits FROM (
        SELECT 1 FROM workflow_waits
         WHERE execution_id = p_execution_id AND resolved_at IS NULL FOR UPDATE) w;
    e := lock_execution(p_execution_id, 'resume', false);
    IF e.status <> 'paused' THEN
        RAISE EXCEPTION 'cannot resume: execution % is not paused (it is %)', p_execution_id, e.status
            USING ERRCODE = 'KS409', HINT = 'Only a paused execution can be resumed.';
    END IF;
    v_to := CASE WHEN e.owner_id IS NOT NULL AND e.lease_expires > now() THEN 'running'
                 WHEN open_waits > 0 THEN 'waiting' ELSE 'enqueued' END;
    UPDATE workflow_executions
       SET status = v_to, lease_expires = CASE WHEN v_to = 'running' THEN e.lease_expires END, updated_at = now()
     WHERE id = p_execution_id;
    IF v_to <> 'running' THEN
        UPDATE step_attempts SET outcome = 'abandoned', finished_at = greatest(now(), started_at)
         WHERE execution_id = p_execution_id AND outcome = 'running';
    END IF;
    INSERT INTO operator_actions (actor, db_user, action, execution_id, comment, from_status, details)
    VALUES (p_by, session_user, 'resume', p_execution_id, p_comment, e.status, jsonb_build_object('to', v_to));
    IF v_to = 'enqueued' THEN
        PERFORM pg_notify({schema}.notify_channel(), e.workflow_name);
    END IF;
    RETURN v_to;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.resume_execution(bigint, text, text) FROM PUBLIC;
