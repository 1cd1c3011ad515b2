-- description: Cron schedules: active or paused, next tick, last run and its status, runs and errors in the period
-- param: since interval = '1 day'
-- Runs are found through the workflow-name index: the cost follows each schedule's workflow.
SELECT s.name,
       s.cron,
       s.timezone,
       s.workflow_name AS workflow,
       CASE WHEN s.paused THEN 'paused by ' || coalesce(s.paused_by, '?') ELSE 'active' END AS state,
       CASE WHEN s.paused THEN NULL ELSE s.next_tick END AS next_tick,
       CASE WHEN s.paused THEN NULL ELSE date_trunc('second', s.next_tick - now()) END AS next_in,
       s.last_tick,
       s.last_execution_id,
       e.status AS last_status,
       coalesce(r.runs, 0) AS runs,
       coalesce(r.errors, 0) AS errors,
       s.catch_up,
       s.source
  FROM schedules s
  LEFT JOIN workflow_executions e ON e.id = s.last_execution_id
  LEFT JOIN LATERAL (
        SELECT count(*) AS runs, count(*) FILTER (WHERE x.status = 'error') AS errors
          FROM workflow_executions x
         WHERE x.workflow_name = s.workflow_name
           AND x.input->>'schedule' = s.name
           AND x.created_at > now() - %(since)s::interval) AS r ON true
 ORDER BY s.name
