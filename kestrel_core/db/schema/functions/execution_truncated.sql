-- execution_truncated(): its current definition (created by migration 0022).
--
-- Statement trigger after TRUNCATE on workflow_executions: the step tables and the keys are
-- emptied with it, as TRUNCATE ... CASCADE did through the foreign keys they had. DELETE, not
-- TRUNCATE: a TRUNCATE that names these tables too has them open (they are already empty).
CREATE OR REPLACE FUNCTION {schema}.execution_truncated() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM {schema}.operation_outputs;
    DELETE FROM {schema}.step_attempts;
    DELETE FROM {schema}.workflow_waits;
    DELETE FROM {schema}.execution_keys;
    RETURN NULL;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.execution_truncated() FROM PUBLIC;
