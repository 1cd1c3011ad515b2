-- guard_finished_executions(): its current definition (created by migration 0013, which
-- attaches the trigger of the same name to workflow_executions).
--
-- Runs only for the rows the trigger's WHEN picks: a cancel, or any change to a finished row,
-- refused unless the change comes from the schema's owner (the audited functions).
CREATE OR REPLACE FUNCTION {schema}.guard_finished_executions() RETURNS trigger
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
REVOKE EXECUTE ON FUNCTION {schema}.guard_finished_executions() FROM PUBLIC;
