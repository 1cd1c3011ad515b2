-- Kestrel schema, version 20: partitioned history, first of three steps (issue 22).
--
-- workflow_executions becomes partitioned by RANGE (id), and operation_outputs, step_attempts
-- and workflow_waits by RANGE (execution_id), with the same bounds (one set of partitions per id
-- range: <table>_p<lo>). Today's tables become the first partition, [0, hi), without rewriting
-- a row: this step adds CHECK (... < hi) NOT VALID (a short ACCESS EXCLUSIVE lock, no scan),
-- version 21 validates it while writes go on, version 22 swaps in the partitioned parents and
-- attaches today's tables (the validated CHECK spares ATTACH its scan).
--
-- Here:
-- 1. history_settings: the range size (ids per partition, default 1,000,000) and how many
--    ranges ensure_partitions() keeps ahead of the id sequence. history_partitions: the ranges
--    (lo, hi, created_at), read by ensure_partitions() and by prune.
-- 2. execution_keys (key PRIMARY KEY, execution_id): the idempotency and engine keys. A unique
--    index on a partitioned table must contain the partition key, so these keys leave
--    workflow_executions' unique indexes for one table (the CHECK reserves 'schedule:' and
--    'child:' for engine keys: one namespace holds both). A BEFORE INSERT row trigger inserts
--    the key ON CONFLICT DO NOTHING and skips the row when the key is taken: what ON CONFLICT
--    (key) DO NOTHING did, waiting for a concurrent inserter of the same key as before.
--    The keys already written are copied first without blocking writers, then the trigger is
--    created (its SHARE ROW EXCLUSIVE lock waits for in-flight inserts), then every key is
--    copied again (ON CONFLICT DO NOTHING): those committed between the two.
-- 3. The first range's bound: hi = the next multiple of the range size at least one whole
--    range past today's highest id; ids inserted until version 22 must stay below it.
CREATE TABLE {schema}.history_settings (
    only_row   boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    range_size bigint  NOT NULL DEFAULT 1000000 CHECK (range_size >= 1000),
    ahead      integer NOT NULL DEFAULT 3 CHECK (ahead BETWEEN 1 AND 50)
);
INSERT INTO {schema}.history_settings DEFAULT VALUES;

CREATE TABLE {schema}.history_partitions (
    lo         bigint PRIMARY KEY,
    hi         bigint NOT NULL CHECK (hi > lo),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE {schema}.execution_keys (
    key          text PRIMARY KEY,
    execution_id bigint NOT NULL
);
CREATE INDEX execution_keys_execution_idx ON {schema}.execution_keys (execution_id);

INSERT INTO {schema}.execution_keys (key, execution_id)
SELECT idempotency_key, id FROM {schema}.workflow_executions WHERE idempotency_key IS NOT NULL
UNION ALL
SELECT engine_key, id FROM {schema}.workflow_executions WHERE engine_key IS NOT NULL
ON CONFLICT DO NOTHING;

-- Created here (as it is today) because the trigger needs it from now on; its current
-- definition is in schema/functions/execution_key_taken.sql.
CREATE FUNCTION {schema}.execution_key_taken() RETURNS trigger
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
CREATE TRIGGER execution_key_taken
    BEFORE INSERT ON {schema}.workflow_executions
    FOR EACH ROW
    WHEN (NEW.idempotency_key IS NOT NULL OR NEW.engine_key IS NOT NULL)
    EXECUTE FUNCTION {schema}.execution_key_taken();

-- Every key again, not only ids above the first copy's highest: a transaction open during the
-- first copy may commit a key with a lower id. Writers wait for this pass (the trigger's lock):
-- two index-only scans of the key indexes (110,000 keys of a 1M history: ~0.1 s).
INSERT INTO {schema}.execution_keys (key, execution_id)
SELECT idempotency_key, id FROM {schema}.workflow_executions WHERE idempotency_key IS NOT NULL
UNION ALL
SELECT engine_key, id FROM {schema}.workflow_executions WHERE engine_key IS NOT NULL
ON CONFLICT DO NOTHING;

DO $$
DECLARE
    r bigint := (SELECT range_size FROM {schema}.history_settings);
    hi bigint;
BEGIN
    hi := (coalesce((SELECT max(id) FROM {schema}.workflow_executions), 0) / r + 2) * r;
    INSERT INTO {schema}.history_partitions (lo, hi) VALUES (0, hi);
    EXECUTE format('ALTER TABLE {schema}.workflow_executions ADD CONSTRAINT workflow_executions_p0_bound '
                   'CHECK (id >= 0 AND id < %s) NOT VALID', hi);
    EXECUTE format('ALTER TABLE {schema}.operation_outputs ADD CONSTRAINT operation_outputs_p0_bound '
                   'CHECK (execution_id >= 0 AND execution_id < %s) NOT VALID', hi);
    EXECUTE format('ALTER TABLE {schema}.step_attempts ADD CONSTRAINT step_attempts_p0_bound '
                   'CHECK (execution_id >= 0 AND execution_id < %s) NOT VALID', hi);
    EXECUTE format('ALTER TABLE {schema}.workflow_waits ADD CONSTRAINT workflow_waits_p0_bound '
                   'CHECK (execution_id >= 0 AND execution_id < %s) NOT VALID', hi);
END
$$;
