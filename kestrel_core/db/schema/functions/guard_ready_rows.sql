-- guard_ready_rows(): its current definition (created by migration 0024).
--
-- A non-owner never rewrites a ready row; a DELETE of ready rows whose executions are still
-- 'enqueued' at the end of the statement is checked again at commit (ready_recheck).
CREATE OR REPLACE FUNCTION {schema}.guard_ready_rows() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    live bigint[];
BEGIN
    -- Who may TRUNCATE the ready table (its owner, so the SECURITY DEFINER triggers that keep
    -- it; a superuser) could empty it anyway: it passes. A simple expression, not a query: the
    -- claim pays this call once per statement.
    IF TG_OP = 'UPDATE' THEN
        IF has_table_privilege(TG_RELID, 'TRUNCATE') THEN
            RETURN NEW;
        END IF;
        RAISE EXCEPTION 'permission denied to rewrite the ready row of execution % as role %', OLD.id, current_user
            USING ERRCODE = '42501';
    END IF;
    IF has_table_privilege(TG_RELID, 'TRUNCATE') THEN
        RETURN NULL;
    END IF;
    -- The claim's statement moved its executions to 'running' before this runs (an AFTER
    -- statement trigger fires at the end of the whole statement): nothing is left to check.
    SELECT array_agg(DISTINCT g.id) INTO live
      FROM gone g
     WHERE EXISTS (SELECT 1 FROM {schema}.workflow_executions e WHERE e.id = g.id AND e.status = 'enqueued');
    IF live IS NOT NULL THEN
        INSERT INTO {schema}.ready_rechecks (id) SELECT unnest(live);
    END IF;
    RETURN NULL;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.guard_ready_rows() FROM PUBLIC;
