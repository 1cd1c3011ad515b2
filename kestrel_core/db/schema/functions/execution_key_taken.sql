-- execution_key_taken(): its current definition (created by migration 0020).
--
-- BEFORE INSERT row trigger on workflow_executions, for rows with an idempotency or engine
-- key: the key goes into execution_keys (ON CONFLICT DO NOTHING, which waits for a concurrent
-- inserter of the same key and skips if it commits), and a row whose key is taken is skipped
-- (NULL): what ON CONFLICT (key) DO NOTHING on the row did when the keys were unique indexes
-- of workflow_executions, which a partitioned table cannot have. The statement's own snapshot
-- does not see the keys its triggers insert, so a lookup of the holders in the same statement
-- finds only keys taken before it (enqueue.ENQUEUE relies on that, as it did).
CREATE OR REPLACE FUNCTION {schema}.execution_key_taken() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NEW.idempotency_key IS NOT NULL THEN
        INSERT INTO {schema}.execution_keys (key, execution_id) VALUES (NEW.idempotency_key, NEW.id)
        ON CONFLICT DO NOTHING;
        IF NOT FOUND THEN
            RETURN NULL;
        END IF;
    END IF;
    IF NEW.engine_key IS NOT NULL THEN
        INSERT INTO {schema}.execution_keys (key, execution_id) VALUES (NEW.engine_key, NEW.id)
        ON CONFLICT DO NOTHING;
        IF NOT FOUND THEN
            DELETE FROM {schema}.execution_keys WHERE key = NEW.idempotency_key AND execution_id = NEW.id;
            RETURN NULL;
        END IF;
    END IF;
    RETURN NEW;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.execution_key_taken() FROM PUBLIC;
