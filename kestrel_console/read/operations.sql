-- name: ready
-- Enqueued executions per (queue, workflow): all of them, those due now, and how long the
-- oldest due one has waited since it became due (run_at: its enqueue, or the end of its delay).
SELECT queue, workflow_name, count(*) AS enqueued,
       count(*) FILTER (WHERE run_at <= now()) AS due,
       coalesce(extract(epoch FROM now() - min(run_at) FILTER (WHERE run_at <= now())), 0)::float8
           AS oldest_due_age_s
  FROM {schema}.executions_ready
 GROUP BY queue, workflow_name
 ORDER BY queue, workflow_name;

-- name: running
-- Running executions per (queue, workflow), and those whose lease expired (stuck: the owner
-- died or hangs; the sweeper requeues them), through the running rows' partial index.
SELECT queue, workflow_name, count(*) AS running,
       count(*) FILTER (WHERE lease_expires < now()) AS stuck
  FROM {schema}.workflow_executions
 WHERE status = 'running'
 GROUP BY queue, workflow_name
 ORDER BY queue, workflow_name;

-- name: waiting
SELECT workflow_name, count(*) AS waiting
  FROM {schema}.workflow_executions
 WHERE status = 'waiting'
 GROUP BY workflow_name
 ORDER BY workflow_name;

-- name: paused
-- Executions an operator paused (workflow_executions_paused_idx, migration 0030).
SELECT workflow_name, count(*) AS paused
  FROM {schema}.workflow_executions
 WHERE status = 'paused'
 GROUP BY workflow_name
 ORDER BY workflow_name;

-- name: finished
SELECT workflow_name, status, sum(n)::bigint AS count
  FROM {schema}.execution_counts
 GROUP BY workflow_name, status
HAVING sum(n) <> 0
 ORDER BY workflow_name, status;

-- name: pending_approvals_by_workflow
SELECT e.workflow_name, count(*) AS pending,
       extract(epoch FROM now() - min(w.created_at))::float8 AS oldest_age_s
  FROM {schema}.workflow_waits w
  JOIN {schema}.workflow_executions e ON e.id = w.execution_id
 WHERE w.resolved_at IS NULL AND w.kind = 'approval'
 GROUP BY e.workflow_name
 ORDER BY e.workflow_name;

-- name: queue_limits
-- Declared queues: limits, pause, rate window use. Their depth and running counts come from
-- READY and RUNNING (the same snapshot), not read again as ``workers.QUEUES`` does.
SELECT q.name, q.paused, q.paused_by, q.concurrency, q.per_worker, q.rate_limit,
       extract(epoch FROM q.rate_period)::float8 AS rate_period_s,
       (SELECT count(*) FROM unnest(q.rate_starts) AS s(at) WHERE s.at > now() - q.rate_period) AS rate_used,
       q.workflows, q.priority
  FROM {schema}.queues q;

-- name: live_workers
-- What the live workers claim from: their queues (NULL: every queue) and workflows.
SELECT w.queues, w.workflows FROM {schema}.workers w WHERE {worker_is_live};

-- name: until
-- The end of the window the incremental parts count up to: now() less a settle time, so that
-- the transactions that finished something before it have committed (now() is the same in
-- every statement of the snapshot's one transaction). On a replica behind its primary, the
-- window ends at the last commit it replayed (``on_data_clock``): what finished after that is
-- counted by a later scrape, once replayed, never skipped.
SELECT now() - make_interval(secs => %(settle)s) AS until

-- name: until_now_column
-- After UNTIL's data clock: the server's own clock (not read on the data clock).
, now() AS now

-- name: finished_since
-- Executions that finished in (since, until]: a requeued execution that finishes again counts
-- again. A window longer than ``window`` seconds (no scrape for that long) is cut to its end:
-- what finished before is not counted, and the read stays bounded. Through
-- workflow_executions_finished_idx: the rows of the window only.
SELECT workflow_name, status, count(*) AS n
  FROM {schema}.workflow_executions
 WHERE finished_at > greatest(%(since)s::timestamptz, now() - make_interval(secs => %(settle)s + %(window)s))
   AND finished_at <= now() - make_interval(secs => %(settle)s)
   AND status IN {terminal_statuses}
 GROUP BY workflow_name, status;

-- name: attempts_since
-- Step attempts that ended in (since, until], per workflow, step and outcome, counted into the
-- histogram's buckets on the server (width_bucket: 0 below the first bound, i for
-- bounds[i] <= s < bounds[i+1]), so that a busy window returns a few rows, not one per attempt.
SELECT e.workflow_name, a.step_id, a.outcome,
       width_bucket(extract(epoch FROM a.finished_at - a.started_at)::float8, %(bounds)s::float8[]) AS bucket,
       count(*) AS n,
       sum(greatest(extract(epoch FROM a.finished_at - a.started_at)::float8, 0)) AS seconds
  FROM {schema}.step_attempts a
  JOIN {schema}.workflow_executions e ON e.id = a.execution_id
 WHERE a.finished_at > greatest(%(since)s::timestamptz, now() - make_interval(secs => %(settle)s + %(window)s))
   AND a.finished_at <= now() - make_interval(secs => %(settle)s)
   AND a.outcome <> 'running'
 GROUP BY 1, 2, 3, 4;
