-- count_finished_deleted(): its current definition (created by migration 0003).
--
-- Statement trigger: pruned finished rows leave execution_counts in one grouped upsert.
CREATE OR REPLACE FUNCTION {schema}.count_finished_deleted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO {schema}.execution_counts AS c (workflow_name, status, shard, n)
    SELECT workflow_name, status, {schema}.count_shard(id), -count(*)
      FROM old_rows WHERE status IN ('success', 'error', 'cancelled')
     GROUP BY 1, 2, 3
     ORDER BY 1, 2, 3
    ON CONFLICT (workflow_name, status, shard) DO UPDATE SET n = c.n + excluded.n;
    RETURN NULL;
END
$$;
