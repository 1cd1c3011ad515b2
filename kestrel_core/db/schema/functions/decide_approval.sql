-- decide_approval(): its current definition (created by migration 0002, last redefined by 0013
-- and by the file since 0024).
--
-- An operator approves or rejects an approval gate, audited, and wakes the execution. Like
-- every operator function it is SECURITY DEFINER: the operator role may EXECUTE it without
-- holding UPDATE on the tables. Refusals raise SQLSTATE KS404 (no such thing) or KS409 (the
-- state does not allow it); kestrel_core.errors maps them to Python exceptions.
-- Timed by the clock, not the transaction: the deadline is compared with clock_timestamp()
-- once the gate is locked, and that time is what decided_at and the audit row record (a
-- transaction opened before the deadline cannot decide after it, nor backdate the decision).
CREATE OR REPLACE FUNCTION {schema}.decide_approval(
    p_execution_id bigint, p_step_id text, p_approved boolean, p_by text, p_comment text
) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    e workflow_executions%ROWTYPE;
    w workflow_waits%ROWTYPE;
    v jsonb;
    verb text := CASE WHEN p_approved THEN 'approve' ELSE 'reject' END;
    decided timestamptz;
BEGIN
    IF p_approved IS NULL THEN
        RAISE EXCEPTION 'cannot decide approval "%" of execution %: the decision must be true (approve) or false (reject), not NULL',
            p_step_id, p_execution_id USING ERRCODE = 'KS409';
    END IF;
    -- Lock order everywhere: the wait row, then the execution row (the sweeper does the same).
    SELECT * INTO w FROM workflow_waits
        WHERE execution_id = p_execution_id AND step_id = p_step_id FOR UPDATE;
    e := lock_execution(p_execution_id, verb, false);
    IF w.execution_id IS NULL THEN
        RAISE EXCEPTION 'cannot %: execution % has no approval gate "%"', verb, p_execution_id, p_step_id
            USING ERRCODE = 'KS404', HINT = 'Pending approvals are listed by: kestrel-console status';
    END IF;
    IF w.kind <> 'approval' THEN
        RAISE EXCEPTION 'cannot %: "%" of execution % is a durable sleep, not an approval gate',
            verb, p_step_id, p_execution_id USING ERRCODE = 'KS409';
    END IF;
    IF w.decision IS NOT NULL THEN
        RAISE EXCEPTION 'cannot %: approval "%" of execution % was already decided (% by % at %)',
            verb, p_step_id, p_execution_id, w.decision, coalesce(w.decided_by, 'the timeout'),
            to_char(w.decided_at, 'YYYY-MM-DD HH24:MI:SS TZ')
            USING ERRCODE = 'KS409';
    END IF;
    -- A paused execution's gates stay open: decided, it stays paused (resume_execution).
    IF e.status NOT IN ('waiting', 'paused') OR w.resolved_at IS NOT NULL THEN
        RAISE EXCEPTION 'cannot %: execution % is %, not waiting for approval "%"',
            verb, p_execution_id, e.status, p_step_id USING ERRCODE = 'KS409';
    END IF;
    -- The deadline holds in the decision itself, not only once a sweeper has run.
    decided := clock_timestamp();
    IF w.wake_at <= decided THEN
        RAISE EXCEPTION 'cannot %: approval "%" of execution % timed out at % (its deadline passed; the workflow resumes with timed_out at the next sweep)',
            verb, p_step_id, p_execution_id, to_char(w.wake_at, 'YYYY-MM-DD HH24:MI:SS TZ')
            USING ERRCODE = 'KS409';
    END IF;

    UPDATE workflow_waits
       SET decision = CASE WHEN p_approved THEN 'approved' ELSE 'rejected' END,
           decided_by = p_by, decided_by_db_user = session_user, comment = p_comment,
           decided_at = decided, resolved_at = decided
     WHERE execution_id = p_execution_id AND step_id = p_step_id;

    v := jsonb_build_object('approved', p_approved, 'by', p_by, 'comment', p_comment,
                            'timed_out', false, 'decided_at', decided);
    -- The decision is the gate's checkpoint: replay returns it without waiting again.
    INSERT INTO operation_outputs (execution_id, step_id, output, started_at)
    VALUES (p_execution_id, p_step_id, v, w.created_at)
    ON CONFLICT DO NOTHING;

    INSERT INTO operator_actions (at, actor, db_user, action, execution_id, step_id, comment, from_status)
    VALUES (decided, p_by, session_user, verb, p_execution_id, p_step_id, p_comment, e.status);

    IF e.status = 'waiting' THEN
        UPDATE workflow_executions
           SET status = 'enqueued', run_at = decided, updated_at = decided, lease_expires = NULL
         WHERE id = p_execution_id;
        PERFORM pg_notify({schema}.notify_channel(), e.workflow_name);
    END IF;
    RETURN v;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.decide_approval(bigint, text, boolean, text, text) FROM PUBLIC;
