-- Kestrel schema, version 10: group commit (kestrel_core/boundary.py).
--
-- A worker now completes many executions with one UPDATE. The row trigger of version 3 bumps
-- one execution_counts row per completed execution, in the order the UPDATE happens to visit
-- its rows; two such statements bumping the same counters in different orders deadlock (the
-- detector breaks it after deadlock_timeout, 1 s by default, and the batch is retried).
-- lock_finished_counters locks the counters a batch is about to bump, in one order, first.
-- SECURITY DEFINER like the triggers: workers never get rights on the counters themselves.

CREATE FUNCTION {schema}.lock_finished_counters(p_names text[], p_statuses text[], p_shards smallint[])
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
