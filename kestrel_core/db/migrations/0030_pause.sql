-- Kestrel schema, version 30: pause and resume one execution (issue 47).
--
-- A new status, 'paused': an execution an operator holds. It is not finished (a cancel ends
-- it, its parent waits for it, prune keeps it) and nothing runs it: it has no ready row (the
-- trigger ready_changed takes it out of the ready queue as it leaves 'enqueued'), a running
-- worker is fenced out at its next step boundary (every engine write requires 'running'), and
-- no sweep moves it. Its waits stay open with their deadlines: a sleep that comes due, a gate
-- decided or timed out, an event sent, a child finished resolve the wait and checkpoint it as
-- usual, but leave the execution paused (their wake-up moves only 'waiting' executions);
-- resume_execution() then sends it back to 'waiting' if a wait is still open, else to
-- 'enqueued', where it replays from its checkpoints.
--
-- 1. the status CHECK gains 'paused' (a scan of the history under its lock, as any CHECK);
-- 2. the audit's list of actions gains 'pause' and 'resume';
-- 3. execution_finished() also runs for a paused execution that ends (a cancel: its children
--    are cancelled with it, its parent's wait_for learns of it);
-- 4. guard_paused_executions: only the schema's owner (the audited pause_execution,
--    resume_execution and cancel_execution) moves an execution into or out of 'paused';
--    the worker's login cannot pause, nor let go of a paused execution with plain SQL.
-- 5. a partial index of the paused executions (by workflow), as each live status has one: the
--    console counts them, and prune's drop of a history range checks it holds none, without a
--    scan. Built here, in the transaction, like the CHECK above: both read the history once
--    while writes wait (an upgrade at 10M executions: seconds).
-- The partial indexes of live executions keep their three statuses: the deadline sweep does
-- not end a paused execution (its deadline is checked again once it is resumed), and a
-- paused child does not count for its parent's fan-in check (the parent woken early parks
-- again on it: children.py); neither needs a rebuild of the history's indexes.
-- The functions' current definitions live in schema/functions/ (same names); the guard is
-- created here first because its trigger needs it.

ALTER TABLE {schema}.workflow_executions DROP CONSTRAINT workflow_executions_status_check;
ALTER TABLE {schema}.workflow_executions ADD CONSTRAINT workflow_executions_status_check
    CHECK (status IN ('enqueued', 'running', 'waiting', 'paused', 'success', 'error', 'cancelled'));
CREATE INDEX workflow_executions_paused_idx ON {schema}.workflow_executions (workflow_name)
    WHERE status = 'paused';

DO $$
DECLARE
    allowed text[];
BEGIN
    SELECT coalesce(array_agg(DISTINCT v), '{}') INTO allowed
      FROM pg_constraint c,
           regexp_matches(pg_get_constraintdef(c.oid), '''([^'']+)''', 'g') AS m,
           unnest(CASE WHEN m[1] LIKE '{%}' THEN m[1]::text[] ELSE ARRAY[m[1]] END) AS v
     WHERE c.conrelid = '{schema}.operator_actions'::regclass
       AND c.conname = 'operator_actions_action_check';
    allowed := array(SELECT DISTINCT unnest(allowed || ARRAY['pause', 'resume']) ORDER BY 1);
    ALTER TABLE {schema}.operator_actions DROP CONSTRAINT IF EXISTS operator_actions_action_check;
    EXECUTE format('ALTER TABLE {schema}.operator_actions ADD CONSTRAINT operator_actions_action_check '
                   'CHECK (action IN (%s))',
                   (SELECT string_agg(quote_literal(a), ', ') FROM unnest(allowed) AS a));
END
$$;

DROP TRIGGER execution_finished ON {schema}.workflow_executions;
CREATE TRIGGER execution_finished
    AFTER UPDATE OF status ON {schema}.workflow_executions
    FOR EACH ROW
    WHEN (NEW.status IN ('success', 'error', 'cancelled')
          AND OLD.status IN ('enqueued', 'running', 'waiting', 'paused')
          AND (OLD.status = 'waiting' OR NEW.status = 'cancelled' OR NEW.parent_id IS NOT NULL))
    EXECUTE FUNCTION {schema}.execution_finished();

CREATE FUNCTION {schema}.guard_paused_executions() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF pg_has_role(current_user, (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID), 'USAGE') THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'permission denied to move execution % from % to % with a plain UPDATE as role %',
        OLD.id, OLD.status, NEW.status, current_user
        USING ERRCODE = '42501',
              HINT = 'Pause and resume through the audited operator functions: kestrel-console pause / resume, as a login granted the operator role.';
END
$$;
CREATE TRIGGER guard_paused_executions
    BEFORE UPDATE ON {schema}.workflow_executions
    FOR EACH ROW
    WHEN ((OLD.status = 'paused' OR NEW.status = 'paused') AND NEW.status IS DISTINCT FROM OLD.status)
    EXECUTE FUNCTION {schema}.guard_paused_executions();
REVOKE EXECUTE ON FUNCTION {schema}.guard_paused_executions() FROM PUBLIC;
