-- drop_history_range(): its current definition (migration 0022 made the history partitioned;
-- since 0030 a range holding a paused execution stays).
--
-- Retention by partition: drops the id range starting at p_lo (its partitions of the step
-- tables first, then workflow_executions'), if every execution in it finished before p_before
-- and the id sequence passed the range over a minute ago (an id handed out just before must
-- not find its partition gone; the newest range is never dropped). Returns the executions
-- dropped, or NULL when the range must stay (a live execution, one finished too recently, a
-- finished child whose parent's row is outside the range: the parent's wait_for reads it, also
-- after a requeue; the current
-- range): prune then deletes its finished rows in batches, as before.
-- The range is checked (through the partial indexes of live states and finished_at),
-- counted (execution_counts loses its rows, as the delete trigger would do) and its keys
-- deleted without locking more than its readers do; only then the four parents are locked
-- ACCESS EXCLUSIVE, the range checked again (an operator may have requeued one of it), and its
-- partitions dropped: the exclusive locks are held for two index probes, the DROPs and the
-- commit. lock_timeout bounds every wait, the four parents' together (and so how long writers
-- queue behind a waiting lock): a busy range fails with 55P03, all undone, and prune tries
-- again later. Not a SHARE lock on the range's partition first: writers' generic plans lock
-- every partition, so they would queue behind it holding their locks on the parents, which
-- this function then waits for. Audited in operator_actions ('prune').
CREATE OR REPLACE FUNCTION {schema}.drop_history_range(p_lo bigint, p_before timestamptz, p_by text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '500ms' AS $$
DECLARE
    ns text := (SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE c.oid = '{schema}.workflow_executions'::regclass);
    v_hi bigint;
    v_part text;
    v_busy boolean;
    v_busy_sql text;
    v_passed timestamptz;
    v_counts jsonb;
    v_n bigint;
    t text;
    v_dropped text[] := '{}';
    v_deadline timestamptz;
BEGIN
    IF p_lo IS NULL OR p_before IS NULL THEN
        RAISE EXCEPTION 'cannot drop a history range: give its lower bound and a cutoff time'
            USING ERRCODE = 'KS409';
    END IF;
    PERFORM {schema}.refuse_future_cutoff(p_before, 'drop a history range', 'drops');  -- (since 0029)
    SELECT p.hi INTO v_hi FROM {schema}.history_partitions p WHERE p.lo = p_lo FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT e.created_at INTO v_passed FROM {schema}.workflow_executions e
     WHERE e.id >= v_hi ORDER BY e.id LIMIT 1;
    IF v_passed IS NULL OR v_passed >= now() - interval '1 minute' THEN
        RETURN NULL;
    END IF;
    v_part := 'workflow_executions_p' || p_lo;
    v_busy_sql := format('SELECT EXISTS (SELECT 1 FROM %1$I.%2$I WHERE status = ''enqueued'')
                              OR EXISTS (SELECT 1 FROM %1$I.%2$I WHERE status = ''running'')
                              OR EXISTS (SELECT 1 FROM %1$I.%2$I WHERE status = ''waiting'')
                              OR EXISTS (SELECT 1 FROM %1$I.%2$I WHERE status = ''paused'')
                              OR EXISTS (SELECT 1 FROM %1$I.%2$I WHERE finished_at >= $1)
                              OR EXISTS (SELECT 1 FROM %1$I.%2$I c JOIN %1$I.workflow_executions p ON p.id = c.parent_id
                                          WHERE c.parent_id IS NOT NULL
                                            AND (p.id < $2 OR p.id >= $3))', ns, v_part);
    EXECUTE v_busy_sql INTO v_busy USING p_before, p_lo, v_hi;
    IF v_busy THEN
        RETURN NULL;
    END IF;
    BEGIN  -- a subtransaction: a range found busy under the locks undoes the counts and keys
        EXECUTE format('SELECT coalesce(jsonb_object_agg(status, k), ''{}''), coalesce(sum(k), 0)
                          FROM (SELECT status, count(*) AS k FROM %I.%I GROUP BY status) s', ns, v_part)
           INTO v_counts, v_n;
        EXECUTE format('INSERT INTO %1$I.execution_counts AS c (workflow_name, status, shard, n)
                        SELECT workflow_name, status, %1$I.count_shard(id), -count(*) FROM %1$I.%2$I
                         WHERE status IN (''success'', ''error'', ''cancelled'')
                         GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
                        ON CONFLICT (workflow_name, status, shard) DO UPDATE SET n = c.n + excluded.n', ns, v_part);
        DELETE FROM {schema}.execution_keys k WHERE k.execution_id >= p_lo AND k.execution_id < v_hi;
        -- Only now the parents: generic plans lock every partition, so a lock on this range's
        -- partition alone would hold up every writer as surely, and longer.
        -- One budget for the four: lock_timeout bounds each wait alone, so four waits just
        -- under it would hold the first parent's lock (and the writers queued behind it) for
        -- four times as long.
        v_deadline := clock_timestamp() + current_setting('lock_timeout')::interval;
        FOREACH t IN ARRAY ARRAY['workflow_executions', 'operation_outputs', 'step_attempts', 'workflow_waits'] LOOP
            PERFORM set_config('lock_timeout', greatest(1, ceil(1000 * extract(epoch FROM
                               v_deadline - clock_timestamp())))::bigint || 'ms', true);
            EXECUTE format('LOCK TABLE %I.%I IN ACCESS EXCLUSIVE MODE', ns, t);
        END LOOP;
        EXECUTE v_busy_sql INTO v_busy USING p_before, p_lo, v_hi;  -- an operator requeued one meanwhile?
        IF v_busy THEN
            RAISE EXCEPTION 'range % became busy', p_lo USING ERRCODE = 'KS410';
        END IF;
        FOREACH t IN ARRAY ARRAY['operation_outputs', 'step_attempts', 'workflow_waits', 'workflow_executions'] LOOP
            EXECUTE format('DROP TABLE %I.%I', ns, t || '_p' || p_lo);
            v_dropped := v_dropped || (t || '_p' || p_lo);
        END LOOP;
    EXCEPTION WHEN SQLSTATE 'KS410' THEN
        RETURN NULL;
    END;
    DELETE FROM {schema}.history_partitions p WHERE p.lo = p_lo;
    INSERT INTO {schema}.operator_actions (actor, db_user, action, comment, details)
    VALUES (p_by, session_user, 'prune',
            format('dropped the id range [%s, %s): %s finished execution(s) that finished before %s',
                   p_lo, v_hi, v_n, p_before),
            jsonb_build_object('finished_before', p_before, 'deleted', v_n, 'by_status', v_counts,
                               'lowest_id', p_lo, 'highest_id', v_hi - 1, 'partitions', to_jsonb(v_dropped)));
    RETURN v_n;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.drop_history_range(bigint, timestamptz, text) FROM PUBLIC;
