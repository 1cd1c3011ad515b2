-- name: blocker_facts
-- Everything "why isn't it running?" needs, about one execution, in one statement.
SELECT e.id, e.workflow_name, e.status, e.run_at, e.owner_id, e.lease_expires,
       extract(epoch FROM e.run_at - now())::float8 AS starts_in_s,
       extract(epoch FROM now() - e.lease_expires)::float8 AS lease_expired_for_s,
       ow.last_heartbeat AS owner_heartbeat, ow.stopped_at AS owner_stopped_at,
       extract(epoch FROM now() - ow.last_heartbeat)::float8 AS owner_heartbeat_age_s,
       (ow.worker_id IS NOT NULL) AS owner_known,
       wt.kind AS wait_kind, wt.step_id AS wait_step, wt.created_at AS wait_since,
       wt.wake_at AS wait_until,
       extract(epoch FROM wt.wake_at - now())::float8 AS wait_until_in_s,
       live.workers AS live_workers, live.slots AS live_slots, live.held AS live_held,
       ever.workers AS any_workers,
       e.queue, e.version, e.concurrency_key, lv.versions AS live_versions, lv.serving AS queue_workers,
       q.paused AS queue_paused, q.paused_by AS queue_paused_by, q.paused_at AS queue_paused_at,
       q.concurrency AS queue_concurrency, q.per_worker AS queue_per_worker, q.per_key AS queue_per_key,
       q.rate_limit AS queue_rate_limit, extract(epoch FROM q.rate_period)::float8 AS queue_rate_period_s,
       (SELECT count(*) FROM unnest(q.rate_starts) AS s(at) WHERE s.at > now() - q.rate_period) AS queue_rate_used,
       (SELECT extract(epoch FROM min(s.at) + q.rate_period - now())::float8
          FROM unnest(q.rate_starts) AS s(at) WHERE s.at > now() - q.rate_period) AS queue_rate_frees_in_s,
       qr.running AS queue_running, qr.key_running,
       pa.actor AS paused_by, pa.at AS paused_at, pa.comment AS paused_comment
  FROM {schema}.workflow_executions e
  LEFT JOIN {schema}.queues q ON q.name = e.queue
  CROSS JOIN LATERAL (
        SELECT count(*) AS running,
               count(*) FILTER (WHERE r.concurrency_key = e.concurrency_key) AS key_running
          FROM {schema}.workflow_executions r WHERE r.status = 'running' AND r.queue = e.queue) AS qr
  CROSS JOIN LATERAL (
        SELECT array_agg(DISTINCT w.versions[array_position(w.workflows, e.workflow_name)]) AS versions,
               count(*) FILTER (WHERE w.queues IS NULL OR e.queue = ANY (w.queues)) AS serving
          FROM {schema}.workers w
         WHERE e.workflow_name = ANY (w.workflows) AND {worker_is_live}) AS lv
  LEFT JOIN {schema}.workers ow ON ow.worker_id = e.owner_id
  LEFT JOIN LATERAL (
        SELECT w.kind, w.step_id, w.created_at, w.wake_at FROM {schema}.workflow_waits w
         WHERE w.execution_id = e.id AND w.resolved_at IS NULL
         ORDER BY w.created_at DESC LIMIT 1) AS wt ON true
  CROSS JOIN LATERAL (
        SELECT count(*) AS workers, coalesce(sum(w.concurrency), 0) AS slots,
               coalesce(sum((SELECT count(*) FROM {schema}.workflow_executions r
                              WHERE r.status = 'running' AND r.owner_id = w.worker_id)), 0) AS held
          FROM {schema}.workers w
         WHERE e.workflow_name = ANY (w.workflows) AND {worker_is_live}) AS live
  CROSS JOIN LATERAL (
        SELECT count(*) AS workers FROM {schema}.workers w
         WHERE e.workflow_name = ANY (w.workflows)) AS ever
  -- who paused it, when and why: the audit row of its last pause
  LEFT JOIN LATERAL (
        SELECT a.actor, a.at, a.comment FROM {schema}.operator_actions a
         WHERE a.execution_id = e.id AND a.action = 'pause' AND e.status = 'paused'
         ORDER BY a.at DESC LIMIT 1) AS pa ON true
 WHERE e.id = %(id)s;
