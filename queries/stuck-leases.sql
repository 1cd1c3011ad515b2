-- description: Running executions whose lease expired (their worker died or hangs): owner, how long ago the lease lapsed, the step in progress, and the owner's last heartbeat. Requeue them once you know the worker is gone.
-- param: grace interval = '0 seconds'
SELECT e.id,
       e.workflow_name,
       e.owner_id,
       e.lease_expires,
       date_trunc('second', now() - e.lease_expires) AS expired_for,
       s.step_id AS current_step,
       s.attempt,
       s.started_at AS step_started_at,
       w.last_heartbeat AS owner_last_heartbeat
  FROM workflow_executions e
  LEFT JOIN LATERAL (
        SELECT a.step_id, a.attempt, a.started_at
          FROM step_attempts a
         WHERE a.execution_id = e.id AND a.outcome = 'running'
         ORDER BY a.started_at DESC
         LIMIT 1
       ) s ON true
  LEFT JOIN workers w ON w.worker_id = e.owner_id
 WHERE e.status = 'running'
   AND e.lease_expires < now() - %(grace)s::interval
 ORDER BY e.lease_expires, e.id
