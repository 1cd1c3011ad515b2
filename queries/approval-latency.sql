-- description: How long approval gates waited for a human, per workflow and gate: decisions, approved, rejected, timed out, and p50/p95/max time from gate opened to human decision (timeouts excluded)
-- param: since interval = '30 days'
SELECT e.workflow_name,
       w.step_id AS gate,
       count(*) AS decided,
       count(*) FILTER (WHERE w.decision = 'approved') AS approved,
       count(*) FILTER (WHERE w.decision = 'rejected') AS rejected,
       count(*) FILTER (WHERE w.decision = 'timed_out') AS timed_out,
       date_trunc('second', percentile_cont(0.5) WITHIN GROUP (ORDER BY w.decided_at - w.created_at)
                            FILTER (WHERE w.decision <> 'timed_out')) AS p50_wait,
       date_trunc('second', percentile_cont(0.95) WITHIN GROUP (ORDER BY w.decided_at - w.created_at)
                            FILTER (WHERE w.decision <> 'timed_out')) AS p95_wait,
       date_trunc('second', max(w.decided_at - w.created_at)
                            FILTER (WHERE w.decision <> 'timed_out')) AS max_wait
  FROM workflow_waits w
  JOIN workflow_executions e ON e.id = w.execution_id
 WHERE w.kind = 'approval'
   AND w.decision IS NOT NULL
   AND w.decided_at > now() - %(since)s::interval
 GROUP BY e.workflow_name, w.step_id
 ORDER BY e.workflow_name, w.step_id
