-- guard_execution_inserts(): its current definition (created by migration 0036, which
-- attaches the trigger of the same name to workflow_executions).
--
-- The worker role may INSERT executions (enqueue, a child's start), and the engine's INSERTs
-- leave the status and the run-time columns to their defaults: a new execution is 'enqueued',
-- unclaimed, unstarted. Without this a worker login could insert one already 'paused',
-- 'waiting' or 'success', with an owner, a lease, an output, a deadline: states the
-- UPDATE guards (guard_paused_executions, guard_waiting_executions, guard_finished_executions)
-- let only the audited functions and the engine's own transitions make. Runs only for such an
-- INSERT (its WHEN clause); the schema's owner (fork_execution, trigger_schedule) is let through.
CREATE OR REPLACE FUNCTION {schema}.guard_execution_inserts() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF pg_has_role(current_user, (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID), 'USAGE') THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'permission denied to insert an execution that is % (or claimed, started, finished or with a deadline) as role %',
        NEW.status, current_user
        USING ERRCODE = '42501',
              HINT = 'A new execution is enqueued (Kestrel.enqueue) and the engine moves it on from there.';
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.guard_execution_inserts() FROM PUBLIC;
