-- description: Per worker (execution owner): executions running now, finished (success or error) in the period, and its last heartbeat from workers. state: alive, silent (no heartbeat for silent_after), stopped, or unknown (owns rows but never registered).
-- param: period interval = '1 hour'
-- param: silent_after interval = '30 seconds'
WITH running AS (
    SELECT owner_id, count(*) AS n
      FROM workflow_executions
     WHERE status = 'running'
     GROUP BY owner_id
), finished AS (
    SELECT owner_id, count(*) AS n, count(*) FILTER (WHERE status = 'error') AS failed
      FROM workflow_executions
     WHERE finished_at > now() - %(period)s::interval
       AND status IN ('success', 'error')
     GROUP BY owner_id
), owners AS (
    SELECT worker_id AS owner_id FROM workers
    UNION SELECT owner_id FROM running
    UNION SELECT owner_id FROM finished
)
SELECT o.owner_id AS worker_id,
       w.hostname,
       w.pid,
       coalesce(r.n, 0) AS running_now,
       coalesce(f.n, 0) AS finished,
       coalesce(f.failed, 0) AS failed,
       w.last_heartbeat,
       date_trunc('second', now() - w.last_heartbeat) AS heartbeat_age,
       CASE WHEN w.worker_id IS NULL THEN 'unknown'
            WHEN w.stopped_at IS NOT NULL THEN 'stopped'
            WHEN w.last_heartbeat < now() - %(silent_after)s::interval THEN 'silent'
            ELSE 'alive'
       END AS state
  FROM owners o
  LEFT JOIN workers w ON w.worker_id = o.owner_id
  LEFT JOIN running r ON r.owner_id = o.owner_id
  LEFT JOIN finished f ON f.owner_id = o.owner_id
 WHERE o.owner_id IS NOT NULL
 ORDER BY o.owner_id
