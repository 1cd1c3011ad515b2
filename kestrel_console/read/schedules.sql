-- name: schedules
-- A few schedules, not a history: one pass over the table, the last run by primary key.
SELECT s.name, s.cron, s.timezone, s.workflow_name, s.next_tick,
       extract(epoch FROM s.next_tick - now())::float8 AS next_in_s,
       s.last_tick, s.last_execution_id, e.status AS last_status,
       s.paused, s.paused_by, s.paused_at, s.catch_up, s.source, s.input, s.created_by,
       s.created_at,
       EXISTS (SELECT 1 FROM {schema}.workers w
                WHERE s.workflow_name = ANY (w.workflows) AND {worker_is_live}) AS served,
       EXISTS (SELECT 1 FROM {schema}.workers w
                WHERE {worker_is_live}) AS ticking
  FROM {schema}.schedules s
  LEFT JOIN {schema}.workflow_executions e ON e.id = s.last_execution_id
 ORDER BY s.name;
