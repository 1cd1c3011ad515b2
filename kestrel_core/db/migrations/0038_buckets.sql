-- Kestrel schema, version 38: every execution has a bucket (docs/scale.md, "The design: buckets").
--
-- A bucket is one of BUCKETS (64, fixed: kestrel_core.dispatch.buckets) slices of the work,
-- stored at insert and never changed: the unit a Citus layout distributes by, and on one
-- primary the unit workers share out when started with buckets (WorkerSettings.buckets).
-- An execution with a concurrency key takes the key's bucket (hash of the key), a child its
-- parent's, so that a key's executions, and a parent and its children, live together; any
-- other takes a random one (a column default: no trigger on the unkeyed insert). The ready
-- table carries its execution's bucket, so a claim of a set of buckets is the same ordered
-- walk of the claim index with one more filter on the row it already reads.
--
-- In place and cheap: a NOT NULL column with a constant default is a catalog change (no
-- rewrite, also of the history's partitions); existing executions and ready rows are in
-- bucket 0, a bucket like any other. The random default applies from here on.
ALTER TABLE {schema}.workflow_executions ADD COLUMN bucket smallint NOT NULL DEFAULT 0;
ALTER TABLE {schema}.workflow_executions ALTER COLUMN bucket SET DEFAULT floor(random() * 64)::smallint;
ALTER TABLE {schema}.executions_ready ADD COLUMN bucket smallint NOT NULL DEFAULT 0;
-- How many bucket groups a worker serves its share of (NULL: buckets off); workers share the
-- groups out among the live workers of the same count (kestrel_core.dispatch.buckets).
ALTER TABLE {schema}.workers ADD COLUMN bucket_groups smallint;

-- bucket_assigned(): its current definition lives in schema/functions/.
CREATE FUNCTION {schema}.bucket_assigned() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN NEW;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.bucket_assigned() FROM PUBLIC;
CREATE TRIGGER bucket_assigned
    BEFORE INSERT ON {schema}.workflow_executions
    FOR EACH ROW
    WHEN (NEW.concurrency_key IS NOT NULL OR NEW.parent_id IS NOT NULL)
    EXECUTE FUNCTION {schema}.bucket_assigned();
