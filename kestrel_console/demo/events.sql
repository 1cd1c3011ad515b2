-- name: status_counts
SELECT status, count(*) FROM {schema}.workflow_executions GROUP BY status;

-- name: pending_approvals
SELECT count(*) FROM {schema}.workflow_waits WHERE kind = 'approval' AND resolved_at IS NULL;
