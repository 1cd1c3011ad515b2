-- guard_step_attempts(): its current definition (created by migration 0024).
--
-- A closed attempt, and any attempt's identity, never changes for another login.
CREATE OR REPLACE FUNCTION {schema}.guard_step_attempts() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF pg_has_role(current_user, (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID), 'USAGE') THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'permission denied to rewrite attempt % of step "%" of execution % (it is %) as role %',
        OLD.attempt, OLD.step_id, OLD.execution_id, OLD.outcome, current_user
        USING ERRCODE = '42501',
              HINT = 'An attempt is closed once, by the worker that ran it or the transition that ended its claim; a closed attempt is history.';
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.guard_step_attempts() FROM PUBLIC;
