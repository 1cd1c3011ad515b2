-- add_schedule(): its current definition (created by migration 0007).
--
-- An operator adds a schedule from the CLI (source 'cli'), audited. The caller computes
-- p_next_tick (cron is evaluated in Python, never here).
CREATE OR REPLACE FUNCTION {schema}.add_schedule(
    p_name text, p_cron text, p_timezone text, p_workflow text, p_input jsonb,
    p_catch_up boolean, p_next_tick timestamptz, p_by text, p_comment text
) RETURNS timestamptz
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    s schedules%ROWTYPE;
BEGIN
    SELECT * INTO s FROM schedules WHERE name = p_name FOR UPDATE;
    IF FOUND THEN
        RAISE EXCEPTION 'cannot add schedule "%": a schedule with that name exists (%, % % for workflow "%")',
            p_name, CASE s.source WHEN 'code' THEN 'declared in code' ELSE 'added by ' || coalesce(s.created_by, '?') END,
            s.cron, s.timezone, s.workflow_name
            USING ERRCODE = 'KS409',
                  HINT = 'Choose another name, or remove it first: kestrel-console schedule remove ' || p_name;
    END IF;
    INSERT INTO schedules (name, cron, timezone, workflow_name, input, catch_up, next_tick,
                           source, created_by)
    VALUES (p_name, p_cron, p_timezone, p_workflow, p_input, p_catch_up, p_next_tick, 'cli', p_by);
    INSERT INTO operator_actions (actor, action, comment, details)
    VALUES (p_by, 'add_schedule', p_comment,
            jsonb_build_object('schedule', p_name, 'cron', p_cron, 'timezone', p_timezone,
                               'workflow', p_workflow, 'input', p_input, 'catch_up', p_catch_up));
    RETURN p_next_tick;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.add_schedule(text, text, text, text, jsonb, boolean, timestamptz, text, text) FROM PUBLIC;
