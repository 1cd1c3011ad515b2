-- count_finished_statement(): its current definition (created by migration 0040, in place of
-- count_finished_inserted and count_finished_deleted, which 0003 created).
--
-- Statement triggers with transition tables (execution_counts_insert, execution_counts_delete:
-- each names its rows changed_rows): bulk inserts of finished rows (imports, test seeding) and
-- deletes (pruning) cost one grouped upsert per statement, not one per row; an insert counts
-- its finished rows in, a delete counts them out. Enqueues insert 'enqueued' rows: the grouped
-- query finds nothing and writes nothing.
CREATE OR REPLACE FUNCTION {schema}.count_finished_statement() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO {schema}.execution_counts AS c (workflow_name, status, shard, n)
    SELECT workflow_name, status, {schema}.count_shard(id),
           CASE WHEN TG_OP = 'DELETE' THEN -count(*) ELSE count(*) END
      FROM changed_rows WHERE status IN ('success', 'error', 'cancelled')
     GROUP BY 1, 2, 3
     ORDER BY 1, 2, 3
    ON CONFLICT (workflow_name, status, shard) DO UPDATE SET n = c.n + excluded.n;
    RETURN NULL;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.count_finished_statement() FROM PUBLIC;
