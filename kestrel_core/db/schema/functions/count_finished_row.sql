-- count_finished_row(): its current definition (created by migration 0003).
--
-- Row triggers: one finished row in or out (the engine's finish, cancel, requeue).
CREATE OR REPLACE FUNCTION {schema}.count_finished_row() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.status IN ('success', 'error', 'cancelled') THEN
        INSERT INTO {schema}.execution_counts AS c (workflow_name, status, shard, n)
        VALUES (OLD.workflow_name, OLD.status, {schema}.count_shard(OLD.id), -1)
        ON CONFLICT (workflow_name, status, shard) DO UPDATE SET n = c.n - 1;
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') AND NEW.status IN ('success', 'error', 'cancelled') THEN
        INSERT INTO {schema}.execution_counts AS c (workflow_name, status, shard, n)
        VALUES (NEW.workflow_name, NEW.status, {schema}.count_shard(NEW.id), 1)
        ON CONFLICT (workflow_name, status, shard) DO UPDATE SET n = c.n + 1;
    END IF;
    RETURN NULL;
END
$$;
