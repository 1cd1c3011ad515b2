-- Kestrel schema, version 5: the audit records who Postgres authenticated, not only the name
-- the operator typed.
--
-- `actor` / `decided_by` hold the name the caller passes (--operator, $KESTREL_OPERATOR, $USER,
-- by=...): anyone may claim any name. `db_user` / `decided_by_db_user` hold session_user, the
-- login role Postgres authenticated for the session. Inside a SECURITY DEFINER function
-- current_user is the function's owner, but session_user stays the login, so the operator
-- functions write session_user; the caller cannot pass it. Rows written before this migration
-- keep NULL there (not recorded). The functions below are those of migrations 0002 and 0004,
-- unchanged except that they write the database role beside the name.

ALTER TABLE {schema}.operator_actions ADD COLUMN db_user text;
ALTER TABLE {schema}.operator_actions ALTER COLUMN db_user SET DEFAULT session_user;
ALTER TABLE {schema}.workflow_waits ADD COLUMN decided_by_db_user text;

CREATE OR REPLACE FUNCTION {schema}.decide_approval(
    p_execution_id bigint, p_step_id text, p_approved boolean, p_by text, p_comment text
) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    e workflow_executions%ROWTYPE;
    w workflow_waits%ROWTYPE;
    v jsonb;
    verb text := CASE WHEN p_approved THEN 'approve' ELSE 'reject' END;
BEGIN
    -- Lock order everywhere: the wait row, then the execution row (the sweeper does the same).
    SELECT * INTO w FROM workflow_waits
        WHERE execution_id = p_execution_id AND step_id = p_step_id FOR UPDATE;
    SELECT * INTO e FROM workflow_executions WHERE id = p_execution_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cannot %: no execution with id %', verb, p_execution_id
            USING ERRCODE = 'KS404', HINT = 'List executions with: kestrel-console list';
    END IF;
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
    IF e.status <> 'waiting' OR w.resolved_at IS NOT NULL THEN
        RAISE EXCEPTION 'cannot %: execution % is %, not waiting for approval "%"',
            verb, p_execution_id, e.status, p_step_id USING ERRCODE = 'KS409';
    END IF;

    UPDATE workflow_waits
       SET decision = CASE WHEN p_approved THEN 'approved' ELSE 'rejected' END,
           decided_by = p_by, decided_by_db_user = session_user, comment = p_comment,
           decided_at = now(), resolved_at = now()
     WHERE execution_id = p_execution_id AND step_id = p_step_id;

    v := jsonb_build_object('approved', p_approved, 'by', p_by, 'comment', p_comment,
                            'timed_out', false, 'decided_at', now());
    -- The decision is the gate's checkpoint: replay returns it without waiting again.
    INSERT INTO operation_outputs (execution_id, step_id, output, started_at)
    VALUES (p_execution_id, p_step_id, v, w.created_at)
    ON CONFLICT DO NOTHING;

    INSERT INTO operator_actions (actor, db_user, action, execution_id, step_id, comment, from_status)
    VALUES (p_by, session_user, verb, p_execution_id, p_step_id, p_comment, e.status);

    UPDATE workflow_executions
       SET status = 'enqueued', run_at = now(), updated_at = now(), lease_expires = NULL
     WHERE id = p_execution_id;
    PERFORM pg_notify('kestrel:' || current_schema(), e.workflow_name);
    RETURN v;
END
$$;

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
    IF e.status NOT IN ('enqueued', 'running', 'waiting') THEN
        RAISE EXCEPTION 'cannot cancel: execution % already finished (%)', p_execution_id, e.status
            USING ERRCODE = 'KS409',
                  HINT = 'Only enqueued, running or waiting executions can be cancelled.';
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

CREATE OR REPLACE FUNCTION {schema}.requeue_execution(p_execution_id bigint, p_by text, p_comment text)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    e workflow_executions%ROWTYPE;
BEGIN
    SELECT * INTO e FROM workflow_executions WHERE id = p_execution_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cannot requeue: no execution with id %', p_execution_id
            USING ERRCODE = 'KS404', HINT = 'List executions with: kestrel-console list';
    END IF;
    IF e.status = 'running' AND e.lease_expires >= now() THEN
        RAISE EXCEPTION 'cannot requeue: execution % is running on % (lease live until %)',
            p_execution_id, e.owner_id, to_char(e.lease_expires, 'YYYY-MM-DD HH24:MI:SS TZ')
            USING ERRCODE = 'KS409',
                  HINT = 'Cancel it first, or wait for its lease to lapse if the worker is stuck.';
    ELSIF e.status IN ('enqueued', 'waiting', 'success') THEN
        RAISE EXCEPTION 'cannot requeue: execution % is %', p_execution_id, e.status
            USING ERRCODE = 'KS409',
                  HINT = 'Only executions that errored, were cancelled, or hold an expired lease can be re-enqueued.';
    END IF;
    -- Replay keeps every successful checkpoint; steps that failed for good run again.
    DELETE FROM operation_outputs WHERE execution_id = p_execution_id AND error IS NOT NULL;
    UPDATE workflow_executions
       SET status = 'enqueued', run_at = now(), updated_at = now(), owner_id = NULL,
           lease_expires = NULL, finished_at = NULL, error = NULL, output = NULL
     WHERE id = p_execution_id;
    INSERT INTO operator_actions (actor, db_user, action, execution_id, comment, from_status)
    VALUES (p_by, session_user, 'requeue', p_execution_id, p_comment, e.status);
    PERFORM pg_notify('kestrel:' || current_schema(), e.workflow_name);
    RETURN e.status;
END
$$;

CREATE OR REPLACE FUNCTION {schema}.prune_finished(p_before timestamptz, p_limit integer, p_by text)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    n integer;
    counts jsonb;
    lowest bigint;
    highest bigint;
BEGIN
    IF p_before IS NULL OR p_limit IS NULL OR p_limit < 1 OR p_limit > 100000 THEN
        RAISE EXCEPTION 'cannot prune: give a cutoff time and a batch size between 1 and 100000'
            USING ERRCODE = 'KS409';
    END IF;
    WITH batch AS (
        SELECT id FROM workflow_executions
         WHERE finished_at < p_before AND status IN ('success', 'error', 'cancelled')
         ORDER BY finished_at
         LIMIT p_limit
         FOR UPDATE SKIP LOCKED
    ), gone AS (
        DELETE FROM workflow_executions e
         USING batch
         WHERE e.id = batch.id AND e.status IN ('success', 'error', 'cancelled')
        RETURNING e.id, e.status
    ), by_status AS (
        SELECT status, count(*) AS k FROM gone GROUP BY status
    )
    SELECT (SELECT count(*) FROM gone), (SELECT min(id) FROM gone), (SELECT max(id) FROM gone),
           (SELECT coalesce(jsonb_object_agg(status, k), '{}'::jsonb) FROM by_status)
      INTO n, lowest, highest, counts;
    IF n > 0 THEN
        INSERT INTO operator_actions (actor, db_user, action, comment, details)
        VALUES (p_by, session_user, 'prune',
                format('deleted %s finished execution(s) that finished before %s', n, p_before),
                jsonb_build_object('finished_before', p_before, 'deleted', n, 'by_status', counts,
                                   'lowest_id', lowest, 'highest_id', highest));
    END IF;
    RETURN n;
END
$$;

-- CREATE OR REPLACE keeps each function's privileges (EXECUTE revoked from PUBLIC, granted to
-- the roles by kestrel_core.roles).
