-- lock_finished_counters(): its current definition (created by migration 0010).
--
-- Group commit (kestrel_core/boundary.py): a worker completes many executions with one
-- UPDATE, and the row trigger bumps one execution_counts row per execution in the order the
-- UPDATE visits its rows; two such statements could deadlock. This locks the counters a batch
-- is about to bump, in one order, first. SECURITY DEFINER like the triggers: workers never get
-- rights on the counters themselves.
--
-- PL/pgSQL with a generic plan, planned once per session: every step boundary statement calls
-- it, and as a LANGUAGE sql function (not inlined: SECURITY DEFINER) its query was planned at
-- every call; as PL/pgSQL too, the custom plan (the arrays' lengths known) always looked
-- cheaper. A call took 0.96 ms before, 0.70 ms after (bench/README.md, "Planned once: the
-- counters' lock"). The generic plan probes the primary key once per key.
CREATE OR REPLACE FUNCTION {schema}.lock_finished_counters(p_names text[], p_statuses text[], p_shards smallint[])
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    locked integer;
BEGIN
    SELECT count(*)::integer INTO locked FROM (
        SELECT 1 FROM {schema}.execution_counts c
          JOIN unnest(p_names, p_statuses, p_shards) AS k(name, status, shard)
            ON c.workflow_name = k.name AND c.status = k.status AND c.shard = k.shard
         ORDER BY c.workflow_name, c.status, c.shard
           FOR UPDATE OF c
    ) rows_locked;
    RETURN locked;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.lock_finished_counters(text[], text[], smallint[]) FROM PUBLIC;
