-- Kestrel schema, version 4: retention.
--
-- prune_finished deletes one batch of finished executions (success, error, cancelled) that
-- finished before a cutoff, with their checkpoints, waits and attempts (ON DELETE CASCADE),
-- and audits the batch in operator_actions, in one short transaction. Callers loop until it
-- returns 0 (kestrel_core.prune does). Live rows (enqueued, running, waiting) are never
-- touched, however old; rows locked by someone else (a requeue in progress) are skipped, not
-- waited for, and are left for the next run.
-- SECURITY DEFINER: a worker or operator role may prune without holding DELETE on the tables;
-- like the operator functions, it is executable only by those granted it (see the end).

CREATE FUNCTION {schema}.prune_finished(p_before timestamptz, p_limit integer, p_by text)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    n integer;
    counts jsonb;
    lowest bigint;
    highest bigint;
BEGIN
    IF p_before IS NULL OR p_limit IS NULL OR p_limit < 1 OR p_limit > 100000 THEN
        RAISE EXCEPTION 'cannot prune: give a cutoff time and a batch size between 1 and 100000'
            USING ERRCODE = 'KS409';
    END IF;
    WITH batch AS (
        SELECT id FROM workflow_executions
         WHERE finished_at < p_before AND status IN ('success', 'error', 'cancelled')
         ORDER BY finished_at
         LIMIT p_limit
         FOR UPDATE SKIP LOCKED
    ), gone AS (
        DELETE FROM workflow_executions e
         USING batch
         WHERE e.id = batch.id AND e.status IN ('success', 'error', 'cancelled')
        RETURNING e.id, e.status
    ), by_status AS (
        SELECT status, count(*) AS k FROM gone GROUP BY status
    )
    SELECT (SELECT count(*) FROM gone), (SELECT min(id) FROM gone), (SELECT max(id) FROM gone),
           (SELECT coalesce(jsonb_object_agg(status, k), '{}'::jsonb) FROM by_status)
      INTO n, lowest, highest, counts;
    IF n > 0 THEN
        INSERT INTO operator_actions (actor, action, comment, details)
        VALUES (p_by, 'prune',
                format('deleted %s finished execution(s) that finished before %s', n, p_before),
                jsonb_build_object('finished_before', p_before, 'deleted', n, 'by_status', counts,
                                   'lowest_id', lowest, 'highest_id', highest));
    END IF;
    RETURN n;
END
$$;

-- Functions are executable by PUBLIC by default: the operator actions and the prune must be
-- granted explicitly (kestrel_core.roles does), never reachable by whoever can see the schema.
REVOKE EXECUTE ON FUNCTION
    {schema}.decide_approval(bigint, text, boolean, text, text),
    {schema}.cancel_execution(bigint, text, text),
    {schema}.requeue_execution(bigint, text, text),
    {schema}.prune_finished(timestamptz, integer, text)
FROM PUBLIC;
