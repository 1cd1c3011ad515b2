-- Kestrel schema, version 22: partitioned history, the swap (issue 22).
--
-- workflow_executions (by id), operation_outputs, step_attempts and workflow_waits (by
-- execution_id) become partitioned tables under their own names, so every public SQL (the
-- contract's, the reports in queries/, the console's) reads them unchanged: no views. Today's
-- tables, renamed <table>_p0, become their first partition [0, hi) (hi: version 20). One short
-- transaction under ACCESS EXCLUSIVE locks (lock_timeout 5 s: a migrate that cannot have them
-- fails and is run again, instead of queueing every writer behind a long report):
-- - nothing is rewritten or scanned: ATTACH trusts the CHECK validated by version 21, and
--   adopts each existing index that matches the parent's (same definition), so none is built;
-- - the identity columns (workflow_executions.id, step_attempts.id) move to the parent, under
--   the same sequence names, restarted past the highest id given so far;
-- - step_attempts' primary key becomes (execution_id, id) (built by version 21): a unique
--   index on a partitioned table must hold the partition key;
-- - the unique indexes on idempotency_key and engine_key go: execution_keys holds the keys
--   (version 20);
-- - the step tables' foreign keys to workflow_executions go: their ON DELETE CASCADE becomes a
--   statement trigger (execution_deleted) that deletes the steps, waits, attempts and keys of
--   deleted executions, and TRUNCATE of workflow_executions empties them too
--   (execution_truncated). A foreign key would also make every new step-table partition, and
--   every drop of one, lock workflow_executions against writers (SHARE ROW EXCLUSIVE), and
--   cost a lookup and a row lock on the execution at every checkpoint insert;
-- - every trigger moves to the parent (row triggers fire once per row, on the partition the row
--   is in; statement triggers with transition tables fire on the parent).
-- Later ranges are created ahead by ensure_partitions() (migrate and the workers' upkeep) and
-- dropped by prune (drop_history_range()).

-- Created here (as they are today) because the triggers below need them; their current
-- definitions are in schema/functions/.
CREATE FUNCTION {schema}.execution_deleted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    ids bigint[] := ARRAY(SELECT id FROM old_rows ORDER BY id);
BEGIN
    IF cardinality(ids) = 0 THEN
        RETURN NULL;
    END IF;
    DELETE FROM {schema}.operation_outputs WHERE execution_id = ANY (ids);
    DELETE FROM {schema}.step_attempts WHERE execution_id = ANY (ids);
    DELETE FROM {schema}.workflow_waits WHERE execution_id = ANY (ids);
    DELETE FROM {schema}.execution_keys WHERE execution_id = ANY (ids);
    RETURN NULL;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.execution_deleted() FROM PUBLIC;
CREATE FUNCTION {schema}.execution_truncated() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM {schema}.operation_outputs;
    DELETE FROM {schema}.step_attempts;
    DELETE FROM {schema}.workflow_waits;
    DELETE FROM {schema}.execution_keys;
    RETURN NULL;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.execution_truncated() FROM PUBLIC;

SET LOCAL lock_timeout = '5s';
LOCK TABLE {schema}.workflow_executions, {schema}.operation_outputs, {schema}.step_attempts,
           {schema}.workflow_waits IN ACCESS EXCLUSIVE MODE;

DROP INDEX {schema}.workflow_executions_idempotency_key_idx;
DROP INDEX {schema}.workflow_executions_engine_key_idx;
ALTER TABLE {schema}.operation_outputs DROP CONSTRAINT operation_outputs_execution_id_fkey;
ALTER TABLE {schema}.step_attempts DROP CONSTRAINT step_attempts_execution_id_fkey;
ALTER TABLE {schema}.workflow_waits DROP CONSTRAINT workflow_waits_execution_id_fkey;
ALTER TABLE {schema}.step_attempts DROP CONSTRAINT step_attempts_pkey;
ALTER TABLE {schema}.step_attempts ADD CONSTRAINT step_attempts_pkey PRIMARY KEY USING INDEX step_attempts_p0_pkey;

DO $$
DECLARE
    ns text := (SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE c.oid = '{schema}.workflow_executions'::regclass);
    hi bigint := (SELECT p.hi FROM {schema}.history_partitions p WHERE p.lo = 0);
    t text;
    col text;
    old text;
    pk text;
    seq text;
    next_id bigint;
    index_defs text[];
    trigger_defs text[];
    d text;
    r record;
BEGIN
    FOREACH t IN ARRAY ARRAY['workflow_executions', 'operation_outputs', 'step_attempts', 'workflow_waits'] LOOP
        col := CASE t WHEN 'workflow_executions' THEN 'id' ELSE 'execution_id' END;
        old := t || '_p0';
        SELECT pg_get_constraintdef(c.oid) INTO pk FROM pg_constraint c
         WHERE c.conrelid = format('%I.%I', ns, t)::regclass AND c.contype = 'p';
        SELECT coalesce(array_agg(pg_get_indexdef(i.indexrelid) ORDER BY i.indexrelid), '{}') INTO index_defs
          FROM pg_index i
         WHERE i.indrelid = format('%I.%I', ns, t)::regclass AND NOT i.indisprimary;
        SELECT coalesce(array_agg(pg_get_triggerdef(g.oid) ORDER BY g.tgname), '{}') INTO trigger_defs
          FROM pg_trigger g
         WHERE g.tgrelid = format('%I.%I', ns, t)::regclass AND NOT g.tgisinternal;
        FOR r IN SELECT g.tgname FROM pg_trigger g
                  WHERE g.tgrelid = format('%I.%I', ns, t)::regclass AND NOT g.tgisinternal LOOP
            EXECUTE format('DROP TRIGGER %I ON %I.%I', r.tgname, ns, t);
        END LOOP;
        FOR r IN SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                  WHERE i.indrelid = format('%I.%I', ns, t)::regclass LOOP
            EXECUTE format('ALTER INDEX %I.%I RENAME TO %I', ns, r.relname,
                           old || substr(r.relname, length(t) + 1));
        END LOOP;
        EXECUTE format('ALTER TABLE %I.%I RENAME TO %I', ns, t, old);

        next_id := NULL;
        seq := CASE WHEN t IN ('workflow_executions', 'step_attempts')
                    THEN pg_get_serial_sequence(format('%I.%I', ns, old), 'id') END;
        IF seq IS NOT NULL THEN
            EXECUTE format('SELECT greatest(coalesce(pg_sequence_last_value(%L), 0), coalesce(max(id), 0)) + 1 FROM %I.%I',
                           seq, ns, old) INTO next_id;
            EXECUTE format('ALTER TABLE %I.%I ALTER COLUMN id DROP IDENTITY', ns, old);
        END IF;

        EXECUTE format('CREATE TABLE %I.%I (LIKE %I.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE (%I)',
                       ns, t, ns, old, col);
        EXECUTE format('ALTER TABLE %I.%I DROP CONSTRAINT %I', ns, t, old || '_bound');
        IF next_id IS NOT NULL THEN
            EXECUTE format('ALTER TABLE %I.%I ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY '
                           '(SEQUENCE NAME %I.%I START WITH %s)', ns, t, ns, t || '_id_seq', next_id);
        END IF;
        EXECUTE format('ALTER TABLE %I.%I ADD CONSTRAINT %I %s', ns, t, t || '_pkey', pk);
        FOREACH d IN ARRAY index_defs LOOP
            EXECUTE d;
        END LOOP;
        FOREACH d IN ARRAY trigger_defs LOOP
            EXECUTE d;
        END LOOP;
        EXECUTE format('ALTER TABLE %I.%I ATTACH PARTITION %I.%I FOR VALUES FROM (0) TO (%s)', ns, t, ns, old, hi);
        EXECUTE format('ALTER TABLE %I.%I DROP CONSTRAINT %I', ns, old, old || '_bound');
    END LOOP;
END
$$;

CREATE TRIGGER execution_deleted
    AFTER DELETE ON {schema}.workflow_executions
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.execution_deleted();
CREATE TRIGGER execution_truncated
    AFTER TRUNCATE ON {schema}.workflow_executions
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.execution_truncated();
