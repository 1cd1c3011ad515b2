-- tag_bulk_batch(): its current definition (created with migration 0031).
--
-- The trigger of operator_actions that names the bulk batch an audited action belongs to.
-- bulk_apply_chunk() sets 'kestrel.bulk_batch' for its transaction; the trigger fires only
-- then (its WHEN clause), and tags the row only when its execution is an item of that batch:
-- a setting made by hand around a single action tags nothing it did not freeze.
CREATE OR REPLACE FUNCTION {schema}.tag_bulk_batch() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    v text := current_setting('kestrel.bulk_batch', true);
BEGIN
    IF v ~ '^[0-9]+$' AND length(v) < 19 AND NEW.execution_id IS NOT NULL AND EXISTS (
        SELECT 1 FROM bulk_batch_items i WHERE i.batch_id = v::bigint AND i.execution_id = NEW.execution_id
    ) THEN
        NEW.batch_id := v::bigint;
    END IF;
    RETURN NEW;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.tag_bulk_batch() FROM PUBLIC;
