-- cancel_execution(): its current definition (created by migration 0002, last redefined by 0005,
-- and by the file since 0030: a paused execution is cancelled too; its locks and checks in
-- lock_live_execution).
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
    e := lock_live_execution(p_execution_id, 'cancel',
                             'Only enqueued, running, waiting or paused executions can be cancelled.');
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
