-- Kestrel schema, version 3: what the console needs to stay O(live rows) on a big history.
--
-- 1. execution_counts: exact counts of FINISHED executions per (workflow, status), kept by
--    triggers in the same transaction as the change, so a reader's snapshot sees counts that
--    match `SELECT workflow_name, status, count(*) ... GROUP BY 1, 2` exactly. Live statuses
--    are counted through their partial indexes; finished ones cannot be (they are the history),
--    and an index-only count would be O(history) and depends on the visibility map.
--    Each (workflow, status) is split over 16 shards (id % 16) so that workers finishing
--    executions of the same workflow do not queue on one counter row until commit.
--    The UPDATE trigger has a WHEN clause: claims, lease renewals and waits never call it.
-- 2. An index on finished executions by (status, id): `list --status error` (newest first)
--    on a big history, without a sequential scan.

CREATE TABLE {schema}.execution_counts (
    workflow_name  text     NOT NULL,
    status         text     NOT NULL,
    shard          smallint NOT NULL,
    n              bigint   NOT NULL DEFAULT 0,
    PRIMARY KEY (workflow_name, status, shard)
);
ALTER TABLE {schema}.execution_counts SET (
    fillfactor = 50,
    autovacuum_vacuum_scale_factor = 0.0,
    autovacuum_vacuum_threshold = 1000
);

-- Row triggers: one finished row in or out (the engine's finish, cancel, requeue).
CREATE FUNCTION {schema}.count_finished_row() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.status IN ('success', 'error', 'cancelled') THEN
        INSERT INTO {schema}.execution_counts AS c (workflow_name, status, shard, n)
        VALUES (OLD.workflow_name, OLD.status, OLD.id % 16, -1)
        ON CONFLICT (workflow_name, status, shard) DO UPDATE SET n = c.n - 1;
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') AND NEW.status IN ('success', 'error', 'cancelled') THEN
        INSERT INTO {schema}.execution_counts AS c (workflow_name, status, shard, n)
        VALUES (NEW.workflow_name, NEW.status, NEW.id % 16, 1)
        ON CONFLICT (workflow_name, status, shard) DO UPDATE SET n = c.n + 1;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER execution_counts_update
    AFTER UPDATE OF status, workflow_name ON {schema}.workflow_executions
    FOR EACH ROW
    WHEN ((OLD.status, OLD.workflow_name) IS DISTINCT FROM (NEW.status, NEW.workflow_name)
          AND (OLD.status IN ('success', 'error', 'cancelled')
               OR NEW.status IN ('success', 'error', 'cancelled')))
    EXECUTE FUNCTION {schema}.count_finished_row();

-- Statement triggers with transition tables: bulk inserts of finished rows (imports, test
-- seeding) and deletes (pruning) cost one grouped upsert per statement, not one per row.
-- Enqueues insert 'enqueued' rows: the grouped query finds nothing and writes nothing.
CREATE FUNCTION {schema}.count_finished_inserted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO {schema}.execution_counts AS c (workflow_name, status, shard, n)
    SELECT workflow_name, status, id % 16, count(*)
      FROM new_rows WHERE status IN ('success', 'error', 'cancelled')
     GROUP BY 1, 2, 3
     ORDER BY 1, 2, 3
    ON CONFLICT (workflow_name, status, shard) DO UPDATE SET n = c.n + excluded.n;
    RETURN NULL;
END
$$;

CREATE FUNCTION {schema}.count_finished_deleted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO {schema}.execution_counts AS c (workflow_name, status, shard, n)
    SELECT workflow_name, status, id % 16, -count(*)
      FROM old_rows WHERE status IN ('success', 'error', 'cancelled')
     GROUP BY 1, 2, 3
     ORDER BY 1, 2, 3
    ON CONFLICT (workflow_name, status, shard) DO UPDATE SET n = c.n + excluded.n;
    RETURN NULL;
END
$$;

CREATE FUNCTION {schema}.count_finished_truncated() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM {schema}.execution_counts;
    RETURN NULL;
END
$$;

CREATE TRIGGER execution_counts_insert
    AFTER INSERT ON {schema}.workflow_executions
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.count_finished_inserted();
CREATE TRIGGER execution_counts_delete
    AFTER DELETE ON {schema}.workflow_executions
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.count_finished_deleted();
CREATE TRIGGER execution_counts_truncate
    AFTER TRUNCATE ON {schema}.workflow_executions
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.count_finished_truncated();

-- The triggers exist (and hold their lock on the table until commit) before this count:
-- no finish can slip between the two.
INSERT INTO {schema}.execution_counts (workflow_name, status, shard, n)
SELECT workflow_name, status, id % 16, count(*)
  FROM {schema}.workflow_executions
 WHERE status IN ('success', 'error', 'cancelled')
 GROUP BY 1, 2, 3;

CREATE INDEX workflow_executions_finished_status_idx
    ON {schema}.workflow_executions (status, id)
    WHERE status IN ('success', 'error', 'cancelled');
