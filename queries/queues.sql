-- description: Queues: limits, pause state, depth and running per queue, claims in the current rate window
SELECT q.name,
       q.paused,
       q.paused_by,
       (SELECT count(*) FROM workflow_executions e WHERE e.status = 'enqueued' AND e.queue = q.name) AS enqueued,
       (SELECT count(*) FROM workflow_executions e WHERE e.status = 'running' AND e.queue = q.name) AS running,
       q.concurrency,
       q.per_worker,
       q.rate_limit,
       q.rate_period,
       (SELECT count(*) FROM unnest(q.rate_starts) AS s(at) WHERE s.at > now() - q.rate_period) AS started_in_window,
       q.per_key,
       q.priority,
       q.workflows
  FROM queues q
 ORDER BY q.priority DESC, q.name
