-- ready_inserted(): its current definition (created by migration 0015).
--
-- Statement trigger after INSERT on workflow_executions: the batch's 'enqueued' rows become
-- claimable (executions_ready). One INSERT per enqueue statement, whatever its size.
-- SECURITY DEFINER like the other triggers: the worker role may read and delete ready rows
-- (the claim), never insert them.
CREATE OR REPLACE FUNCTION {schema}.ready_inserted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO {schema}.executions_ready
           (id, neg_priority, run_at, workflow_name, queue, version, concurrency_key)
    SELECT id, -priority::bigint, run_at, workflow_name, queue, version, concurrency_key
      FROM new_rows
     WHERE status = 'enqueued';
    RETURN NULL;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.ready_inserted() FROM PUBLIC;
