-- lock_schedule(): its current definition (created by its file, for the operator functions on
-- a schedule: set_schedule_paused, trigger_schedule, remove_schedule).
--
-- An operator's action on one schedule locks its row (FOR UPDATE, or FOR SHARE when
-- p_for_share: a trigger only reads it), which must exist: else refused with KS404 as
-- 'cannot <p_verb>: no schedule named ...', as lock_execution does for an execution. Called
-- only by those SECURITY DEFINER functions, as their owner: no role needs EXECUTE on it.
-- Returns the locked row.
CREATE OR REPLACE FUNCTION {schema}.lock_schedule(p_name text, p_verb text, p_for_share boolean)
RETURNS {schema}.schedules
LANGUAGE plpgsql SET search_path = {schema}, pg_temp AS $$
DECLARE
    s schedules%ROWTYPE;
BEGIN
    IF p_for_share THEN
        SELECT * INTO s FROM schedules WHERE name = p_name FOR SHARE;
    ELSE
        SELECT * INTO s FROM schedules WHERE name = p_name FOR UPDATE;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cannot %: no schedule named "%"', p_verb, p_name
            USING ERRCODE = 'KS404', HINT = 'Schedules are listed by: kestrel-console schedule list';
    END IF;
    RETURN s;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.lock_schedule(text, text, boolean) FROM PUBLIC;
