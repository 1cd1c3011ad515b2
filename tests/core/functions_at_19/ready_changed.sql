-- ready_changed(): its current definition (created by migration 0015).
--
-- After an execution leaves 'enqueued' other than by a claim (cancel, deadline, delete), its
-- ready row goes; after one becomes 'enqueued' (requeue, lease sweep, woken wait, release),
-- its ready row comes; a TRUNCATE empties the ready table. The old ready row is deleted by its
-- claim key, SKIP LOCKED: a claim that holds it is moving it already, and finds the execution
-- no longer enqueued once this transaction commits (or, if that claim rolls back, the next
-- claim deletes the stale row).
CREATE OR REPLACE FUNCTION {schema}.ready_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM {schema}.executions_ready;
        RETURN NULL;
    END IF;
    IF OLD.status = 'enqueued' THEN
        DELETE FROM {schema}.executions_ready r
         WHERE r.ctid = ANY(ARRAY(
                SELECT s.ctid FROM {schema}.executions_ready s
                 WHERE s.neg_priority = -OLD.priority::bigint AND s.run_at = OLD.run_at AND s.id = OLD.id
                   FOR UPDATE SKIP LOCKED));
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.status = 'enqueued' THEN
        INSERT INTO {schema}.executions_ready
               (id, neg_priority, run_at, workflow_name, queue, version, concurrency_key)
        VALUES (NEW.id, -NEW.priority::bigint, NEW.run_at, NEW.workflow_name, NEW.queue, NEW.version,
                NEW.concurrency_key);
    END IF;
    RETURN NULL;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.ready_changed() FROM PUBLIC;
