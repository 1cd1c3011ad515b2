-- guard_owner_writes(): its current definition (created by migration 0040, which attaches it to
-- the triggers below in place of one function each).
--
-- The writes only the schema's owner makes (the audited operator functions, the engine's
-- SECURITY DEFINER functions and triggers; a superuser passes too): each trigger's WHEN picks
-- its write, and names its rule (TG_ARGV[0]) for the message another login is refused with.
--
-- - 'insert' (trigger guard_execution_inserts, BEFORE INSERT on workflow_executions, since
--   0036): the worker role may INSERT executions (enqueue, a child's start), and the engine's
--   INSERTs leave the status and the run-time columns to their defaults: a new execution is
--   'enqueued', unclaimed, unstarted. Without this a worker login could insert one already
--   paused, waiting or finished, with an owner, a lease, an output, a deadline: states the
--   UPDATE guards (guard_paused_executions, guard_waiting_executions, guard_finished_executions)
--   let only the audited functions and the engine's own transitions make (fork_execution and
--   trigger_schedule run as the owner).
-- - 'finished' (trigger guard_finished_executions, since 0013): a cancel, or any change to a
--   finished execution (cancel_execution, requeue_execution, the cancel cascade).
-- - 'paused' (trigger guard_paused_executions, since 0030): a change of status into or out of
--   'paused' (pause_execution, resume_execution, cancel_execution).
-- - 'paused_row' (trigger guard_paused_rows, since 0037): an UPDATE that leaves an execution
--   paused; another login may change its lease only (renewed by the claim it was paused under
--   while its step in flight runs, cleared when that claim lets go).
-- - 'attempt' (trigger guard_step_attempts, on step_attempts, since 0024): a closed attempt, and
--   any attempt's identity, never changes for another login.
CREATE OR REPLACE FUNCTION {schema}.guard_owner_writes() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    -- current_user is the table's owner inside the SECURITY DEFINER functions and triggers.
    IF pg_has_role(current_user, (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID), 'USAGE') THEN
        RETURN NEW;
    END IF;
    CASE TG_ARGV[0]
    WHEN 'insert' THEN
        RAISE EXCEPTION 'permission denied to insert an execution that is % (or claimed, started, finished or with a deadline) as role %',
            NEW.status, current_user
            USING ERRCODE = '42501',
                  HINT = 'A new execution is enqueued (Kestrel.enqueue) and the engine moves it on from there.';
    WHEN 'finished' THEN
        RAISE EXCEPTION 'permission denied to % execution % (it is %) with a plain UPDATE as role %',
            CASE WHEN NEW.status = 'cancelled' AND OLD.status <> 'cancelled' THEN 'cancel'
                 ELSE 'change the finished' END,
            OLD.id, OLD.status, current_user
            USING ERRCODE = '42501',
                  HINT = 'Cancel and requeue through the audited operator functions: kestrel-console cancel / requeue, as a login granted the operator role.';
    WHEN 'paused' THEN
        RAISE EXCEPTION 'permission denied to move execution % from % to % with a plain UPDATE as role %',
            OLD.id, OLD.status, NEW.status, current_user
            USING ERRCODE = '42501',
                  HINT = 'Pause and resume through the audited operator functions: kestrel-console pause / resume, as a login granted the operator role.';
    WHEN 'paused_row' THEN
        IF (to_jsonb(NEW) - 'lease_expires' - 'updated_at') = (to_jsonb(OLD) - 'lease_expires' - 'updated_at') THEN
            RETURN NEW;
        END IF;
        RAISE EXCEPTION 'permission denied to change paused execution % with a plain UPDATE as role %', OLD.id, current_user
            USING ERRCODE = '42501',
                  HINT = 'A paused execution changes only through the audited operator functions (resume, cancel, fork).';
    WHEN 'attempt' THEN
        RAISE EXCEPTION 'permission denied to rewrite attempt % of step "%" of execution % (it is %) as role %',
            OLD.attempt, OLD.step_id, OLD.execution_id, OLD.outcome, current_user
            USING ERRCODE = '42501',
                  HINT = 'An attempt is closed once, by the worker that ran it or the transition that ended its claim; a closed attempt is history.';
    END CASE;  -- no rule matched (a trigger without one): CASE_NOT_FOUND refuses the write
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.guard_owner_writes() FROM PUBLIC;
