-- description: Steps that needed more than one attempt (retries and re-runs after a requeue), most recent first: attempts, failures, how the last attempt ended, and the last error
-- param: since interval = '7 days'
-- param: min_attempts integer = 2
SELECT a.execution_id,
       e.workflow_name,
       a.step_id,
       count(*) AS attempts,
       count(*) FILTER (WHERE a.outcome = 'error') AS failures,
       (array_agg(a.outcome ORDER BY a.attempt DESC, a.started_at DESC))[1] AS last_outcome,
       (array_agg(a.error ORDER BY a.attempt DESC, a.started_at DESC)
            FILTER (WHERE a.error IS NOT NULL))[1] AS last_error,
       min(a.started_at) AS first_started_at,
       max(a.finished_at) AS last_finished_at,
       e.status AS execution_status
  FROM step_attempts a
  JOIN workflow_executions e ON e.id = a.execution_id
 WHERE a.started_at > now() - %(since)s::interval
 GROUP BY a.execution_id, e.workflow_name, a.step_id, e.status
HAVING count(*) >= %(min_attempts)s::integer
 ORDER BY max(a.started_at) DESC, a.execution_id DESC, a.step_id
