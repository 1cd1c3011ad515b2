-- refuse_future_cutoff(): its current definition (created by its file, for prune_finished and
-- drop_history_range).
--
-- Retention deletes what finished before a cutoff: one in the future is every finished
-- execution, however recent. Checked in the database, not only by the callers; refused with
-- KS409 as 'cannot <p_action>: ... (prune <p_verb> what finished before it)'. Called only by
-- those SECURITY DEFINER functions, as their owner: no role needs EXECUTE on it.
CREATE OR REPLACE FUNCTION {schema}.refuse_future_cutoff(p_before timestamptz, p_action text, p_verb text)
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF p_before > clock_timestamp() THEN
        RAISE EXCEPTION 'cannot %: the cutoff % is in the future (prune % what finished before it)',
            p_action, to_char(p_before, 'YYYY-MM-DD HH24:MI:SS TZ'), p_verb USING ERRCODE = 'KS409';
    END IF;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.refuse_future_cutoff(timestamptz, text, text) FROM PUBLIC;
