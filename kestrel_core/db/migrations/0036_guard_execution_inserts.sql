-- Kestrel schema, version 36: a worker login inserts executions only as the engine does.
--
-- guard_paused_executions, guard_waiting_executions and guard_finished_executions fire on
-- UPDATE: a worker login (which may INSERT, to enqueue and to start children) could INSERT an
-- execution already 'paused', 'waiting', 'running' or 'success', with an owner, a lease, an
-- output or a deadline. The engine's INSERTs leave all of these to their defaults; now any
-- other INSERT is refused unless it comes from the schema's owner (guard_execution_inserts,
-- in schema/functions/).
CREATE FUNCTION {schema}.guard_execution_inserts() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN NEW;
END
$$;
CREATE TRIGGER guard_execution_inserts
    BEFORE INSERT ON {schema}.workflow_executions
    FOR EACH ROW
    WHEN (NEW.status <> 'enqueued' OR NEW.owner_id IS NOT NULL OR NEW.lease_expires IS NOT NULL
          OR NEW.started_at IS NOT NULL OR NEW.finished_at IS NOT NULL OR NEW.output IS NOT NULL
          OR NEW.error IS NOT NULL OR NEW.deadline_at IS NOT NULL OR NEW.claim_epoch <> 0 OR NEW.claims <> 0)
    EXECUTE FUNCTION {schema}.guard_execution_inserts();
