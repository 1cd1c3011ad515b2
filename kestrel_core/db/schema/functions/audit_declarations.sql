-- audit_declarations(): its current definition (created by migration 0024).
--
-- A change of a queue's limits or of a schedule's definition is audited in the table declarations (apart from the
-- operators' actions), with the database role and what it was; so is a schedule's next tick moved more than
-- a day ahead (since 0029).
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
    ELSIF TG_OP = 'UPDATE' AND (NEW.cron, NEW.timezone, NEW.workflow_name, NEW.input, NEW.catch_up)
                              IS NOT DISTINCT FROM (OLD.cron, OLD.timezone, OLD.workflow_name, OLD.input, OLD.catch_up) THEN
        -- Only the next tick moved (the trigger audit_schedule_ticks, since 0029): audited when
        -- it lands more than a day ahead (a weekly or rarer cron, or a disguised pause).
        IF NEW.next_tick > clock_timestamp() + interval '1 day' THEN
            INSERT INTO {schema}.declarations (kind, name, declared, was)
            VALUES ('schedule', NEW.name, jsonb_build_object('next_tick', NEW.next_tick),
                    jsonb_build_object('next_tick', OLD.next_tick));
        END IF;
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
