-- admin/prune.py: Retention: drop whole id ranges of finished history, delete the rest in batches.

-- name: cutoff
SELECT now() - %s::interval;

-- name: prune_batch
SELECT {schema}.prune_finished(%s, %s, %s);

-- name: ranges
SELECT lo, hi FROM {schema}.history_partitions ORDER BY lo;

-- name: drop_range
SELECT {schema}.drop_history_range(%s, %s, %s);

-- name: range_state
-- What drop_history_range would decide for one range now (the dry run): its executions, the
-- live ones (and finished children of a parent outside the range, which keep it too), the
-- newest finish, and
-- when the first execution past the range was created.
SELECT count(*),
       count(*) FILTER (WHERE status IN {live_statuses}
                           OR EXISTS (SELECT 1 FROM {schema}.workflow_executions p
                                       WHERE p.id = c.parent_id AND (p.id < %(lo)s OR p.id >= %(hi)s))),
       max(finished_at),
       (SELECT created_at FROM {schema}.workflow_executions WHERE id >= %(hi)s ORDER BY id LIMIT 1)
         < now() - interval '1 minute'
  FROM {schema}.workflow_executions c
 WHERE id >= %(lo)s AND id < %(hi)s;

-- name: prunable
-- What the batches of a prune with this cutoff would delete now (the dry run), by workflow and
-- status: finished rows in the ranges batch_ranges() names (the others go whole, or wait until
-- all of them may).
SELECT e.workflow_name, e.status, count(*), min(e.finished_at), max(e.finished_at)
  FROM {schema}.batch_ranges() AS r
  JOIN {schema}.workflow_executions AS e ON e.id >= r.lo AND e.id < r.hi
 WHERE e.finished_at < %s AND e.status IN {terminal_statuses}
   AND NOT EXISTS (SELECT 1 FROM {schema}.workflow_executions p WHERE p.id = e.parent_id)
 GROUP BY e.workflow_name, e.status
 ORDER BY e.workflow_name, e.status;
