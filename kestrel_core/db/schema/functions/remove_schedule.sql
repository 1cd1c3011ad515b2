-- remove_schedule(): its current definition (created by migration 0007; the audit's role explicit since 0024).
--
-- An operator removes a schedule, audited (the audit row keeps what it was).
CREATE OR REPLACE FUNCTION {schema}.remove_schedule(p_name text, p_by text, p_comment text)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    s schedules%ROWTYPE;
BEGIN
    s := lock_schedule(p_name, 'remove', false);
    DELETE FROM schedules WHERE name = p_name;
    INSERT INTO operator_actions (actor, db_user, action, comment, details)
    VALUES (p_by, session_user, 'remove_schedule', p_comment,
            jsonb_build_object('schedule', p_name, 'cron', s.cron, 'timezone', s.timezone,
                               'workflow', s.workflow_name, 'source', s.source,
                               'input', s.input, 'catch_up', s.catch_up));
    RETURN s.source;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.remove_schedule(text, text, text) FROM PUBLIC;
