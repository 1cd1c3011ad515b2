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
--
-- The functions' definitions live in kestrel_core/schema/functions/ (decide_approval,
-- sweep_waits, add_schedule, guard_finished_executions); guard_finished_executions is created
-- here first because the trigger below needs it.

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
