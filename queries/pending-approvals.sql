-- description: Approval gates waiting for a decision, oldest first: what was proposed, how long it has waited, and its deadline (NULL: none)
-- param: older_than interval = '0 seconds'
-- param: workflow text = null
SELECT w.execution_id,
       e.workflow_name,
       w.step_id,
       w.created_at AS asked_at,
       date_trunc('second', now() - w.created_at) AS waiting_for,
       w.wake_at AS deadline,
       w.details
  FROM workflow_waits w
  JOIN workflow_executions e ON e.id = w.execution_id
 WHERE w.kind = 'approval'
   AND w.resolved_at IS NULL
   AND w.created_at <= now() - %(older_than)s::interval
   AND (%(workflow)s::text IS NULL OR e.workflow_name = %(workflow)s::text)
 ORDER BY w.created_at, w.execution_id
