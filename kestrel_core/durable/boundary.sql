-- durable/boundary.py: Step boundaries of many executions in one fenced statement.

-- name: write
-- The outputs and results go in binary (%(name)b): in an array's text form every double quote
-- of their JSON is escaped by a regular expression, which took 36 ms of the writer thread's CPU
-- for a 20,000-key output against 5 ms in binary.
WITH input AS (
    SELECT * FROM unnest(
        %(eids)s::bigint[], %(worker_ids)s::text[], %(claim_epochs)s::bigint[],
        %(finish_steps)s::text[], %(attempts)s::int[], %(started)s::timestamptz[],
        %(outputs)b::jsonb[], %(errors)s::text[], %(keeps)s::bool[], %(positions)s::int[],
        %(open_steps)s::text[], %(statuses)s::text[], %(results)b::jsonb[], %(failures)s::text[],
        %(fresh)s::bool[], %(elapsed)s::float8[]
    ) AS i(eid, worker_id, claim_epoch, fstep, attempt, started, output, error, keep, position, ostep,
           status, result, failure, fresh, elapsed)
), commit_mode AS (
    SELECT set_config('synchronous_commit', %(sync)s, true)
), mine AS (
    -- Each row by its primary key, locked in id order (a lock waits for a concurrent change
    -- and sees its result), then kept only while the claim is current: running, or paused
    -- under this claim (below). OFFSET 0 keeps the claim's conditions out of the probe: with
    -- them the planner may walk the partial index of every running row (and its dead entries)
    -- instead, for every batch.
    SELECT e.id, e.workflow_name, e.status, e.deadline_at
      FROM (SELECT eid, worker_id, claim_epoch FROM input ORDER BY eid) i
     CROSS JOIN LATERAL (
           SELECT x.id, x.workflow_name, x.owner_id, x.claim_epoch, x.status, x.deadline_at
             FROM {schema}.workflow_executions x WHERE x.id = i.eid
           OFFSET 0
              FOR NO KEY UPDATE) e
     WHERE e.owner_id = i.worker_id AND e.claim_epoch = i.claim_epoch AND e.status IN ('running', 'paused')
), fence AS (
    -- What goes on (an attempt opened, a completion) needs the execution running. The end of
    -- the step that was in flight when an operator paused it (pause_execution keeps the owner
    -- and the claim epoch) is still closed and checkpointed: a pause stops the execution at its
    -- next step boundary and keeps the step that ran; a resume bumps nothing
    -- but the status, and the next claim the epoch, after which nothing of this claim is kept.
    -- Nor once the workflow's deadline passed: the step that ran is closed, nothing more starts
    -- nor completes, also before a deadline sweep got to it (it then ends it `timed out`).
    SELECT m.id, m.workflow_name FROM mine m
     WHERE m.status = 'running' AND (m.deadline_at IS NULL OR m.deadline_at > now())
), closed AS (
    UPDATE {schema}.step_attempts a
       SET outcome = CASE WHEN i.error IS NULL THEN 'success' ELSE 'error' END,
           finished_at = clock_timestamp(), error = i.error
      FROM input i JOIN mine f ON f.id = i.eid
     WHERE a.execution_id = i.eid AND a.step_id = i.fstep AND a.attempt = i.attempt
       AND a.outcome = 'running' AND NOT i.fresh
), ended_unopened AS (
    -- An attempt whose start was not written yet (the first step after a claim; group_commit.py)
    -- is written with its end: it started ``elapsed`` seconds (by the worker's clock) before now().
    INSERT INTO {schema}.step_attempts
           (execution_id, step_id, attempt, owner_id, claim_epoch, started_at, finished_at, outcome, error)
    SELECT i.eid, i.fstep, i.attempt, i.worker_id, i.claim_epoch,
           now() - make_interval(secs => i.elapsed), clock_timestamp(),
           CASE WHEN i.error IS NULL THEN 'success' ELSE 'error' END, i.error
      FROM input i JOIN mine f ON f.id = i.eid
     WHERE i.fresh
    ON CONFLICT DO NOTHING  -- this statement retried after its first try committed
), checkpoint AS (
    INSERT INTO {schema}.operation_outputs
           (execution_id, step_id, output, error, started_at, attempts, owner_id, claim_epoch, seq)
    SELECT i.eid, i.fstep, i.output, i.error,
           coalesce(i.started, now() - make_interval(secs => i.elapsed)), i.attempt, i.worker_id, i.claim_epoch,
           i.position
      FROM input i JOIN mine f ON f.id = i.eid
     WHERE i.keep
    ON CONFLICT DO NOTHING
    RETURNING execution_id
), reopened AS (
    -- The attempt this claim already has running for the step to open: only a retry of this
    -- statement whose first try committed finds one (a claim runs one attempt of a step at a
    -- time; the attempt this very row closes is not it). It is returned, not opened again.
    SELECT DISTINCT ON (i.eid) i.eid, a.attempt, a.started_at
      FROM input i JOIN fence f ON f.id = i.eid
      JOIN {schema}.step_attempts a ON a.execution_id = i.eid AND a.step_id = i.ostep
     WHERE a.owner_id = i.worker_id AND a.claim_epoch = i.claim_epoch AND a.outcome = 'running'
       AND (i.fstep IS DISTINCT FROM i.ostep OR a.attempt IS DISTINCT FROM i.attempt)
     ORDER BY i.eid, a.attempt DESC
), opened AS (
    INSERT INTO {schema}.step_attempts (execution_id, step_id, attempt, owner_id, claim_epoch)
    SELECT i.eid, i.ostep,
           greatest((SELECT max(a.attempt) FROM {schema}.step_attempts a
                      WHERE a.execution_id = i.eid AND a.step_id = i.ostep),
                    -- a retry opened with the end of an attempt written in this statement
                    CASE WHEN i.fresh AND i.fstep = i.ostep THEN i.attempt END, 0) + 1,
           i.worker_id, i.claim_epoch
      FROM input i JOIN fence f ON f.id = i.eid
     WHERE i.ostep IS NOT NULL AND NOT EXISTS (SELECT 1 FROM reopened r WHERE r.eid = i.eid)
    ON CONFLICT DO NOTHING
    RETURNING execution_id, attempt, started_at
), counters AS (
    -- The counters of finished executions the completions below bump (by a row trigger, at
    -- the end of the statement), locked first in one order (migration 0010).
    SELECT {schema}.lock_finished_counters(array_agg(k.workflow_name), array_agg(k.status),
                                           array_agg(k.shard)) AS locked
      FROM (SELECT DISTINCT f.workflow_name, i.status, {schema}.count_shard(f.id) AS shard
              FROM input i JOIN fence f ON f.id = i.eid WHERE i.status IS NOT NULL) k
), completed AS (
    UPDATE {schema}.workflow_executions e
       SET status = i.status, output = i.result, error = i.failure, lease_expires = NULL,
           finished_at = now(), updated_at = now()
      FROM input i JOIN fence f ON f.id = i.eid
     WHERE e.id = i.eid AND i.status IS NOT NULL
)
SELECT i.eid, f.id IS NOT NULL AS held, c.execution_id IS NOT NULL AS written,
       coalesce(o.attempt, r.attempt) AS opened, coalesce(o.started_at, r.started_at) AS opened_at
  FROM input i
  LEFT JOIN fence f ON f.id = i.eid
  LEFT JOIN checkpoint c ON c.execution_id = i.eid
  LEFT JOIN opened o ON o.execution_id = i.eid
  LEFT JOIN reopened r ON r.eid = i.eid
 CROSS JOIN commit_mode
 CROSS JOIN counters;

-- name: read_checkpoint
-- A checkpoint not written (ON CONFLICT): the one that stands, and whose it is (an earlier try
-- of this very write, retried after its commit went through, finds its own).
SELECT output, error, attempts, owner_id, claim_epoch FROM {schema}.operation_outputs
 WHERE execution_id = %(eid)s AND step_id = %(step)s;

-- name: completed_by_us
-- A completion refused by the fence: did our own earlier try of it commit before its
-- connection broke (the write is retried)? Then the execution has our claim and that status.
SELECT status FROM {schema}.workflow_executions
 WHERE id = %(eid)s AND owner_id = %(worker_id)s AND claim_epoch = %(claim_epoch)s;
