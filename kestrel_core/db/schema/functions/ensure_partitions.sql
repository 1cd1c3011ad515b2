-- ensure_partitions(): its current definition (migration 0022 made the history partitioned).
--
-- Keeps `ahead` id ranges (history_settings; p_ahead overrides) past the range the id sequence
-- is in: each new range gets one partition of workflow_executions, operation_outputs,
-- step_attempts and workflow_waits (<table>_p<lo>), recorded in history_partitions. Called by
-- migrate and every minute by each worker (leaderless: an advisory lock lets one at a time do
-- it, the others return at once). SECURITY DEFINER, owned by the schema's owner: the worker
-- role creates no table itself and no superuser or external scheduler is needed.
-- CREATE TABLE ... PARTITION OF would take ACCESS EXCLUSIVE on the parent (every writer queued
-- behind a long report); CREATE TABLE (LIKE ...) then ATTACH PARTITION takes SHARE UPDATE
-- EXCLUSIVE, which writers do not wait for, under a short lock_timeout: a call that cannot
-- have its locks fails (55P03) and the next minute's call tries again. Returns how many
-- ranges it created.
CREATE OR REPLACE FUNCTION {schema}.ensure_partitions(p_ahead integer DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '200ms' AS $$
DECLARE
    ns text := (SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE c.oid = '{schema}.workflow_executions'::regclass);
    v_size bigint;
    v_ahead integer;
    v_last_id bigint;
    v_hi bigint;
    v_next bigint;
    v_model bigint;
    v_want bigint;
    v_lo bigint;
    t text;
    v_opts text;
    v_made integer := 0;
BEGIN
    IF p_ahead IS NOT NULL AND (p_ahead < 1 OR p_ahead > 50) THEN
        RAISE EXCEPTION 'cannot ensure partitions: ahead must be between 1 and 50, got %', p_ahead
            USING ERRCODE = 'KS409';
    END IF;
    IF NOT pg_try_advisory_xact_lock(hashtext('kestrel.ensure_partitions'), hashtext(ns)) THEN
        RETURN 0;
    END IF;
    SELECT s.range_size, coalesce(p_ahead, s.ahead) INTO v_size, v_ahead FROM {schema}.history_settings s;
    -- last_value, not pg_sequence_last_value(): after a RESTART the next id is last_value
    EXECUTE format('SELECT last_value FROM %s', pg_get_serial_sequence('{schema}.workflow_executions', 'id'))
       INTO v_last_id;
    v_want := (v_last_id / v_size + 1 + v_ahead) * v_size;
    -- from the range the sequence is in (after a RESTART it may be one prune dropped) to `ahead`
    -- ranges past it, every slot not covered gets a range (cut short by the next one)
    v_lo := (v_last_id / v_size) * v_size;
    WHILE v_lo < v_want LOOP
        SELECT p.hi INTO v_hi FROM {schema}.history_partitions p WHERE p.lo <= v_lo AND p.hi > v_lo;
        IF FOUND THEN
            v_lo := v_hi;
            CONTINUE;
        END IF;
        SELECT min(p.lo) INTO v_next FROM {schema}.history_partitions p WHERE p.lo > v_lo;
        v_hi := least(v_lo + v_size, coalesce(v_next, v_lo + v_size));
        SELECT max(p.lo) INTO v_model FROM {schema}.history_partitions p;
        FOREACH t IN ARRAY ARRAY['workflow_executions', 'operation_outputs', 'step_attempts', 'workflow_waits'] LOOP
            -- the storage settings of the newest range (fillfactor, autovacuum, toast target)
            SELECT coalesce(' WITH (' || array_to_string(c.reloptions, ', ') || ')', '') INTO v_opts
              FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = ns AND c.relname = t || '_p' || v_model;
            EXECUTE format('CREATE TABLE %I.%I (LIKE %I.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)%s',
                           ns, t || '_p' || v_lo, ns, t, coalesce(v_opts, ''));
            EXECUTE format('ALTER TABLE %I.%I ATTACH PARTITION %I.%I FOR VALUES FROM (%s) TO (%s)',
                           ns, t, ns, t || '_p' || v_lo, v_lo, v_hi);
        END LOOP;
        INSERT INTO {schema}.history_partitions (lo, hi) VALUES (v_lo, v_hi);
        v_lo := v_hi;
        v_made := v_made + 1;
    END LOOP;
    RETURN v_made;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.ensure_partitions(integer) FROM PUBLIC;
