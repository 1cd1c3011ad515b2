-- description: Live executions per workflow: queued and due, queued for later (delayed), running, waiting, and how long the oldest due one has been ready
-- param: workflow text = null
-- Each status is read on its own so the planner uses that status's partial index: the cost
-- follows the live rows, not the whole history.
WITH live AS (
    SELECT workflow_name, status, run_at FROM workflow_executions WHERE status = 'enqueued'
    UNION ALL
    SELECT workflow_name, status, run_at FROM workflow_executions WHERE status = 'running'
    UNION ALL
    SELECT workflow_name, status, run_at FROM workflow_executions WHERE status = 'waiting'
)
SELECT workflow_name,
       count(*) FILTER (WHERE status = 'enqueued' AND run_at <= now()) AS due,
       count(*) FILTER (WHERE status = 'enqueued' AND run_at > now())  AS delayed,
       count(*) FILTER (WHERE status = 'running')                      AS running,
       count(*) FILTER (WHERE status = 'waiting')                      AS waiting,
       date_trunc('second', now() - min(run_at) FILTER (WHERE status = 'enqueued' AND run_at <= now()))
           AS oldest_due_for
  FROM live
 WHERE %(workflow)s::text IS NULL OR workflow_name = %(workflow)s::text
 GROUP BY workflow_name
 ORDER BY workflow_name
