-- Kestrel schema, version 40: one trigger function where several did the same work.
--
-- 1. guard_execution_inserts, guard_finished_executions, guard_paused_executions,
--    guard_paused_rows and guard_step_attempts were five functions that each let the table's
--    owner through and refused anyone else with its own message. Now one function,
--    guard_owner_writes (in schema/functions/), does it once; each trigger names its rule as
--    its argument. The triggers keep their names (so their order), their timing and their WHEN
--    clauses: the rows they fire for are the same, and the hot path (whose writes no WHEN
--    picks) pays nothing new.
-- 2. count_finished_inserted and count_finished_deleted were one grouped upsert of the finished
--    rows a statement inserted (+) or deleted (-). Now count_finished_statement does both, on
--    the transition table both triggers name changed_rows; the triggers keep their names.
--
-- The functions are created here as they are at this release, so the triggers have them at
-- every commit; their files apply over them after every migration.

-- 1. -------------------------------------------------------------------------------------
CREATE FUNCTION {schema}.guard_owner_writes() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    -- current_user is the table's owner inside the SECURITY DEFINER functions and triggers.
    IF pg_has_role(current_user, (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID), 'USAGE') THEN
        RETURN NEW;
    END IF;
    CASE TG_ARGV[0]
    WHEN 'insert' THEN
        RAISE EXCEPTION 'permission denied to insert an execution that is % (or claimed, started, finished or with a deadline) as role %',
            NEW.status, current_user
            USING ERRCODE = '42501',
                  HINT = 'A new execution is enqueued (Kestrel.enqueue) and the engine moves it on from there.';
    WHEN 'finished' THEN
        RAISE EXCEPTION 'permission denied to % execution % (it is %) with a plain UPDATE as role %',
            CASE WHEN NEW.status = 'cancelled' AND OLD.status <> 'cancelled' THEN 'cancel'
                 ELSE 'change the finished' END,
            OLD.id, OLD.status, current_user
            USING ERRCODE = '42501',
                  HINT = 'Cancel and requeue through the audited operator functions: kestrel-console cancel / requeue, as a login granted the operator role.';
    WHEN 'paused' THEN
        RAISE EXCEPTION 'permission denied to move execution % from % to % with a plain UPDATE as role %',
            OLD.id, OLD.status, NEW.status, current_user
            USING ERRCODE = '42501',
                  HINT = 'Pause and resume through the audited operator functions: kestrel-console pause / resume, as a login granted the operator role.';
    WHEN 'paused_row' THEN
        IF (to_jsonb(NEW) - 'lease_expires' - 'updated_at') = (to_jsonb(OLD) - 'lease_expires' - 'updated_at') THEN
            RETURN NEW;
        END IF;
        RAISE EXCEPTION 'permission denied to change paused execution % with a plain UPDATE as role %', OLD.id, current_user
            USING ERRCODE = '42501',
                  HINT = 'A paused execution changes only through the audited operator functions (resume, cancel, fork).';
    WHEN 'attempt' THEN
        RAISE EXCEPTION 'permission denied to rewrite attempt % of step "%" of execution % (it is %) as role %',
            OLD.attempt, OLD.step_id, OLD.execution_id, OLD.outcome, current_user
            USING ERRCODE = '42501',
                  HINT = 'An attempt is closed once, by the worker that ran it or the transition that ended its claim; a closed attempt is history.';
    END CASE;  -- no rule matched (a trigger without one): CASE_NOT_FOUND refuses the write
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.guard_owner_writes() FROM PUBLIC;

DROP TRIGGER guard_execution_inserts ON {schema}.workflow_executions;
CREATE TRIGGER guard_execution_inserts
    BEFORE INSERT ON {schema}.workflow_executions
    FOR EACH ROW
    WHEN (NEW.status <> 'enqueued' OR NEW.owner_id IS NOT NULL OR NEW.lease_expires IS NOT NULL
          OR NEW.started_at IS NOT NULL OR NEW.finished_at IS NOT NULL OR NEW.output IS NOT NULL
          OR NEW.error IS NOT NULL OR NEW.deadline_at IS NOT NULL OR NEW.claim_epoch <> 0 OR NEW.claims <> 0)
    EXECUTE FUNCTION {schema}.guard_owner_writes('insert');
DROP FUNCTION {schema}.guard_execution_inserts();

DROP TRIGGER guard_finished_executions ON {schema}.workflow_executions;
CREATE TRIGGER guard_finished_executions
    BEFORE UPDATE ON {schema}.workflow_executions
    FOR EACH ROW
    WHEN ((NEW.status = 'cancelled' AND OLD.status <> 'cancelled')
          OR OLD.status IN ('success', 'error', 'cancelled'))
    EXECUTE FUNCTION {schema}.guard_owner_writes('finished');
DROP FUNCTION {schema}.guard_finished_executions();

DROP TRIGGER guard_paused_executions ON {schema}.workflow_executions;
CREATE TRIGGER guard_paused_executions
    BEFORE UPDATE ON {schema}.workflow_executions
    FOR EACH ROW
    WHEN ((OLD.status = 'paused' OR NEW.status = 'paused') AND NEW.status IS DISTINCT FROM OLD.status)
    EXECUTE FUNCTION {schema}.guard_owner_writes('paused');
DROP FUNCTION {schema}.guard_paused_executions();

DROP TRIGGER guard_paused_rows ON {schema}.workflow_executions;
CREATE TRIGGER guard_paused_rows
    BEFORE UPDATE ON {schema}.workflow_executions
    FOR EACH ROW
    WHEN (OLD.status = 'paused' AND NEW.status = 'paused')
    EXECUTE FUNCTION {schema}.guard_owner_writes('paused_row');
DROP FUNCTION {schema}.guard_paused_rows();

DROP TRIGGER guard_step_attempts ON {schema}.step_attempts;
CREATE TRIGGER guard_step_attempts
    BEFORE UPDATE ON {schema}.step_attempts
    FOR EACH ROW
    WHEN (OLD.outcome <> 'running'
          OR (NEW.execution_id, NEW.step_id, NEW.attempt, NEW.owner_id, NEW.claim_epoch, NEW.started_at)
             IS DISTINCT FROM (OLD.execution_id, OLD.step_id, OLD.attempt, OLD.owner_id, OLD.claim_epoch, OLD.started_at))
    EXECUTE FUNCTION {schema}.guard_owner_writes('attempt');
DROP FUNCTION {schema}.guard_step_attempts();

-- 2. -------------------------------------------------------------------------------------
CREATE FUNCTION {schema}.count_finished_statement() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO {schema}.execution_counts AS c (workflow_name, status, shard, n)
    SELECT workflow_name, status, {schema}.count_shard(id),
           CASE WHEN TG_OP = 'DELETE' THEN -count(*) ELSE count(*) END
      FROM changed_rows WHERE status IN ('success', 'error', 'cancelled')
     GROUP BY 1, 2, 3
     ORDER BY 1, 2, 3
    ON CONFLICT (workflow_name, status, shard) DO UPDATE SET n = c.n + excluded.n;
    RETURN NULL;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.count_finished_statement() FROM PUBLIC;

DROP TRIGGER execution_counts_insert ON {schema}.workflow_executions;
CREATE TRIGGER execution_counts_insert
    AFTER INSERT ON {schema}.workflow_executions
    REFERENCING NEW TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.count_finished_statement();
DROP FUNCTION {schema}.count_finished_inserted();

DROP TRIGGER execution_counts_delete ON {schema}.workflow_executions;
CREATE TRIGGER execution_counts_delete
    AFTER DELETE ON {schema}.workflow_executions
    REFERENCING OLD TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.count_finished_statement();
DROP FUNCTION {schema}.count_finished_deleted();
