-- set_schedule_paused(): its current definition (created by migration 0007; the audit's role explicit since 0024).
--
-- Pausing stops the ticks; resuming starts again from p_next_tick (the first tick after now,
-- computed by the caller): the ticks missed while paused are never enqueued.
CREATE OR REPLACE FUNCTION {schema}.set_schedule_paused(
    p_name text, p_paused boolean, p_next_tick timestamptz, p_by text, p_comment text
) RETURNS timestamptz
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    s schedules%ROWTYPE;
    verb text := CASE WHEN p_paused THEN 'pause' ELSE 'resume' END;
BEGIN
    s := lock_schedule(p_name, verb, false);
    IF s.paused = p_paused THEN
        RAISE EXCEPTION 'cannot %: schedule "%" is already %', verb, p_name,
            CASE WHEN p_paused THEN format('paused (by %s at %s)', coalesce(s.paused_by, '?'),
                                           to_char(s.paused_at, 'YYYY-MM-DD HH24:MI:SS TZ'))
                 ELSE 'running' END
            USING ERRCODE = 'KS409';
    END IF;
    IF NOT p_paused AND p_next_tick IS NULL THEN
        RAISE EXCEPTION 'cannot resume schedule "%": no next tick given', p_name USING ERRCODE = 'KS409';
    END IF;
    UPDATE schedules
       SET paused = p_paused,
           paused_by = CASE WHEN p_paused THEN p_by END,
           paused_at = CASE WHEN p_paused THEN now() END,
           next_tick = CASE WHEN p_paused THEN next_tick ELSE p_next_tick END,
           updated_at = now()
     WHERE name = p_name;
    INSERT INTO operator_actions (actor, db_user, action, comment, details)
    VALUES (p_by, session_user, verb || '_schedule', p_comment,
            jsonb_build_object('schedule', p_name, 'workflow', s.workflow_name,
                               'next_tick', CASE WHEN p_paused THEN NULL ELSE p_next_tick END));
    RETURN CASE WHEN p_paused THEN NULL ELSE p_next_tick END;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.set_schedule_paused(text, boolean, timestamptz, text, text) FROM PUBLIC;
