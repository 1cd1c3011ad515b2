-- kestrel: outside transaction
-- Kestrel schema, version 18: the dashboard's count of recent failures reads failures only
-- (issue 22).
--
-- "Errors in the last hour" walked workflow_executions_finished_idx over every execution
-- finished in the hour and read each row to keep the failed ones: at 10M finished executions
-- spread over a week, 54,000 index entries and heap rows for 5,400 failures, 13.6 ms of every
-- refresh. A partial index of the failures' finish times answers it with an index-only scan;
-- it costs one entry per failed execution, none for the others. Built concurrently (writes go
-- on).
CREATE INDEX CONCURRENTLY IF NOT EXISTS workflow_executions_failed_idx
    ON {schema}.workflow_executions (finished_at) WHERE status = 'error';
