-- execution_deleted(): its current definition (created by migration 0022).
--
-- Statement trigger after DELETE on workflow_executions: what the step tables' foreign keys
-- did ON DELETE CASCADE before the history was partitioned (their checkpoints, attempts and
-- waits go), and the executions' keys are freed. Partitions dropped whole by prune do not come
-- here (drop_history_range does the same by range).
CREATE OR REPLACE FUNCTION {schema}.execution_deleted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    ids bigint[] := ARRAY(SELECT id FROM old_rows ORDER BY id);
BEGIN
    IF cardinality(ids) = 0 THEN
        RETURN NULL;
    END IF;
    DELETE FROM {schema}.operation_outputs WHERE execution_id = ANY (ids);
    DELETE FROM {schema}.step_attempts WHERE execution_id = ANY (ids);
    DELETE FROM {schema}.workflow_waits WHERE execution_id = ANY (ids);
    DELETE FROM {schema}.execution_keys WHERE execution_id = ANY (ids);
    RETURN NULL;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.execution_deleted() FROM PUBLIC;
