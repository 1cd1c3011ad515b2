-- prune_finished(): its current definition (created by migration 0004, last redefined by 0005
-- and by the file since 0024).
--
-- Retention: deletes one batch of finished executions that finished before a cutoff, with
-- their checkpoints, waits and attempts (the execution_deleted trigger), and audits the batch,
-- in one short transaction; callers loop until it returns 0 (kestrel_core.prune). Only in the
-- ranges batch_ranges() names (the current one, and those a live execution keeps): the others
-- are dropped whole (drop_history_range). Range by range, each through its own partition.
-- Live rows are never touched, nor the finished children of a live parent (its wait_for reads
-- them); rows locked by someone else are skipped and left for the next run.
CREATE OR REPLACE FUNCTION {schema}.prune_finished(p_before timestamptz, p_limit integer, p_by text)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    n integer;
    counts jsonb;
    lowest bigint;
    highest bigint;
    ids bigint[] := '{}';
    statuses text[] := '{}';
    r record;
BEGIN
    IF p_before IS NULL OR p_limit IS NULL OR p_limit < 1 OR p_limit > 100000 THEN
        RAISE EXCEPTION 'cannot prune: give a cutoff time and a batch size between 1 and 100000'
            USING ERRCODE = 'KS409';
    END IF;
    PERFORM refuse_future_cutoff(p_before, 'prune', 'deletes');
    n := 0;
    FOR r IN SELECT b.lo, b.hi FROM batch_ranges() b LOOP
        EXIT WHEN n >= p_limit;
        WITH batch AS (
            SELECT id FROM workflow_executions
             WHERE id >= r.lo AND id < r.hi
               AND finished_at < p_before AND status IN ('success', 'error', 'cancelled')
               -- A finished child stays while its parent's row does: a live parent's
               -- wait_for reads it, and so does a finished parent's once requeued.
               AND NOT EXISTS (SELECT 1 FROM workflow_executions p
                                WHERE p.id = workflow_executions.parent_id)
             ORDER BY finished_at
             LIMIT p_limit - n
             FOR UPDATE SKIP LOCKED
        ), gone AS (
            DELETE FROM workflow_executions e
             USING batch
             WHERE e.id = batch.id AND e.status IN ('success', 'error', 'cancelled')
            RETURNING e.id, e.status
        )
        SELECT ids || coalesce(array_agg(id), '{}'), statuses || coalesce(array_agg(status), '{}')
          FROM gone INTO ids, statuses;
        n := cardinality(ids);
    END LOOP;
    SELECT min(i), max(i) INTO lowest, highest FROM unnest(ids) AS i;
    SELECT coalesce(jsonb_object_agg(status, k), '{}'::jsonb) INTO counts
      FROM (SELECT s AS status, count(*) AS k FROM unnest(statuses) AS s GROUP BY s) AS by_status;
    IF n > 0 THEN
        INSERT INTO operator_actions (actor, db_user, action, comment, details)
        VALUES (p_by, session_user, 'prune',
                format('deleted %s finished execution(s) that finished before %s', n, p_before),
                jsonb_build_object('finished_before', p_before, 'deleted', n, 'by_status', counts,
                                   'lowest_id', lowest, 'highest_id', highest));
    END IF;
    RETURN n;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.prune_finished(timestamptz, integer, text) FROM PUBLIC;
