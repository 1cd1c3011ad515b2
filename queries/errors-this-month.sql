-- description: Every run that errored in the last month, newest first, with the step that failed for good, its attempts, and the error
-- param: since interval = '1 month'
-- param: workflow text = null
SELECT e.id,
       e.workflow_name,
       e.finished_at,
       f.step_id AS failed_step,
       f.attempts,
       e.error,
       e.owner_id
  FROM workflow_executions e
  LEFT JOIN LATERAL (
        SELECT o.step_id, o.attempts
          FROM operation_outputs o
         WHERE o.execution_id = e.id AND o.error IS NOT NULL
         ORDER BY o.created_at DESC
         LIMIT 1
       ) f ON true
 WHERE e.status = 'error'
   AND e.finished_at > now() - %(since)s::interval
   AND (%(workflow)s::text IS NULL OR e.workflow_name = %(workflow)s::text)
 ORDER BY e.finished_at DESC, e.id DESC
