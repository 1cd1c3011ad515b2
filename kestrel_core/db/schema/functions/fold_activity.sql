-- fold_activity(): record the dashboard's activity counts of closed minutes.
--
-- Every minute after the last recorded one (at most p_lookback_min back) that closed at least
-- p_settle_s seconds ago gets one row of activity_minutes: executions created, first claimed
-- (started_at), finished and failed in it, counted as the console's live query counts them
-- (kestrel_console/read/overview.py, ACTIVITY): from the live rows (their partial indexes) and
-- the rows finished since the first such minute (workflow_executions_finished_idx), so one call
-- reads O(live + minutes' finishes) rows. Rows older than p_keep_min minutes are deleted.
-- Workers call it about once a minute; two at once compute the same minutes and one insert
-- wins (ON CONFLICT DO NOTHING). PL/pgSQL so that each statement is planned with the bounds'
-- values: a bound the planner cannot see is estimated as a third of the history.
CREATE OR REPLACE FUNCTION {schema}.fold_activity(p_settle_s integer, p_lookback_min integer, p_keep_min integer)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    v_hi timestamptz := date_bin(interval '1 minute', now() - make_interval(secs => p_settle_s),
                                 timestamptz '2000-01-01');
    v_lo timestamptz;
    v_n  integer;
BEGIN
    DELETE FROM activity_minutes WHERE minute < now() - make_interval(mins => p_keep_min);
    SELECT max(minute) + interval '1 minute' INTO v_lo FROM activity_minutes;
    v_lo := greatest(coalesce(v_lo, timestamptz '-infinity'),
                     date_bin(interval '1 minute', now(), timestamptz '2000-01-01')
                     - make_interval(mins => p_lookback_min));
    IF v_lo >= v_hi THEN
        RETURN 0;
    END IF;
    WITH recent AS MATERIALIZED (
        -- run_at >= created_at: an enqueued row created since v_lo has run_at >= v_lo.
        SELECT created_at, started_at, NULL::timestamptz AS finished_at, status
          FROM workflow_executions WHERE status = 'enqueued' AND run_at >= v_lo
        UNION ALL
        SELECT created_at, started_at, NULL, status FROM workflow_executions WHERE status = 'running'
        UNION ALL
        SELECT created_at, started_at, NULL, status FROM workflow_executions WHERE status = 'waiting'
        UNION ALL
        SELECT created_at, started_at, finished_at, status FROM workflow_executions
         WHERE finished_at >= v_lo AND status IN ('success', 'error', 'cancelled')
    ), events AS (
        SELECT date_bin(interval '1 minute', created_at, timestamptz '2000-01-01') AS minute,
               1 AS enqueued, 0 AS started, 0 AS completed, 0 AS failed
          FROM recent WHERE created_at >= v_lo AND created_at < v_hi
        UNION ALL
        SELECT date_bin(interval '1 minute', started_at, timestamptz '2000-01-01'), 0, 1, 0, 0
          FROM recent WHERE started_at >= v_lo AND started_at < v_hi
        UNION ALL
        SELECT date_bin(interval '1 minute', finished_at, timestamptz '2000-01-01'), 0, 0, 1,
               (status = 'error')::integer
          FROM recent WHERE finished_at >= v_lo AND finished_at < v_hi
    )
    INSERT INTO activity_minutes (minute, enqueued, started, completed, failed)
    SELECT m.minute, coalesce(sum(ev.enqueued), 0), coalesce(sum(ev.started), 0),
           coalesce(sum(ev.completed), 0), coalesce(sum(ev.failed), 0)
      FROM generate_series(v_lo, v_hi - interval '1 minute', interval '1 minute') AS m(minute)
      LEFT JOIN events ev ON ev.minute = m.minute
     GROUP BY m.minute
     ORDER BY m.minute
    ON CONFLICT (minute) DO NOTHING;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.fold_activity(integer, integer, integer) FROM PUBLIC;
