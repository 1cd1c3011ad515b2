-- description: Fixes a human rejected, newest first: the approval gate, the step whose result was up for approval, who rejected it and why, and what was proposed. include_timeouts adds gates nobody decided before their deadline.
-- param: since interval = '30 days'
-- param: include_timeouts boolean = false
SELECT w.execution_id,
       e.workflow_name,
       w.step_id AS gate,
       p.step_id AS proposed_by_step,
       w.decision,
       w.decided_by,
       w.comment,
       w.decided_at,
       w.details AS proposed,
       e.status
  FROM workflow_waits w
  JOIN workflow_executions e ON e.id = w.execution_id
  LEFT JOIN LATERAL (
        -- the last step that finished before the gate opened (not itself a wait)
        SELECT o.step_id
          FROM operation_outputs o
         WHERE o.execution_id = w.execution_id
           AND o.created_at <= w.created_at
           AND o.error IS NULL
           AND NOT EXISTS (SELECT 1 FROM workflow_waits x
                            WHERE x.execution_id = o.execution_id AND x.step_id = o.step_id)
         ORDER BY o.created_at DESC
         LIMIT 1
       ) p ON true
 WHERE w.kind = 'approval'
   AND (w.decision = 'rejected' OR (%(include_timeouts)s::boolean AND w.decision = 'timed_out'))
   AND w.decided_at > now() - %(since)s::interval
 ORDER BY w.decided_at DESC, w.execution_id DESC
