-- ready_recheck(): its current definition (created by migration 0024).
--
-- At commit: an execution whose ready row a non-owner's DELETE took must no longer be
-- 'enqueued' (a claim moved it to 'running'), or must have a ready row again.
CREATE OR REPLACE FUNCTION {schema}.ready_recheck() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM {schema}.ready_rechecks WHERE id = NEW.id;
    IF EXISTS (SELECT 1 FROM {schema}.workflow_executions e WHERE e.id = NEW.id AND e.status = 'enqueued')
       AND NOT EXISTS (SELECT 1 FROM {schema}.executions_ready r WHERE r.id = NEW.id) THEN
        RAISE EXCEPTION 'permission denied to take enqueued execution % out of the ready queue as role % without claiming it',
            NEW.id, session_user
            USING ERRCODE = '42501',
                  HINT = 'An enqueued execution leaves the ready queue by a claim (to running) or by kestrel-console cancel (audited).';
    END IF;
    RETURN NULL;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.ready_recheck() FROM PUBLIC;
