-- guard_paused_executions(): its current definition (created by migration 0030, which
-- attaches the trigger of the same name to workflow_executions).
--
-- Runs only for a change into or out of 'paused': refused unless it comes from the schema's
-- owner (the audited pause_execution, resume_execution, cancel_execution).
CREATE OR REPLACE FUNCTION {schema}.guard_paused_executions() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF pg_has_role(current_user, (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID), 'USAGE') THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'permission denied to move execution % from % to % with a plain UPDATE as role %',
        OLD.id, OLD.status, NEW.status, current_user
        USING ERRCODE = '42501',
              HINT = 'Pause and resume through the audited operator functions: kestrel-console pause / resume, as a login granted the operator role.';
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.guard_paused_executions() FROM PUBLIC;
