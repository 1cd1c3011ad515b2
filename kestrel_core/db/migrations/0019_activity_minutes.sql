-- Kestrel schema, version 19: the dashboard's activity chart, one row per closed minute
-- (issue 22).
--
-- The chart counts, per bucket of the last 15 minutes, the executions created, first claimed
-- and finished in it. Read live at every refresh, that is every execution finished in the
-- window plus every live one: 21,939 rows at 16.5 finishes a second (10M finished over a
-- week), 40-60 ms of each refresh. Workers record each closed minute's four counts once
-- (fold_activity, about once a minute, with the counters' fold), and the console reads those
-- rows and only the minutes after them live. A minute is recorded a settle time after it
-- closed, so that the transactions that started in it have committed; rows older than a day
-- are deleted by the same fold. Nothing here touches the claim, the heartbeat or the step
-- boundaries.
CREATE TABLE {schema}.activity_minutes (
    minute      timestamptz PRIMARY KEY,  -- date_bin('1 minute', t, '2000-01-01')
    enqueued    bigint      NOT NULL,     -- created_at in the minute
    started     bigint      NOT NULL,     -- started_at (first claim) in the minute
    completed   bigint      NOT NULL,     -- finished_at in the minute, any end
    failed      bigint      NOT NULL,     -- finished_at in the minute, status 'error'
    recorded_at timestamptz NOT NULL DEFAULT now()
);
