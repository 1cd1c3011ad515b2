-- batch_ranges(): the id ranges of the history whose finished rows prune deletes row by row
-- (prune_finished, and what prune --dry-run counts for its batches): the range the id sequence
-- is in (and those ahead of it, empty), and every range that holds a live execution (a long
-- approval keeps its range). Every other range is dropped whole once all of it finished before
-- the cutoff (drop_history_range): deleting its rows first would only leave dead tuples for
-- vacuum, the cost partitioning removes. Each live state through its partial index.
CREATE OR REPLACE FUNCTION {schema}.batch_ranges()
RETURNS TABLE (lo bigint, hi bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
    SELECT p.lo, p.hi FROM history_partitions p
     WHERE p.hi > (SELECT coalesce(max(e.id), 0) FROM workflow_executions e)
        OR EXISTS (SELECT 1 FROM workflow_executions e WHERE e.id >= p.lo AND e.id < p.hi AND e.status = 'enqueued')
        OR EXISTS (SELECT 1 FROM workflow_executions e WHERE e.id >= p.lo AND e.id < p.hi AND e.status = 'running')
        OR EXISTS (SELECT 1 FROM workflow_executions e WHERE e.id >= p.lo AND e.id < p.hi AND e.status = 'waiting')
     ORDER BY p.lo
$$;
REVOKE EXECUTE ON FUNCTION {schema}.batch_ranges() FROM PUBLIC;
