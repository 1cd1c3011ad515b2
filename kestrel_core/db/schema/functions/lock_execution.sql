-- lock_execution(): its current definition (created by its file, for the operator functions:
-- lock_live_execution, resume_execution, requeue_execution, fork_execution, decide_approval).
--
-- An operator's action on one execution locks its row (FOR UPDATE, or FOR SHARE when
-- p_for_share: a fork only reads its origin), which must exist: else refused with KS404 as
-- 'cannot <p_verb>: no execution with id ...'. The caller locks what comes first in the lock
-- order (the execution's waits) before it calls this. Called only by those SECURITY DEFINER
-- functions, as their owner: no role needs EXECUTE on it. Returns the locked row.
CREATE OR REPLACE FUNCTION {schema}.lock_execution(p_execution_id bigint, p_verb text, p_for_share boolean)
RETURNS {schema}.workflow_executions
LANGUAGE plpgsql SET search_path = {schema}, pg_temp AS $$
DECLARE
    e workflow_executions%ROWTYPE;
BEGIN
    IF p_for_share THEN
        SELECT * INTO e FROM workflow_executions WHERE id = p_execution_id FOR SHARE;
    ELSE
        SELECT * INTO e FROM workflow_executions WHERE id = p_execution_id FOR UPDATE;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cannot %: no execution with id %', p_verb, p_execution_id
            USING ERRCODE = 'KS404', HINT = 'List executions with: kestrel-console list';
    END IF;
    RETURN e;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.lock_execution(bigint, text, boolean) FROM PUBLIC;
