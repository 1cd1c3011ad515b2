-- cancel_execution(): its current definition (created by migration 0002, last redefined by 0005,
-- and by the file since 0030: a paused execution is cancelled too).
--
-- An operator cancels a live execution, audited. A running worker sees the cancel at its
-- next step boundary: its fenced writes fail; the attempt it had open is closed 'cancelled' by
-- the trigger execution_finished, in this transaction.
CREATE OR REPLACE FUNCTION {schema}.cancel_execution(p_execution_id bigint, p_by text, p_comment text)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    e workflow_executions%ROWTYPE;
BEGIN
    PERFORM 1 FROM workflow_waits
      WHERE execution_id = p_execution_id AND resolved_at IS NULL FOR UPDATE;
    SELECT * INTO e FROM workflow_executions WHERE id = p_execution_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cannot cancel: no execution with id %', p_execution_id
            USING ERRCODE = 'KS404', HINT = 'List executions with: kestrel-console list';
    END IF;
    IF e.status NOT IN ('enqueued', 'running', 'waiting', 'paused') THEN
        RAISE EXCEPTION 'cannot cancel: execution % already finished (%)', p_execution_id, e.status
            USING ERRCODE = 'KS409',
                  HINT = 'Only enqueued, running, waiting or paused executions can be cancelled.';
    END IF;
    -- A first claim is the fence of its first step for a moment (FIRST_STEP_FRESH_S in
    -- workflow/context.py): a cancel of a claim younger than that commits only once the moment
    -- is over, so every step started under it started before the cancel committed.
    IF e.status = 'running' AND e.claims = 1
       AND clock_timestamp() < e.started_at + interval '250 milliseconds' THEN
        PERFORM pg_sleep(extract(epoch FROM e.started_at + interval '250 milliseconds' - clock_timestamp()));
    END IF;
    -- A running worker sees the cancel at its next step boundary: its fenced writes fail.
    UPDATE workflow_executions
       SET status = 'cancelled', lease_expires = NULL, updated_at = now(), finished_at = now(),
           error = coalesce(p_comment, 'cancelled by ' || p_by)
     WHERE id = p_execution_id;
    UPDATE workflow_waits SET resolved_at = now()
     WHERE execution_id = p_execution_id AND resolved_at IS NULL;
    INSERT INTO operator_actions (actor, db_user, action, execution_id, comment, from_status)
    VALUES (p_by, session_user, 'cancel', p_execution_id, p_comment, e.status);
    RETURN e.status;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.cancel_execution(bigint, text, text) FROM PUBLIC;
