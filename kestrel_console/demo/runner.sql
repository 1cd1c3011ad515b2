-- name: run_time
-- The whole run time of one execution (started, or enqueued if never started, to finished):
-- the worker's log gives only the last claim's, 0.0 s for one resumed after a wait.
SELECT extract(epoch FROM finished_at - coalesce(started_at, created_at))::float8
  FROM {schema}.workflow_executions WHERE id = %(id)s AND finished_at IS NOT NULL;

-- name: earlier_runs
SELECT count(*) FROM {schema}.workflow_executions;
