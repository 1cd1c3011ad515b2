-- description: Approval gates waiting for a decision, per workflow and gate: how many wait, and how long the oldest has waited (seconds). Also exported by `kestrel-console metrics` as two gauges.
-- metric: gauge kestrel_report_approval_gates_waiting value=waiting labels=workflow_name,gate
-- metric: gauge kestrel_report_approval_gates_oldest_seconds value=oldest_seconds labels=workflow_name,gate
-- Pending gates only (through workflow_waits_pending_approval_idx): the cost follows the
-- gates waiting now, not the history.
SELECT e.workflow_name,
       w.step_id AS gate,
       count(*) AS waiting,
       round(extract(epoch FROM now() - min(w.created_at)))::bigint AS oldest_seconds
  FROM workflow_waits w
  JOIN workflow_executions e ON e.id = w.execution_id
 WHERE w.kind = 'approval'
   AND w.resolved_at IS NULL
 GROUP BY e.workflow_name, w.step_id
 ORDER BY e.workflow_name, w.step_id
