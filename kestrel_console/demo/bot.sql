-- name: pending_gates
-- Open approval gates of the demo's incidents that have waited at least %(min_age)s.
SELECT w.execution_id, w.step_id, w.details ->> 'risk' AS risk
FROM {schema}.workflow_waits w
JOIN {schema}.workflow_executions e ON e.id = w.execution_id
WHERE w.kind = 'approval' AND w.resolved_at IS NULL
  AND e.status = 'waiting'
  AND e.workflow_name = %(workflow)s
  AND coalesce(e.input ->> 'severity', '') <> %(left_for_humans)s
  AND w.created_at < now() - %(min_age)s
ORDER BY w.created_at
LIMIT 20;
