-- Kestrel schema, version 13: roles that mean what they say, deadlines in the decision,
-- reserved idempotency keys (issue 18).
--
-- 1. decide_approval refuses a gate past its deadline (wake_at) even when no sweeper ran yet,
--    and a NULL decision (it used to record a rejection and hand the workflow approved: null).
-- 2. sweep_waits(): the sweep of due waits (kestrel_core/sweeper.py), moved into a SECURITY
--    DEFINER function, so that the worker role needs no UPDATE on workflow_waits' decision
--    columns: kestrel_core.roles grants it UPDATE on (resolved_at, details) only. A decision
--    (approved, rejected, who, comment) is then written only by decide_approval, which audits
--    it; a timeout only by this function (decision 'timed_out', decided_by NULL).
-- 3. A worker login may not cancel an execution, nor change one that finished (requeue, bring
--    back, rewrite its result), with a plain UPDATE: guard_finished_executions() refuses it
--    unless the change comes from the schema's owner (the SECURITY DEFINER operator functions
--    and triggers run as the owner). The trigger's WHEN clause is all the hot path evaluates
--    (claims, heartbeats and step boundaries update live rows into live states).
-- 4. Engine idempotency keys ('schedule:NAME:TICK', 'child:ID:STEP') move to their own column,
--    engine_key (unique); idempotency_key, the users' column, refuses those prefixes (CHECK,
--    the same list as kestrel_core.keys.RESERVED_PREFIXES). A user key can no longer swallow
--    a tick or a child. Existing rows holding such a key in idempotency_key were written by
--    the engine (or by someone claiming its namespace): they move to engine_key.
-- 5. add_schedule validates what it stores (cron shape, a time zone Postgres knows, a workflow
--    name enqueue would accept, an input object, a finite first tick). Who may call it is
--    decided by kestrel_core.roles: the worker role, which may enqueue (a schedule enqueues
--    any workflow with any input at every tick), not the operator role.

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
    IF p_approved IS NULL THEN
        RAISE EXCEPTION 'cannot decide approval "%" of execution %: the decision must be true (approve) or false (reject), not NULL',
            p_step_id, p_execution_id USING ERRCODE = 'KS409';
    END IF;
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
    -- The deadline holds in the decision itself, not only once a sweeper has run.
    IF w.wake_at <= now() THEN
        RAISE EXCEPTION 'cannot %: approval "%" of execution % timed out at % (its deadline passed; the workflow resumes with timed_out at the next sweep)',
            verb, p_step_id, p_execution_id, to_char(w.wake_at, 'YYYY-MM-DD HH24:MI:SS TZ')
            USING ERRCODE = 'KS409';
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
    PERFORM pg_notify({schema}.notify_channel(), e.workflow_name);
    RETURN v;
END
$$;

-- The statement of kestrel_core/sweeper.py (SWEEP_WAITS) until version 12, unchanged.
-- Lock order: wait rows first, then executions (as the operator functions do).
CREATE FUNCTION {schema}.sweep_waits(p_batch integer) RETURNS SETOF bigint
LANGUAGE sql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
WITH due AS (
    SELECT execution_id, step_id FROM workflow_waits
     WHERE resolved_at IS NULL AND wake_at <= now()
     ORDER BY wake_at
     LIMIT least(greatest(p_batch, 1), 10000)
     FOR UPDATE SKIP LOCKED
), resolved AS (
    UPDATE workflow_waits w
       SET resolved_at = now(),
           decision = CASE WHEN w.kind = 'approval' THEN 'timed_out' END,
           decided_at = CASE WHEN w.kind = 'approval' THEN now() END
      FROM due
     WHERE w.execution_id = due.execution_id AND w.step_id = due.step_id
    RETURNING w.execution_id, w.step_id, w.kind, w.wake_at, w.created_at, w.details
), checkpointed AS (
    -- The wake-up is the wait's checkpoint: replay returns it and does not wait again.
    INSERT INTO operation_outputs (execution_id, step_id, output, started_at)
    SELECT execution_id, step_id,
           CASE kind WHEN 'approval'
                THEN jsonb_build_object('approved', false, 'by', NULL, 'comment', NULL,
                                        'timed_out', true, 'decided_at', now())
                WHEN 'sleep' THEN jsonb_build_object('slept_until', wake_at)
                -- a child or event wait whose timeout passed
                ELSE jsonb_build_object('timed_out', true, 'key', details -> 'key') END,
           created_at
      FROM resolved
    ON CONFLICT DO NOTHING
), woken AS (
    UPDATE workflow_executions e
       SET status = 'enqueued', run_at = now(), updated_at = now()
      FROM resolved
     WHERE e.id = resolved.execution_id AND e.status = 'waiting'
    RETURNING e.id, e.workflow_name
), woke AS (
    SELECT pg_notify({schema}.notify_channel(), name) FROM (SELECT DISTINCT workflow_name AS name FROM woken) n
)
SELECT id FROM woken, (SELECT count(*) FROM woke) w
$$;
REVOKE EXECUTE ON FUNCTION {schema}.sweep_waits(integer) FROM PUBLIC;

-- Runs only for the rows the trigger's WHEN picks: a cancel, or any change to a finished row.
CREATE FUNCTION {schema}.guard_finished_executions() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    -- current_user is the table's owner inside the SECURITY DEFINER functions and triggers
    -- (cancel_execution, requeue_execution, the cancel cascade); a superuser passes too.
    IF pg_has_role(current_user, (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID), 'USAGE') THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'permission denied to % execution % (it is %) with a plain UPDATE as role %',
        CASE WHEN NEW.status = 'cancelled' AND OLD.status <> 'cancelled' THEN 'cancel'
             ELSE 'change the finished' END,
        OLD.id, OLD.status, current_user
        USING ERRCODE = '42501',
              HINT = 'Cancel and requeue through the audited operator functions: kestrel-console cancel / requeue, as a login granted the operator role.';
END
$$;
CREATE TRIGGER guard_finished_executions
    BEFORE UPDATE ON {schema}.workflow_executions
    FOR EACH ROW
    WHEN ((NEW.status = 'cancelled' AND OLD.status <> 'cancelled')
          OR OLD.status IN ('success', 'error', 'cancelled'))
    EXECUTE FUNCTION {schema}.guard_finished_executions();
REVOKE EXECUTE ON FUNCTION {schema}.guard_finished_executions() FROM PUBLIC;

ALTER TABLE {schema}.workflow_executions ADD COLUMN engine_key text UNIQUE;
UPDATE {schema}.workflow_executions
   SET engine_key = idempotency_key, idempotency_key = NULL
 WHERE idempotency_key LIKE 'schedule:%' OR idempotency_key LIKE 'child:%';
ALTER TABLE {schema}.workflow_executions ADD CONSTRAINT workflow_executions_idempotency_key_reserved
    CHECK (idempotency_key NOT LIKE 'schedule:%' AND idempotency_key NOT LIKE 'child:%');

CREATE OR REPLACE FUNCTION {schema}.add_schedule(
    p_name text, p_cron text, p_timezone text, p_workflow text, p_input jsonb,
    p_catch_up boolean, p_next_tick timestamptz, p_by text, p_comment text
) RETURNS timestamptz
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    s schedules%ROWTYPE;
    problem text;
BEGIN
    -- What kestrel_core.schedules.check refuses, checked again for a direct call: croniter
    -- has the last word on a cron (the caller computes the first tick with it), this refuses
    -- what can never be one. Keep the limits in step with schedules.py and enqueue.py.
    problem := CASE
        WHEN p_name IS NULL OR p_name !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$'
            THEN format('invalid schedule name %L: use letters, digits, ''_'', ''.'', '':'' or ''-'' (at most 100 characters)', p_name)
        WHEN p_workflow IS NULL OR btrim(p_workflow) = '' OR length(p_workflow) > 200
            THEN format('invalid workflow name %L: a non-empty name of at most 200 characters', left(p_workflow, 60))
        WHEN p_cron IS NULL OR NOT (
                 p_cron ~ '^@(yearly|annually|monthly|weekly|daily|midnight|hourly)$'
              OR p_cron ~ '^[0-9A-Za-z*?/,#-]+( [0-9A-Za-z*?/,#-]+){4,5}$')
            THEN format('invalid cron expression %L: 5 fields (minute hour day-of-month month day-of-week), 6 with seconds last, or @hourly/@daily/...', left(p_cron, 60))
        WHEN p_timezone IS NULL OR NOT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = p_timezone)
            THEN format('unknown timezone %L: use an IANA name such as ''UTC'' or ''Europe/Paris''', left(p_timezone, 60))
        WHEN p_input IS NOT NULL AND jsonb_typeof(p_input) <> 'object'
            THEN 'the input of a schedule must be a JSON object'
        WHEN p_catch_up IS NULL THEN 'catch_up must be true or false'
        WHEN p_next_tick IS NULL OR NOT isfinite(p_next_tick) THEN 'give the first tick (a finite time)'
    END;
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'cannot add schedule: %', problem USING ERRCODE = 'KS409';
    END IF;
    SELECT * INTO s FROM schedules WHERE name = p_name FOR UPDATE;
    IF FOUND THEN
        RAISE EXCEPTION 'cannot add schedule "%": a schedule with that name exists (%, % % for workflow "%")',
            p_name, CASE s.source WHEN 'code' THEN 'declared in code' ELSE 'added by ' || coalesce(s.created_by, '?') END,
            s.cron, s.timezone, s.workflow_name
            USING ERRCODE = 'KS409',
                  HINT = 'Choose another name, or remove it first: kestrel-console schedule remove ' || p_name;
    END IF;
    INSERT INTO schedules (name, cron, timezone, workflow_name, input, catch_up, next_tick,
                           source, created_by)
    VALUES (p_name, p_cron, p_timezone, p_workflow, p_input, p_catch_up, p_next_tick, 'cli', p_by);
    INSERT INTO operator_actions (actor, action, comment, details)
    VALUES (p_by, 'add_schedule', p_comment,
            jsonb_build_object('schedule', p_name, 'cron', p_cron, 'timezone', p_timezone,
                               'workflow', p_workflow, 'input', p_input, 'catch_up', p_catch_up));
    RETURN p_next_tick;
END
$$;

-- CREATE OR REPLACE keeps each function's privileges (EXECUTE revoked from PUBLIC, granted to
-- the roles by kestrel_core.roles).
