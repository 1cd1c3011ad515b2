-- name: status_counts
-- Executions per status: the enqueued ones counted from workflow_executions (an index-only
-- count: a ready row may be stale), the running and waiting ones from the live rows.
SELECT 'enqueued' AS status, count(*) AS count FROM {schema}.workflow_executions WHERE status = 'enqueued'
UNION ALL
SELECT 'running', count(*) FROM running
UNION ALL
SELECT 'waiting', count(*) FROM waiting
UNION ALL
SELECT 'paused', count(*) FROM paused
UNION ALL
SELECT status, sum(n)::bigint FROM finished GROUP BY status;

-- name: queue_depth
-- Enqueued executions are counted from executions_ready (migration 0015: one narrow row per
-- enqueued execution, kept by triggers, ~200 rows a page), not from workflow_executions: that
-- costs one heap fetch per enqueued row (measured in bench/README.md, "Console"). A ready row
-- can outlive its execution's enqueued state (a claim rolled back in a race with a cancel,
-- hand-written SQL, code older than 0015 left running across the upgrade: docs/development.md
-- says to stop it); the next claim that meets it, or the workers' sweep within a minute
-- (sweeper.drop_stale_ready), deletes it.
SELECT workflow_name, status, count FROM (
    SELECT workflow_name, 'enqueued' AS status, sum(n)::bigint AS count FROM ready GROUP BY workflow_name
    UNION ALL
    SELECT workflow_name, 'running', count(*) FROM running GROUP BY workflow_name
    UNION ALL
    SELECT workflow_name, 'waiting', count(*) FROM waiting GROUP BY workflow_name
    UNION ALL
    SELECT workflow_name, 'paused', count(*) FROM paused GROUP BY workflow_name
    UNION ALL
    SELECT workflow_name, status, n FROM finished WHERE n <> 0
) AS depth;

-- name: queue_depth_order
workflow_name, array_position({status_order}, status)

-- name: pending_approvals
SELECT w.execution_id, e.workflow_name, w.step_id, w.created_at AS waiting_since,
       extract(epoch FROM now() - w.created_at)::float8 AS waiting_s,
       w.wake_at AS deadline, w.details
  FROM {schema}.workflow_waits w
  JOIN {schema}.workflow_executions e ON e.id = w.execution_id
 WHERE w.resolved_at IS NULL AND w.kind = 'approval'
 ORDER BY w.created_at, w.execution_id, w.step_id
 LIMIT %(limit)s;

-- name: approvals_summary
SELECT count(*) AS count, extract(epoch FROM now() - min(created_at))::float8 AS oldest_age_s
  FROM {schema}.workflow_waits
 WHERE resolved_at IS NULL AND kind = 'approval';

-- name: paused_queues
-- Paused queues, for the dashboard (``status`` reads them with QUEUES): who paused each, how
-- long ago, and how many executions it holds back (its ready rows, executions_ready_queue_idx).
SELECT q.name, q.paused_by, extract(epoch FROM now() - q.paused_at)::float8 AS paused_for_s,
       (SELECT count(*) FROM {schema}.executions_ready r WHERE r.queue = q.name) AS enqueued
  FROM {schema}.queues q
 WHERE q.paused
 ORDER BY q.name
 LIMIT %(limit)s;

-- name: errors_since
SELECT count(*) AS count FROM {schema}.workflow_executions
 WHERE finished_at >= now() - make_interval(secs => %(seconds)s) AND status = 'error';

-- name: activity_t0
-- Per bucket: executions created, first claimed and finished in it. Closed minutes come from
-- activity_minutes (migration 0019), recorded once by the workers (fold_activity, the same
-- counting as below); only what happened after the last recorded minute is read live. The
-- recorded minutes count only if they run from the window's start without a gap (and the
-- buckets are whole minutes): otherwise ``cut`` is the window's start and all is read live,
-- as before the table existed (no worker has run yet, or none for a while).
-- Live: a row created (or started) after the cut is either live now (partial indexes) or
-- finished after that (finished_at index).
-- The window's start. The index scans of ``recent`` spell it out rather than read it from the
-- span CTE: the planner then estimates them with its value (now() and the parameters are known
-- when the statement is planned) instead of guessing a third of the table for ``>= span.t0``.
-- The guess made the plan cost past jit_above_cost on a big history, and JIT compilation then
-- took longer than the refresh itself (bench/README.md, "Console"). The cut (a
-- value the planner cannot see) is a second bound on the same index: it narrows the scan at
-- run time and only lowers the estimate.
date_bin(make_interval(secs => %(bucket)s), now(), timestamptz '2000-01-01')
             - make_interval(secs => %(bucket)s * (%(buckets)s - 1))

-- name: activity_ctes
-- The part's own CTEs and its body, with {t0} where activity_t0 goes (lower case: not
-- statements of their own), on the live rows ``running`` and ``waiting`` (live_rows.py).
span AS (
    SELECT {t0} AS t0
), folded AS (
    SELECT f.minute, f.enqueued, f.started, f.completed, f.failed
      FROM {schema}.activity_minutes f, span
     WHERE f.minute >= span.t0 AND %(bucket)s %% 60 = 0
), cut AS (
    SELECT CASE WHEN min(f.minute) = min(span.t0)
                 AND count(f.minute) = 1 + date_part('epoch', max(f.minute) - min(f.minute)) / 60
                THEN max(f.minute) + interval '1 minute'
                ELSE min(span.t0) END AS t1
      FROM span LEFT JOIN folded f ON true
), recent AS MATERIALIZED (
    -- Enqueued rows matter only if created after the cut; run_at >= created_at, so the
    -- enqueued index's run_at column skips the older backlog.
    SELECT e.created_at, e.started_at, NULL::timestamptz AS finished_at, e.status
      FROM {schema}.workflow_executions e
     WHERE e.status = 'enqueued' AND e.run_at >= {t0} AND e.run_at >= (SELECT t1 FROM cut)
       AND (e.created_at >= (SELECT t1 FROM cut) OR e.started_at >= (SELECT t1 FROM cut))
    UNION ALL
    SELECT l.created_at, l.started_at, NULL, 'running'
      FROM running AS l
     WHERE l.created_at >= (SELECT t1 FROM cut) OR l.started_at >= (SELECT t1 FROM cut)
    UNION ALL
    SELECT l.created_at, l.started_at, NULL, 'waiting'
      FROM waiting AS l
     WHERE l.created_at >= (SELECT t1 FROM cut) OR l.started_at >= (SELECT t1 FROM cut)
    UNION ALL
    SELECT created_at, started_at, finished_at, status
      FROM {schema}.workflow_executions
     WHERE finished_at >= {t0} AND finished_at >= (SELECT t1 FROM cut) AND status IN {terminal_statuses}
), counts AS (
    -- Aggregate per bucket first: 4 small group-bys instead of joining every event.
    SELECT 'enqueued' AS kind, floor(date_part('epoch', r.created_at - s.t0) / %(bucket)s)::int AS i,
           count(*) AS n
      FROM recent r, span s, cut c WHERE r.created_at >= c.t1 GROUP BY 2
    UNION ALL
    SELECT 'started', floor(date_part('epoch', r.started_at - s.t0) / %(bucket)s)::int, count(*)
      FROM recent r, span s, cut c WHERE r.started_at >= c.t1 GROUP BY 2
    UNION ALL
    SELECT 'completed', floor(date_part('epoch', r.finished_at - s.t0) / %(bucket)s)::int, count(*)
      FROM recent r, span s, cut c WHERE r.finished_at >= c.t1 GROUP BY 2
    UNION ALL
    SELECT 'failed', floor(date_part('epoch', r.finished_at - s.t0) / %(bucket)s)::int, count(*)
      FROM recent r, span s, cut c WHERE r.finished_at >= c.t1 AND r.status = 'error' GROUP BY 2
    UNION ALL
    SELECT k.kind, floor(date_part('epoch', f.minute - s.t0) / %(bucket)s)::int, k.n
      FROM folded f, span s, cut c,
           LATERAL (VALUES ('enqueued', f.enqueued), ('started', f.started),
                           ('completed', f.completed), ('failed', f.failed)) AS k(kind, n)
     WHERE f.minute < c.t1
)

-- name: activity_select
SELECT b.i AS bucket,
       span.t0 + make_interval(secs => %(bucket)s * b.i) AS start,
       coalesce(sum(c.n) FILTER (WHERE c.kind = 'enqueued'), 0)::bigint AS enqueued,
       coalesce(sum(c.n) FILTER (WHERE c.kind = 'started'), 0)::bigint AS started,
       coalesce(sum(c.n) FILTER (WHERE c.kind = 'completed'), 0)::bigint AS completed,
       coalesce(sum(c.n) FILTER (WHERE c.kind = 'failed'), 0)::bigint AS failed
  FROM span CROSS JOIN generate_series(0, %(buckets)s - 1) AS b(i)
  LEFT JOIN counts c ON c.i = b.i
 GROUP BY b.i, span.t0;

-- name: activity_order
bucket
