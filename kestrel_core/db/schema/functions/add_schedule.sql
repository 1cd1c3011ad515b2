-- add_schedule(): its current definition (created by migration 0007, last redefined by 0013; the audit's role explicit since 0024).
--
-- An operator adds a schedule from the CLI (source 'cli'), audited. The caller computes
-- p_next_tick (cron is evaluated in Python, never here).
-- Validates what it stores (cron shape, a time zone Postgres knows, a workflow name enqueue
-- would accept, an input object, a finite first tick); the worker role may call it.
CREATE OR REPLACE FUNCTION {schema}.add_schedule(
    p_name text, p_cron text, p_timezone text, p_workflow text, p_input jsonb,
    p_catch_up boolean, p_next_tick timestamptz, p_by text, p_comment text
) RETURNS timestamptz
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    s schedules%ROWTYPE;
    problem text;
BEGIN
    -- What kestrel_core.schedules.check refuses, checked again for a direct call: croniter
    -- has the last word on a cron (the caller computes the first tick with it), this refuses
    -- what can never be one. Keep the limits in step with schedules.py and enqueue.py.
    problem := CASE
        WHEN p_name IS NULL OR p_name !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$'
            THEN format('invalid schedule name %L: use letters, digits, ''_'', ''.'', '':'' or ''-'' (at most 100 characters)', p_name)
        WHEN p_workflow IS NULL OR btrim(p_workflow) = '' OR length(p_workflow) > 200
            THEN format('invalid workflow name %L: a non-empty name of at most 200 characters', left(p_workflow, 60))
        WHEN p_cron IS NULL OR NOT (
                 p_cron ~ '^@(yearly|annually|monthly|weekly|daily|midnight|hourly)$'
              OR p_cron ~ '^[0-9A-Za-z*?/,#-]+( [0-9A-Za-z*?/,#-]+){4,5}$')
            THEN format('invalid cron expression %L: 5 fields (minute hour day-of-month month day-of-week), 6 with seconds last, or @hourly/@daily/...', left(p_cron, 60))
        WHEN p_timezone IS NULL OR NOT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = p_timezone)
            THEN format('unknown timezone %L: use an IANA name such as ''UTC'' or ''Europe/Paris''', left(p_timezone, 60))
        WHEN p_input IS NOT NULL AND jsonb_typeof(p_input) <> 'object'
            THEN 'the input of a schedule must be a JSON object'
        WHEN p_catch_up IS NULL THEN 'catch_up must be true or false'
        WHEN p_next_tick IS NULL OR NOT isfinite(p_next_tick) THEN 'give the first tick (a finite time)'
    END;
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'cannot add schedule: %', problem USING ERRCODE = 'KS409';
    END IF;
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
    INSERT INTO operator_actions (actor, db_user, action, comment, details)
    VALUES (p_by, session_user, 'add_schedule', p_comment,
            jsonb_build_object('schedule', p_name, 'cron', p_cron, 'timezone', p_timezone,
                               'workflow', p_workflow, 'input', p_input, 'catch_up', p_catch_up));
    RETURN p_next_tick;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.add_schedule(text, text, text, text, jsonb, boolean, timestamptz, text, text) FROM PUBLIC;
