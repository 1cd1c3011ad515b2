-- lock_finished_counters(): its current definition (created by migration 0010).
--
-- Group commit (kestrel_core/boundary.py): a worker completes many executions with one
-- UPDATE, and the row trigger bumps one execution_counts row per execution in the order the
-- UPDATE visits its rows; two such statements could deadlock. This locks the counters a batch
-- is about to bump, in one order, first. SECURITY DEFINER like the triggers: workers never get
-- rights on the counters themselves.
CREATE OR REPLACE FUNCTION {schema}.lock_finished_counters(p_names text[], p_statuses text[], p_shards smallint[])
RETURNS integer
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT count(*)::integer FROM (
        SELECT 1 FROM {schema}.execution_counts c
          JOIN unnest(p_names, p_statuses, p_shards) AS k(name, status, shard)
            ON c.workflow_name = k.name AND c.status = k.status AND c.shard = k.shard
         ORDER BY c.workflow_name, c.status, c.shard
           FOR UPDATE OF c
    ) locked
$$;
REVOKE EXECUTE ON FUNCTION {schema}.lock_finished_counters(text[], text[], smallint[]) FROM PUBLIC;
