-- guard_wait_writes(): its current definition (created by migration 0029).
--
-- A wait is created, or a resolved one reopened, by another login than the schema's owner
-- only for a running execution: the engine parks an execution under its current claim, in the
-- statement that moves it to 'waiting'. A wait made for a
-- parked execution (a due sleep beside an undecided gate) would let the sweep wake it.
CREATE OR REPLACE FUNCTION {schema}.guard_wait_writes() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_status text;
BEGIN
    IF pg_has_role(current_user, (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID), 'USAGE') THEN
        RETURN NEW;
    END IF;
    -- The park's statement moves the execution to 'waiting' before its wait is written (data-
    -- modifying CTEs run last first): a row this transaction made 'waiting' passes. No other
    -- login writes a waiting row (guard_waiting_executions), so it was running before.
    SELECT CASE WHEN e.status = 'waiting' AND e.xmin = pg_current_xact_id_if_assigned()::xid
                THEN 'running' ELSE e.status END
      INTO v_status FROM {schema}.workflow_executions e WHERE e.id = NEW.execution_id;
    IF v_status IS DISTINCT FROM 'running' THEN
        RAISE EXCEPTION 'permission denied to % % "%" of execution % (it is %) as role %',
            CASE WHEN TG_OP = 'INSERT' THEN 'create' ELSE 'reopen' END, NEW.kind, NEW.step_id,
            NEW.execution_id, coalesce(v_status, 'missing'), current_user
            USING ERRCODE = '42501',
                  HINT = 'A wait is created by the worker that runs the execution, when the workflow parks on it.';
    END IF;
    RETURN NEW;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.guard_wait_writes() FROM PUBLIC;
