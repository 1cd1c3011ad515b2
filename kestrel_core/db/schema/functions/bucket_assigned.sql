-- bucket_assigned(): its current definition (created by migration 0038, which attaches the
-- trigger of the same name to workflow_executions).
--
-- Before the insert of a child or of an execution with a concurrency key (its WHEN clause;
-- any other keeps the column's random default): a keyed execution takes the bucket of its key,
-- also when it is a child (every execution of a key in one bucket: a per-key limit counted
-- within a bucket is exact, docs/scale.md), an unkeyed child its parent's, so that each lives
-- with its own. The key's bucket is hashtext(key) mod 64 (kestrel_core.dispatch.buckets.BUCKETS),
-- taken non-negative. Whatever the inserter wrote in the column is overwritten: the bucket is
-- the engine's to choose.
CREATE OR REPLACE FUNCTION {schema}.bucket_assigned() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    parent_bucket smallint;
BEGIN
    IF NEW.concurrency_key IS NOT NULL THEN
        NEW.bucket := ((hashtext(NEW.concurrency_key)::bigint + 2147483648) % 64)::smallint;
        RETURN NEW;
    END IF;
    SELECT p.bucket INTO parent_bucket FROM {schema}.workflow_executions p WHERE p.id = NEW.parent_id;
    IF FOUND THEN
        NEW.bucket := parent_bucket;
    END IF;
    RETURN NEW;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.bucket_assigned() FROM PUBLIC;
