-- name: stuck_leases
SELECT e.id, e.workflow_name, e.owner_id, e.lease_expires,
       extract(epoch FROM now() - e.lease_expires)::float8 AS expired_for_s,
       w.last_heartbeat AS owner_heartbeat,
       extract(epoch FROM now() - w.last_heartbeat)::float8 AS owner_heartbeat_age_s
  FROM running e
  LEFT JOIN {schema}.workers w ON w.worker_id = e.owner_id
 WHERE e.lease_expires < now();

-- name: stuck_leases_order
lease_expires, id

-- name: workers
SELECT w.worker_id, w.hostname, w.pid, w.workflows, w.concurrency,
       coalesce(h.held, 0) AS held,
       w.started_at, w.last_heartbeat, w.stopped_at,
       extract(epoch FROM now() - w.last_heartbeat)::float8 AS heartbeat_age_s,
       {worker_is_live} AS alive,
       -- (greatest ignores NULLs: it goes outside the coalesce)
       greatest(coalesce(extract(epoch FROM h.first_lease - w.last_heartbeat)::float8 / 3, %(beat)s),
                0.1) AS beat_s
  FROM {schema}.workers w
  LEFT JOIN (SELECT owner_id, count(*) AS held, min(lease_expires) AS first_lease
               FROM running GROUP BY owner_id) AS h ON h.owner_id = w.worker_id
 WHERE w.last_heartbeat > now() - make_interval(secs => %(recent)s) OR h.held > 0;

-- name: workers_order
alive DESC, worker_id

-- name: unserved
-- Workflow names with enqueued rows that no live worker has registered; how long the oldest
-- has waited since it was last enqueued (every move to 'enqueued' sets updated_at: a requeue,
-- a decision, an event), not since it was created: one re-enqueued 15 minutes ago has waited
-- 15 minutes, whatever its age: the operator asks how long it has been stuck.
SELECT e.workflow_name, count(*) AS enqueued, min(e.updated_at) AS oldest,
       extract(epoch FROM now() - min(e.updated_at))::float8 AS oldest_age_s
  FROM {schema}.workflow_executions e
 WHERE EXISTS (SELECT 1 FROM unserved_names)  -- checked once, before the scan
   AND e.status = 'enqueued' AND e.workflow_name IN (SELECT workflow_name FROM unserved_names)
 GROUP BY e.workflow_name;

-- name: unserved_order
workflow_name

-- name: unserved_ctes
unserved_names AS MATERIALIZED (
    SELECT r.workflow_name FROM (SELECT DISTINCT workflow_name FROM ready) AS r
     WHERE NOT EXISTS (SELECT 1 FROM {schema}.workers w WHERE r.workflow_name = ANY (w.workflows) AND {worker_is_live})
)

-- name: unrunnable
-- Enqueued executions whose recorded version no live worker has (though some live worker
-- runs the workflow: with none at all, UNSERVED says so).
SELECT e.workflow_name, e.version, count(*) AS enqueued, min(v.live_versions) AS live_versions
  FROM {schema}.workflow_executions e
  JOIN unrunnable_versions v ON v.workflow_name = e.workflow_name AND v.version = e.version
 WHERE EXISTS (SELECT 1 FROM unrunnable_versions)  -- checked once, before the scan
   AND e.status = 'enqueued'
 GROUP BY e.workflow_name, e.version;

-- name: unrunnable_order
workflow_name, version

-- name: unrunnable_ctes
unrunnable_versions AS MATERIALIZED (
    SELECT v.workflow_name, v.version, lv.versions AS live_versions
      FROM ready AS v
      CROSS JOIN LATERAL (
            SELECT array_agg(DISTINCT w.versions[array_position(w.workflows, v.workflow_name)]
                             ORDER BY w.versions[array_position(w.workflows, v.workflow_name)]) AS versions
              FROM {schema}.workers w
             WHERE v.workflow_name = ANY (w.workflows) AND {worker_is_live}) AS lv
     WHERE v.version IS NOT NULL AND lv.versions IS NOT NULL AND NOT (v.version = ANY (lv.versions))
)

-- name: queues
-- Every queue: declared limits, pause, depth and running (live statuses through their
-- partial indexes), claims in the current rate window, live workers serving it. Queues that
-- only executions name (enqueued with --queue, never declared) are listed too. Enqueued ones
-- are counted from executions_ready, as in QUEUE_DEPTH (overview.py).
WITH depth AS (
    SELECT queue, count(*) AS enqueued, 0::bigint AS running
      FROM {schema}.executions_ready GROUP BY queue
    UNION ALL
    SELECT queue, 0, count(*) FROM {schema}.workflow_executions WHERE status = 'running' GROUP BY queue
), per_queue AS (
    SELECT queue, sum(enqueued)::bigint AS enqueued, sum(running)::bigint AS running FROM depth GROUP BY queue
), live AS (
    SELECT w.queues, w.workflows FROM {schema}.workers w
     WHERE {worker_is_live}
)
SELECT coalesce(q.name, d.queue) AS name, coalesce(q.paused, false) AS paused, q.paused_by, q.paused_at,
       coalesce(d.enqueued, 0) AS enqueued, coalesce(d.running, 0) AS running,
       q.concurrency, q.per_worker, q.rate_limit,
       extract(epoch FROM q.rate_period)::float8 AS rate_period_s,
       (SELECT count(*) FROM unnest(q.rate_starts) AS s(at) WHERE s.at > now() - q.rate_period) AS rate_used,
       coalesce(q.per_key, 1) AS per_key, coalesce(q.priority, 0) AS priority,
       coalesce(q.workflows, '{{}}') AS workflows,
       -- Live workers that can run something of the queue: they claim from it (every queue, or
       -- this one among theirs) and, when code binds workflows to it, registered one of them.
       (SELECT count(*) FROM live
         WHERE (live.queues IS NULL OR coalesce(q.name, d.queue) = ANY (live.queues))
           AND (cardinality(coalesce(q.workflows, '{{}}')) = 0 OR live.workflows && q.workflows)) AS live_workers
  FROM {schema}.queues q
  FULL JOIN per_queue d ON d.queue = q.name
 ORDER BY coalesce(q.priority, 0) DESC, 1;
