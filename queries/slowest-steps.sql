-- description: Step durations per workflow and step, slowest p95 first, in seconds. Measured from step_attempts: each finished attempt, started_at to finished_at, failed attempts included (counted in failed); still-running attempts are left out.
-- param: since interval = '1 day'
-- param: workflow text = null
-- param: limit integer = 50
SELECT e.workflow_name,
       a.step_id,
       count(*) AS attempts,
       count(*) FILTER (WHERE a.outcome = 'error') AS failed,
       round(percentile_cont(0.5) WITHIN GROUP (
                 ORDER BY extract(epoch FROM a.finished_at - a.started_at)::float8)::numeric, 3) AS p50_s,
       round(percentile_cont(0.95) WITHIN GROUP (
                 ORDER BY extract(epoch FROM a.finished_at - a.started_at)::float8)::numeric, 3) AS p95_s,
       round(max(extract(epoch FROM a.finished_at - a.started_at)), 3) AS max_s
  FROM step_attempts a
  JOIN workflow_executions e ON e.id = a.execution_id
 WHERE a.finished_at IS NOT NULL
   AND a.finished_at > now() - %(since)s::interval
   AND (%(workflow)s::text IS NULL OR e.workflow_name = %(workflow)s::text)
 GROUP BY e.workflow_name, a.step_id
 ORDER BY p95_s DESC, e.workflow_name, a.step_id
 LIMIT %(limit)s::integer
