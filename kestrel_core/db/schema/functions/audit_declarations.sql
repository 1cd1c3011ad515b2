-- audit_declarations(): its current definition (created by migration 0024).
--
-- A change of a queue's limits or of a schedule's definition is audited in the table declarations (apart from the
-- operators' actions), with the database role and what it was.
CREATE OR REPLACE FUNCTION {schema}.audit_declarations() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_TABLE_NAME = 'queues' THEN
        INSERT INTO {schema}.declarations (kind, name, declared, was)
        VALUES ('queue', NEW.name,
                jsonb_build_object('concurrency', NEW.concurrency, 'per_worker', NEW.per_worker,
                                   'rate_limit', NEW.rate_limit, 'rate_period', NEW.rate_period,
                                   'per_key', NEW.per_key, 'priority', NEW.priority),
                CASE WHEN TG_OP = 'UPDATE' THEN
                    jsonb_build_object('concurrency', OLD.concurrency, 'per_worker', OLD.per_worker,
                                       'rate_limit', OLD.rate_limit, 'rate_period', OLD.rate_period,
                                       'per_key', OLD.per_key, 'priority', OLD.priority) END);
    ELSE
        INSERT INTO {schema}.declarations (kind, name, declared, was)
        VALUES ('schedule', NEW.name,
                jsonb_build_object('source', NEW.source, 'created_by', NEW.created_by, 'cron', NEW.cron,
                                   'timezone', NEW.timezone, 'workflow', NEW.workflow_name,
                                   'input', NEW.input, 'catch_up', NEW.catch_up),
                CASE WHEN TG_OP = 'UPDATE' THEN
                    jsonb_build_object('cron', OLD.cron, 'timezone', OLD.timezone, 'workflow', OLD.workflow_name,
                                       'input', OLD.input, 'catch_up', OLD.catch_up) END);
    END IF;
    RETURN NULL;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.audit_declarations() FROM PUBLIC;
