-- Kestrel schema, version 29: the gates of version 24, tightened after a second review (issue 44).
--
-- 1. guard_wait_writes: another login than the schema's owner creates a wait (INSERT) or
--    reopens a resolved one (resolved_at back to NULL) only for an execution that is running:
--    the engine parks an execution under its own current claim (durable/waits.py, events.py,
--    children.py), in the statement that moves it to 'waiting'. Before, the worker login
--    inserted a due sleep for an execution parked on a gate, and the wait sweep woke it.
-- 2. guard_waiting_executions (its trigger now fires for every UPDATE of a waiting row): an
--    execution with an undecided approval gate is never woken to 'enqueued', whoever asks
--    (the gate's decision, or its timeout, resolves the gate first); and another login changes
--    nothing of a waiting execution (its output, owner, lease...) but the deadline sweep's move
--    to 'error'. The wait sweep skips such an execution instead of failing its whole batch.
-- 3. guard_execution_identity: an execution's id never changes, for anyone (a changed id
--    detached a waiting execution from its waits; a migration that must renumber disables the
--    trigger in its own transaction); its version, once set by its first claim, changes only
--    by the owner's code. The worker role's UPDATE on workflow_executions is now a list of the
--    columns the engine writes (kestrel_core/db/roles.py): not the workflow, input, queue,
--    priority, keys, parent, creation time nor trace context of any execution.
-- 4. guard_declarations: another login moves a schedule's next tick only to advance a due
--    schedule (the scheduler) or with a redeclared cron / timezone (audited); an advance to more
--    than a day ahead of now is audited too (declarations, with the database role): a far tick
--    is a pause that shows as active.
-- The functions' definitions live in schema/functions/ (same names), applied right after this
-- migration in its transaction: created here as stubs, because the triggers need them.

CREATE FUNCTION {schema}.guard_wait_writes() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END';
CREATE FUNCTION {schema}.guard_execution_identity() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END';
REVOKE EXECUTE ON FUNCTION {schema}.guard_wait_writes() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION {schema}.guard_execution_identity() FROM PUBLIC;

-- 1.
CREATE TRIGGER guard_wait_inserts
    BEFORE INSERT ON {schema}.workflow_waits
    FOR EACH ROW EXECUTE FUNCTION {schema}.guard_wait_writes();
CREATE TRIGGER guard_wait_reopens
    BEFORE UPDATE ON {schema}.workflow_waits
    FOR EACH ROW WHEN (OLD.resolved_at IS NOT NULL AND NEW.resolved_at IS NULL)
    EXECUTE FUNCTION {schema}.guard_wait_writes();

-- 2.
DROP TRIGGER guard_waiting_executions ON {schema}.workflow_executions;
CREATE TRIGGER guard_waiting_executions
    BEFORE UPDATE ON {schema}.workflow_executions
    FOR EACH ROW WHEN (OLD.status = 'waiting')
    EXECUTE FUNCTION {schema}.guard_waiting_executions();

-- 3.
CREATE TRIGGER guard_execution_identity
    BEFORE UPDATE ON {schema}.workflow_executions
    FOR EACH ROW WHEN (NEW.id IS DISTINCT FROM OLD.id
                       OR (OLD.version IS NOT NULL AND NEW.version IS DISTINCT FROM OLD.version))
    EXECUTE FUNCTION {schema}.guard_execution_identity();

-- 4.
DROP TRIGGER guard_schedule_update ON {schema}.schedules;
CREATE TRIGGER guard_schedule_update
    BEFORE UPDATE ON {schema}.schedules
    FOR EACH ROW WHEN ((NEW.cron, NEW.timezone, NEW.workflow_name, NEW.input, NEW.catch_up, NEW.source)
                       IS DISTINCT FROM (OLD.cron, OLD.timezone, OLD.workflow_name, OLD.input, OLD.catch_up, OLD.source)
                       OR NEW.next_tick IS DISTINCT FROM OLD.next_tick)
    EXECUTE FUNCTION {schema}.guard_declarations();
CREATE TRIGGER audit_schedule_ticks
    AFTER UPDATE ON {schema}.schedules
    FOR EACH ROW WHEN (NEW.next_tick IS DISTINCT FROM OLD.next_tick
                       AND (NEW.cron, NEW.timezone, NEW.workflow_name, NEW.input, NEW.catch_up)
                           IS NOT DISTINCT FROM (OLD.cron, OLD.timezone, OLD.workflow_name, OLD.input, OLD.catch_up))
    EXECUTE FUNCTION {schema}.audit_declarations();

-- 5. (finding 8, second review) -----------------------------------------------------------
-- A decision's audit row matches it only with the same comment too: the docs promise the
-- audit keeps what the approver wrote, so a comment edited in either place is unaudited.
CREATE OR REPLACE VIEW {schema}.approval_audits AS
SELECT w.execution_id, w.step_id, w.decision, w.decided_by, w.decided_by_db_user, w.decided_at,
       EXISTS (
           SELECT 1 FROM {schema}.operator_actions x
            WHERE x.execution_id = w.execution_id AND x.step_id = w.step_id
              AND x.action = CASE w.decision WHEN 'approved' THEN 'approve' ELSE 'reject' END
              AND x.actor IS NOT DISTINCT FROM w.decided_by
              AND x.db_user IS NOT DISTINCT FROM w.decided_by_db_user
              AND x.comment IS NOT DISTINCT FROM w.comment) AS audited
  FROM {schema}.workflow_waits w
 WHERE w.kind = 'approval' AND w.decision IN ('approved', 'rejected');
