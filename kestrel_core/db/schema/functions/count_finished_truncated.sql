-- count_finished_truncated(): its current definition (created by migration 0003).
--
-- Statement trigger: a TRUNCATE of the executions empties the counters too.
CREATE OR REPLACE FUNCTION {schema}.count_finished_truncated() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM {schema}.execution_counts;
    RETURN NULL;
END
$$;
