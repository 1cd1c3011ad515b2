-- lock_live_execution(): its current definition (created by its file, for cancel_execution
-- and pause_execution).
--
-- An operator's action on a live execution starts here: its open waits are locked, then its
-- row (the lock order of the sweeps and send_event), which must exist (KS404: lock_execution)
-- and be live (KS409, with the caller's hint). A first claim is the fence of its first step
-- for a moment (FIRST_STEP_FRESH_S in workflow/context.py): an action on a claim younger than
-- that commits only once the moment is over, so every step started under it started before
-- the action committed. Called only by those SECURITY DEFINER functions, as their owner: no role needs
-- EXECUTE on it. Returns the locked row.
CREATE OR REPLACE FUNCTION {schema}.lock_live_execution(p_execution_id bigint, p_verb text, p_finished_hint text)
RETURNS {schema}.workflow_executions
LANGUAGE plpgsql SET search_path = {schema}, pg_temp AS $$
DECLARE
    e workflow_executions%ROWTYPE;
BEGIN
    PERFORM 1 FROM workflow_waits
      WHERE execution_id = p_execution_id AND resolved_at IS NULL FOR UPDATE;
    e := lock_execution(p_execution_id, p_verb, false);
    IF e.status NOT IN ('enqueued', 'running', 'waiting', 'paused') THEN
        RAISE EXCEPTION 'cannot %: execution % already finished (%)', p_verb, p_execution_id, e.status
            USING ERRCODE = 'KS409', HINT = p_finished_hint;
    END IF;
    IF e.status = 'running' AND e.claims = 1
       AND clock_timestamp() < e.started_at + interval '250 milliseconds' THEN
        PERFORM pg_sleep(extract(epoch FROM e.started_at + interval '250 milliseconds' - clock_timestamp()));
    END IF;
    RETURN e;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.lock_live_execution(bigint, text, text) FROM PUBLIC;
