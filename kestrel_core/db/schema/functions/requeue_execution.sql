-- requeue_execution(): its current definition (created by migration 0002, last redefined by 0009).
--
-- An operator re-enqueues an execution that errored, was cancelled or holds an expired
-- lease, audited. Replay keeps every successful checkpoint. An attempt an expired lease left
-- open is closed 'abandoned' (its worker's writes are fenced out from now on).
CREATE OR REPLACE FUNCTION {schema}.requeue_execution(p_execution_id bigint, p_by text, p_comment text)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    e workflow_executions%ROWTYPE;
BEGIN
    e := lock_execution(p_execution_id, 'requeue', false);
    IF e.status = 'running' AND e.lease_expires >= now() THEN
        RAISE EXCEPTION 'cannot requeue: execution % is running on % (lease live until %)',
            p_execution_id, e.owner_id, to_char(e.lease_expires, 'YYYY-MM-DD HH24:MI:SS TZ')
            USING ERRCODE = 'KS409',
                  HINT = 'Cancel it first, or wait for its lease to lapse if the worker is stuck.';
    ELSIF e.status = 'paused' THEN
        RAISE EXCEPTION 'cannot requeue: execution % is paused', p_execution_id
            USING ERRCODE = 'KS409', HINT = 'Let it go on with: kestrel-console resume ' || p_execution_id;
    ELSIF e.status IN ('enqueued', 'waiting', 'success') THEN
        RAISE EXCEPTION 'cannot requeue: execution % is %', p_execution_id, e.status
            USING ERRCODE = 'KS409',
                  HINT = 'Only executions that errored, were cancelled, or hold an expired lease can be re-enqueued.';
    END IF;
    -- Replay keeps every successful checkpoint; steps that failed for good run again.
    DELETE FROM operation_outputs WHERE execution_id = p_execution_id AND error IS NOT NULL;
    UPDATE step_attempts SET outcome = 'abandoned', finished_at = greatest(now(), started_at)
     WHERE execution_id = p_execution_id AND outcome = 'running';
    UPDATE workflow_executions
       SET status = 'enqueued', run_at = now(), updated_at = now(), owner_id = NULL,
           lease_expires = NULL, finished_at = NULL, error = NULL, output = NULL
     WHERE id = p_execution_id;
    INSERT INTO operator_actions (actor, db_user, action, execution_id, comment, from_status)
    VALUES (p_by, session_user, 'requeue', p_execution_id, p_comment, e.status);
    PERFORM pg_notify({schema}.notify_channel(), e.workflow_name);
    RETURN e.status;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.requeue_execution(bigint, text, text) FROM PUBLIC;
