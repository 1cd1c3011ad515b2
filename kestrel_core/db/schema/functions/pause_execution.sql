-- pause_execution(): its current definition (created with migration 0030).
--
-- An operator holds one live execution, audited. An enqueued one leaves the ready queue (the
-- trigger ready_changed); a waiting one keeps its waits and their deadlines (a wait that comes
-- due meanwhile is resolved and checkpointed, the execution stays paused: see
-- resume_execution); a running one stops at its next step boundary: its worker's next
-- boundary still closes and checkpoints the step it was running (the boundary write takes a
-- step's end from a paused execution under the same claim: owner and epoch are kept here),
-- but opens nothing, parks nothing, completes nothing (those require 'running'), so no step
-- starts after this commits, and the worker lets it go without error. The step in flight is
-- not run again after the resume. A running one keeps its lease: the claim
-- is alive while its worker still runs its code (the heartbeat renews a paused execution it
-- runs, not counting it held: lease.py) and lets go at its next boundary (the lease cleared);
-- resume_execution gives a claim still alive the execution back. Returns the status it had.
CREATE OR REPLACE FUNCTION {schema}.pause_execution(p_execution_id bigint, p_by text, p_comment text)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    e workflow_executions%ROWTYPE;
BEGIN
    e := lock_live_execution(p_execution_id, 'pause', 'Only enqueued, running or waiting executions can be paused.');
    IF e.status = 'paused' THEN
        RAISE EXCEPTION 'cannot pause: execution % is already paused', p_execution_id
            USING ERRCODE = 'KS409', HINT = 'Let it go on with: kestrel-console resume ' || p_execution_id;
    END IF;
    UPDATE workflow_executions
       SET status = 'paused', lease_expires = CASE WHEN e.status = 'running' THEN e.lease_expires END,
           updated_at = now()
     WHERE id = p_execution_id;
    INSERT INTO operator_actions (actor, db_user, action, execution_id, comment, from_status)
    VALUES (p_by, session_user, 'pause', p_execution_id, p_comment, e.status);
    RETURN e.status;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.pause_execution(bigint, text, text) FROM PUBLIC;
