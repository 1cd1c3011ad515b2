-- guard_waiting_executions(): its current definition (created by migration 0024).
--
-- An execution leaves 'waiting' only through the schema owner's code (the SECURITY DEFINER
-- functions and triggers) or the deadline sweep (to 'error', past its deadline): no plain UPDATE
-- by another login completes, fails, releases or changes an execution parked on a gate; and an
-- undecided approval gate holds its execution against any wake-up, the owner's too (0029).
CREATE OR REPLACE FUNCTION {schema}.guard_waiting_executions() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    -- An undecided gate holds its execution, whoever wakes it (since 0029): a decision or a
    -- timeout resolves the gate before the execution moves on.
    IF NEW.status = 'enqueued' AND EXISTS (
           SELECT 1 FROM {schema}.workflow_waits w
            WHERE w.execution_id = OLD.id AND w.kind = 'approval' AND w.resolved_at IS NULL) THEN
        RAISE EXCEPTION 'permission denied to wake execution % as role %: its approval gate "%" is undecided',
            OLD.id, current_user,
            (SELECT min(w.step_id) FROM {schema}.workflow_waits w
              WHERE w.execution_id = OLD.id AND w.kind = 'approval' AND w.resolved_at IS NULL)
            USING ERRCODE = '42501',
                  HINT = 'A gate is decided by kestrel-console approve / reject (audited), or times out.';
    END IF;
    IF pg_has_role(current_user, (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID), 'USAGE') THEN
        RETURN NEW;
    END IF;
    IF NEW.status = 'error' AND NEW.deadline_at IS NOT DISTINCT FROM OLD.deadline_at
       AND OLD.deadline_at <= now() AND NEW.output IS NOT DISTINCT FROM OLD.output THEN
        RETURN NEW;  -- the deadline sweep (kestrel_core.dispatch.deadlines)
    END IF;
    RAISE EXCEPTION 'permission denied to % execution % (it waits on %) with a plain UPDATE as role %',
        CASE WHEN NEW.status IS DISTINCT FROM OLD.status THEN 'move to ' || NEW.status || ' the waiting'
             WHEN NEW.deadline_at IS DISTINCT FROM OLD.deadline_at THEN 'move the deadline of the waiting'
             ELSE 'change the waiting' END,
        OLD.id,
        coalesce((SELECT string_agg(format('%s "%s"', w.kind, w.step_id), ', ' ORDER BY w.step_id)
                    FROM {schema}.workflow_waits w
                   WHERE w.execution_id = OLD.id AND w.resolved_at IS NULL), 'a wait'),
        current_user
        USING ERRCODE = '42501',
              HINT = 'A waiting execution moves on when its gate is decided (kestrel-console approve / reject), its sleep or timeout is due, its event is sent, its children finish, or it is cancelled.';
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.guard_waiting_executions() FROM PUBLIC;
