-- Kestrel schema, version 34: attempts are closed in storage when their claim ends (issue 45).
--
-- A step attempt its worker could not close (the execution was cancelled, its lease swept,
-- its claim handed back, requeued, resumed after a pause, or ended by its deadline: the
-- worker's later writes are fenced out) used to stay outcome 'running', and readers derived
-- 'cancelled' or 'abandoned' at read time. Now the transition that ends the claim closes it in
-- the same transaction (kestrel_core/lifecycle/transitions.py names them, with the SQL):
--
-- 1. the outcome CHECK gains 'cancelled' and 'abandoned' (a scan of the history under its
--    lock, as any CHECK);
-- 2. the attempts left open before this version are closed as the readers showed them: with
--    a cancelled execution 'cancelled', else 'abandoned', ended when the execution finished,
--    else when the next claim's first attempt started, else when the execution was last
--    updated. An attempt of the execution's current claim while it runs (or is paused: its
--    worker still closes the step in flight) stays open. One more read of the history.
-- The guard guard_step_attempts needs no change: it lets any writer close a 'running'
-- attempt (the closing transitions run as the worker's login or as the schema's owner) and
-- keeps a closed one as it is.

ALTER TABLE {schema}.step_attempts DROP CONSTRAINT step_attempts_outcome_check;
ALTER TABLE {schema}.step_attempts ADD CONSTRAINT step_attempts_outcome_check
    CHECK (outcome IN ('running', 'success', 'error', 'cancelled', 'abandoned'));

UPDATE {schema}.step_attempts a
   SET outcome = CASE WHEN e.status = 'cancelled' THEN 'cancelled' ELSE 'abandoned' END,
       finished_at = CASE
           WHEN e.finished_at IS NOT NULL THEN greatest(e.finished_at, a.started_at)
           ELSE greatest(a.started_at, coalesce(
                    (SELECT min(n.started_at) FROM {schema}.step_attempts n
                      WHERE n.execution_id = a.execution_id AND n.claim_epoch > a.claim_epoch),
                    e.updated_at))
       END
  FROM {schema}.workflow_executions e
 WHERE e.id = a.execution_id AND a.outcome = 'running'
   AND NOT (e.status IN ('running', 'paused') AND a.claim_epoch IS NOT DISTINCT FROM e.claim_epoch);
