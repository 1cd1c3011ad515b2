-- Kestrel schema, version 24: the gates hold against the engine's own login (issue 44).
--
-- The worker role writes what the engine writes (claims, checkpoints, parks, attempts, its
-- queue and schedule declarations), so column privileges alone left it able, with plain SQL,
-- to complete or fail an execution parked on an undecided gate, to resolve a pending gate, to
-- take a live execution out of the ready queue, to rewrite a decided gate or a finished
-- attempt, to pause a queue with a 100-year rate window, and to add an operator schedule with
-- no audit. Each of these is now refused by the database, whoever the login, unless the change
-- comes from the schema's owner (the SECURITY DEFINER functions and triggers run as it):
--
-- 1. guard_waiting_executions: an execution leaves 'waiting' only through the owner's code
--    (decide_approval, the sweeps, send_event, a child's end, cancel) or the deadline sweep
--    (to 'error', once its deadline_at has passed); a parked execution's deadline is not
--    moved by another login.
-- 2. guard_waits: a decided wait (approved, rejected, timed out) never changes, for anyone;
--    another login may only reopen a wait (resolved_at to NULL) and rewrite the details of a
--    wait that is not a gate, never resolve one nor change what an approver is shown.
-- 3. guard_ready_rows: another login never rewrites a ready row, and a DELETE from
--    executions_ready that leaves a live ('enqueued') execution without one is refused when
--    its transaction commits (the claim deletes ready rows and moves their executions to
--    'running', in the same statement or transaction: that passes).
-- 4. guard_step_attempts: a closed attempt (success, error) never changes for another login,
--    nor does any attempt's identity (execution, step, number, owner, claim, start).
-- 5. guard_declarations / audit_declarations: a change of a queue's limits or of a schedule's
--    definition is audited (the table declarations, with the database role); another login
--    declares a rate window of at most a day (checked when declared: a queue declared so
--    before this version still runs) with no future start in it, a finite next tick, and
--    writes only schedules declared in code ('code': an operator's 'cli' schedule is the
--    audited add_schedule's).
-- 6. operator_actions.at defaults to clock_timestamp(): an audit row records when the action
--    happened, not when its transaction began (with decide_approval's own clock: issue 44,
--    finding 7); events record the database role that sent them (sent_by_db_user).
--
-- The triggers' WHEN clauses are what the claim, the heartbeat and the step boundary evaluate:
-- none of them moves an execution out of 'waiting', resolves a wait or closes a closed
-- attempt; the claim pays one statement-level call per DELETE of ready rows.
-- The functions' current definitions live in schema/functions/ (same names); they are
-- created here first because the triggers below need them.

ALTER TABLE {schema}.operator_actions ALTER COLUMN at SET DEFAULT clock_timestamp();
ALTER TABLE {schema}.operator_actions DROP CONSTRAINT operator_actions_action_check;
ALTER TABLE {schema}.operator_actions ADD CONSTRAINT operator_actions_action_check CHECK (action IN (
    'add_schedule', 'approve', 'cancel', 'pause_queue', 'pause_schedule', 'prune', 'reject',
    'remove_schedule', 'requeue', 'resume_queue', 'resume_schedule', 'send_event'));
-- The engine's declarations (a worker declaring its queues' limits and its code schedules at
-- start), audited apart from the operators' actions: who (the database role), when, what, and
-- what it was. Written only by audit_declarations(), when a declaration changes something.
CREATE TABLE {schema}.declarations (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at         timestamptz NOT NULL DEFAULT clock_timestamp(),
    db_user    text NOT NULL DEFAULT session_user,
    kind       text NOT NULL CHECK (kind IN ('queue', 'schedule')),
    name       text NOT NULL,
    declared   jsonb NOT NULL,
    was        jsonb
);
CREATE INDEX declarations_name_idx ON {schema}.declarations (kind, name, at);
-- Which action a gate's decision audits, and the events' sender role.
-- (The default set apart: events sent before this version keep no role, not the migrator's.)
ALTER TABLE {schema}.workflow_events ADD COLUMN sent_by_db_user text;
ALTER TABLE {schema}.workflow_events ALTER COLUMN sent_by_db_user SET DEFAULT session_user;

-- 1. -------------------------------------------------------------------------------------
CREATE FUNCTION {schema}.guard_waiting_executions() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF pg_has_role(current_user, (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID), 'USAGE') THEN
        RETURN NEW;
    END IF;
    IF NEW.status = 'error' AND NEW.deadline_at IS NOT DISTINCT FROM OLD.deadline_at
       AND OLD.deadline_at <= now() THEN
        RETURN NEW;  -- the deadline sweep (kestrel_core.dispatch.deadlines)
    END IF;
    RAISE EXCEPTION 'permission denied to % execution % (it waits on %) with a plain UPDATE as role %',
        CASE WHEN NEW.status IS DISTINCT FROM OLD.status THEN 'move to ' || NEW.status || ' the waiting'
             ELSE 'move the deadline of the waiting' END,
        OLD.id,
        coalesce((SELECT string_agg(format('%s "%s"', w.kind, w.step_id), ', ' ORDER BY w.step_id)
                    FROM {schema}.workflow_waits w
                   WHERE w.execution_id = OLD.id AND w.resolved_at IS NULL), 'a wait'),
        current_user
        USING ERRCODE = '42501',
              HINT = 'A waiting execution moves on when its gate is decided (kestrel-console approve / reject), its sleep or timeout is due, its event is sent, its children finish, or it is cancelled.';
END
$$;
CREATE TRIGGER guard_waiting_executions
    BEFORE UPDATE ON {schema}.workflow_executions
    FOR EACH ROW
    WHEN (OLD.status = 'waiting'
          AND (NEW.status IS DISTINCT FROM OLD.status OR NEW.deadline_at IS DISTINCT FROM OLD.deadline_at))
    EXECUTE FUNCTION {schema}.guard_waiting_executions();
REVOKE EXECUTE ON FUNCTION {schema}.guard_waiting_executions() FROM PUBLIC;

-- 2. -------------------------------------------------------------------------------------
CREATE FUNCTION {schema}.guard_waits() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF OLD.decision IS NOT NULL AND NEW IS DISTINCT FROM OLD THEN
        RAISE EXCEPTION 'permission denied to change % "%" of execution %: it was decided (% by % at %) and a decision is final',
            OLD.kind, OLD.step_id, OLD.execution_id, OLD.decision, coalesce(OLD.decided_by, 'the timeout'),
            to_char(OLD.decided_at, 'YYYY-MM-DD HH24:MI:SS TZ')
            USING ERRCODE = '42501';
    END IF;
    IF pg_has_role(current_user, (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID), 'USAGE') THEN
        RETURN NEW;
    END IF;
    IF OLD.resolved_at IS NULL AND NEW.resolved_at IS NOT NULL THEN
        RAISE EXCEPTION 'permission denied to resolve % "%" of execution % with a plain UPDATE as role %',
            OLD.kind, OLD.step_id, OLD.execution_id, current_user
            USING ERRCODE = '42501',
                  HINT = 'A gate is decided by kestrel-console approve / reject (audited); sleeps, timeouts, events and children are resolved by the engine.';
    END IF;
    -- What an approver is shown stays what the workflow asked about (a sleep's, an event's,
    -- children's details are the engine's own bookkeeping, rewritten on a replay).
    IF NEW.details IS DISTINCT FROM OLD.details AND OLD.kind = 'approval' THEN
        RAISE EXCEPTION 'permission denied to change the details of % "%" of execution % as role %',
            OLD.kind, OLD.step_id, OLD.execution_id, current_user
            USING ERRCODE = '42501';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER guard_waits
    BEFORE UPDATE ON {schema}.workflow_waits
    FOR EACH ROW
    WHEN (OLD.decision IS NOT NULL
          OR (OLD.resolved_at IS NULL AND NEW.resolved_at IS NOT NULL)
          OR NEW.details IS DISTINCT FROM OLD.details)
    EXECUTE FUNCTION {schema}.guard_waits();
REVOKE EXECUTE ON FUNCTION {schema}.guard_waits() FROM PUBLIC;

-- 3. -------------------------------------------------------------------------------------
-- The ids whose ready row a non-owner's DELETE took while their execution was still
-- 'enqueued': checked again when the transaction commits (a claim moves them to 'running'
-- later in the same transaction). Rows live only inside their transaction.
CREATE TABLE {schema}.ready_rechecks (
    id bigint NOT NULL
);
CREATE FUNCTION {schema}.ready_recheck() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM {schema}.ready_rechecks WHERE id = NEW.id;
    IF EXISTS (SELECT 1 FROM {schema}.workflow_executions e WHERE e.id = NEW.id AND e.status = 'enqueued')
       AND NOT EXISTS (SELECT 1 FROM {schema}.executions_ready r WHERE r.id = NEW.id) THEN
        RAISE EXCEPTION 'permission denied to take enqueued execution % out of the ready queue as role % without claiming it',
            NEW.id, session_user
            USING ERRCODE = '42501',
                  HINT = 'An enqueued execution leaves the ready queue by a claim (to running) or by kestrel-console cancel (audited).';
    END IF;
    RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER ready_recheck
    AFTER INSERT ON {schema}.ready_rechecks
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION {schema}.ready_recheck();
REVOKE EXECUTE ON FUNCTION {schema}.ready_recheck() FROM PUBLIC;

CREATE FUNCTION {schema}.guard_ready_rows() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    live bigint[];
BEGIN
    -- Who may TRUNCATE the ready table (its owner, so the SECURITY DEFINER triggers that keep
    -- it; a superuser) could empty it anyway: it passes. A simple expression, not a query: the
    -- claim pays this call once per statement.
    IF TG_OP = 'UPDATE' THEN
        IF has_table_privilege(TG_RELID, 'TRUNCATE') THEN
            RETURN NEW;
        END IF;
        RAISE EXCEPTION 'permission denied to rewrite the ready row of execution % as role %', OLD.id, current_user
            USING ERRCODE = '42501';
    END IF;
    IF has_table_privilege(TG_RELID, 'TRUNCATE') THEN
        RETURN NULL;
    END IF;
    -- The claim's statement moved its executions to 'running' before this runs (an AFTER
    -- statement trigger fires at the end of the whole statement): nothing is left to check.
    SELECT array_agg(DISTINCT g.id) INTO live
      FROM gone g
     WHERE EXISTS (SELECT 1 FROM {schema}.workflow_executions e WHERE e.id = g.id AND e.status = 'enqueued');
    IF live IS NOT NULL THEN
        INSERT INTO {schema}.ready_rechecks (id) SELECT unnest(live);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER guard_ready_rows_delete
    AFTER DELETE ON {schema}.executions_ready
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.guard_ready_rows();
CREATE TRIGGER guard_ready_rows_update
    BEFORE UPDATE ON {schema}.executions_ready
    FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*)
    EXECUTE FUNCTION {schema}.guard_ready_rows();
REVOKE EXECUTE ON FUNCTION {schema}.guard_ready_rows() FROM PUBLIC;

-- 4. -------------------------------------------------------------------------------------
CREATE FUNCTION {schema}.guard_step_attempts() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF pg_has_role(current_user, (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID), 'USAGE') THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'permission denied to rewrite attempt % of step "%" of execution % (it is %) as role %',
        OLD.attempt, OLD.step_id, OLD.execution_id, OLD.outcome, current_user
        USING ERRCODE = '42501',
              HINT = 'An attempt is closed once, by the worker that ran it; a closed attempt is history.';
END
$$;
CREATE TRIGGER guard_step_attempts
    BEFORE UPDATE ON {schema}.step_attempts
    FOR EACH ROW
    WHEN (OLD.outcome <> 'running'
          OR (NEW.execution_id, NEW.step_id, NEW.attempt, NEW.owner_id, NEW.claim_epoch, NEW.started_at)
             IS DISTINCT FROM (OLD.execution_id, OLD.step_id, OLD.attempt, OLD.owner_id, OLD.claim_epoch, OLD.started_at))
    EXECUTE FUNCTION {schema}.guard_step_attempts();
REVOKE EXECUTE ON FUNCTION {schema}.guard_step_attempts() FROM PUBLIC;

-- 5. -------------------------------------------------------------------------------------
CREATE FUNCTION {schema}.guard_declarations() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF pg_has_role(current_user, (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID), 'USAGE') THEN
        RETURN NEW;
    END IF;
    IF TG_TABLE_NAME = 'queues' THEN
        -- A rate window longer than a day is a pause that shows as 'active'. Checked when it
        -- is declared, not at each claim: a queue declared so before version 24 still runs.
        IF NEW.rate_period > interval '1 day'
           AND (TG_OP = 'INSERT' OR NEW.rate_period IS DISTINCT FROM OLD.rate_period) THEN
            RAISE EXCEPTION 'cannot declare queue "%" with a rate window of % as role %: at most a day',
                NEW.name, NEW.rate_period, current_user
                USING ERRCODE = '23514',
                      HINT = 'Pause a queue with kestrel-console queue pause (audited).';
        END IF;
        IF EXISTS (SELECT 1 FROM unnest(NEW.rate_starts) AS s(at) WHERE s.at > clock_timestamp()) THEN
            RAISE EXCEPTION 'permission denied to record a claim in the future in the rate window of queue "%" as role %',
                NEW.name, current_user USING ERRCODE = '42501',
                HINT = 'Pause a queue with kestrel-console queue pause (audited).';
        END IF;
        RETURN NEW;
    END IF;
    -- schedules
    IF NEW.source <> 'code' OR (TG_OP = 'UPDATE' AND OLD.source <> 'code'
          AND (NEW.cron, NEW.timezone, NEW.workflow_name, NEW.input, NEW.catch_up)
              IS DISTINCT FROM (OLD.cron, OLD.timezone, OLD.workflow_name, OLD.input, OLD.catch_up)) THEN
        RAISE EXCEPTION 'permission denied to write operator schedule "%" with plain SQL as role %', NEW.name, current_user
            USING ERRCODE = '42501',
                  HINT = 'Operator schedules are added, paused and removed by kestrel-console schedule add / pause / remove (audited).';
    END IF;
    IF NOT isfinite(NEW.next_tick) THEN
        RAISE EXCEPTION 'permission denied to set the next tick of schedule "%" to % as role % (that is a pause)',
            NEW.name, NEW.next_tick, current_user
            USING ERRCODE = '42501', HINT = 'Pause a schedule with kestrel-console schedule pause (audited).';
    END IF;
    RETURN NEW;
END
$$;
CREATE FUNCTION {schema}.audit_declarations() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_TABLE_NAME = 'queues' THEN
        INSERT INTO {schema}.declarations (kind, name, declared, was)
        VALUES ('queue', NEW.name,
                jsonb_build_object('concurrency', NEW.concurrency, 'per_worker', NEW.per_worker,
                                   'rate_limit', NEW.rate_limit, 'rate_period', NEW.rate_period,
                                   'per_key', NEW.per_key, 'priority', NEW.priority),
                CASE WHEN TG_OP = 'UPDATE' THEN
                    jsonb_build_object('concurrency', OLD.concurrency, 'per_worker', OLD.per_worker,
                                       'rate_limit', OLD.rate_limit, 'rate_period', OLD.rate_period,
                                       'per_key', OLD.per_key, 'priority', OLD.priority) END);
    ELSE
        INSERT INTO {schema}.declarations (kind, name, declared, was)
        VALUES ('schedule', NEW.name,
                jsonb_build_object('source', NEW.source, 'created_by', NEW.created_by, 'cron', NEW.cron,
                                   'timezone', NEW.timezone, 'workflow', NEW.workflow_name,
                                   'input', NEW.input, 'catch_up', NEW.catch_up),
                CASE WHEN TG_OP = 'UPDATE' THEN
                    jsonb_build_object('cron', OLD.cron, 'timezone', OLD.timezone, 'workflow', OLD.workflow_name,
                                       'input', OLD.input, 'catch_up', OLD.catch_up) END);
    END IF;
    RETURN NULL;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.guard_declarations() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION {schema}.audit_declarations() FROM PUBLIC;

CREATE TRIGGER guard_queue_insert
    BEFORE INSERT ON {schema}.queues
    FOR EACH ROW WHEN (NEW.rate_period > interval '1 day' OR cardinality(NEW.rate_starts) > 0)
    EXECUTE FUNCTION {schema}.guard_declarations();
CREATE TRIGGER guard_queue_writes
    BEFORE UPDATE ON {schema}.queues
    FOR EACH ROW WHEN (NEW.rate_starts IS DISTINCT FROM OLD.rate_starts
                       OR NEW.rate_period IS DISTINCT FROM OLD.rate_period)
    EXECUTE FUNCTION {schema}.guard_declarations();
CREATE TRIGGER audit_queue_insert
    AFTER INSERT ON {schema}.queues
    FOR EACH ROW WHEN (NEW.concurrency IS NOT NULL OR NEW.per_worker IS NOT NULL OR NEW.rate_limit IS NOT NULL
                       OR NEW.per_key <> 1 OR NEW.priority <> 0)
    EXECUTE FUNCTION {schema}.audit_declarations();
CREATE TRIGGER audit_queue_update
    AFTER UPDATE ON {schema}.queues
    FOR EACH ROW WHEN ((NEW.concurrency, NEW.per_worker, NEW.rate_limit, NEW.rate_period, NEW.per_key, NEW.priority)
                       IS DISTINCT FROM (OLD.concurrency, OLD.per_worker, OLD.rate_limit, OLD.rate_period, OLD.per_key, OLD.priority))
    EXECUTE FUNCTION {schema}.audit_declarations();

CREATE TRIGGER guard_schedule_insert
    BEFORE INSERT ON {schema}.schedules
    FOR EACH ROW EXECUTE FUNCTION {schema}.guard_declarations();
CREATE TRIGGER guard_schedule_update
    BEFORE UPDATE ON {schema}.schedules
    FOR EACH ROW WHEN ((NEW.cron, NEW.timezone, NEW.workflow_name, NEW.input, NEW.catch_up, NEW.source)
                       IS DISTINCT FROM (OLD.cron, OLD.timezone, OLD.workflow_name, OLD.input, OLD.catch_up, OLD.source)
                       OR NOT isfinite(NEW.next_tick))
    EXECUTE FUNCTION {schema}.guard_declarations();
-- An operator's schedule ('cli') is audited by add_schedule itself.
CREATE TRIGGER audit_schedule_insert
    AFTER INSERT ON {schema}.schedules
    FOR EACH ROW WHEN (NEW.source = 'code')
    EXECUTE FUNCTION {schema}.audit_declarations();
CREATE TRIGGER audit_schedule_update
    AFTER UPDATE ON {schema}.schedules
    FOR EACH ROW WHEN ((NEW.cron, NEW.timezone, NEW.workflow_name, NEW.input, NEW.catch_up)
                       IS DISTINCT FROM (OLD.cron, OLD.timezone, OLD.workflow_name, OLD.input, OLD.catch_up))
    EXECUTE FUNCTION {schema}.audit_declarations();

-- 6. (finding 8) -------------------------------------------------------------------------
-- Each decided approval gate and whether an audit row matches it: same execution and gate,
-- the action of its decision (approve / reject), the same actor and the same database role.
-- The one place the UNAUDITED mark is computed (the console's timeline reads it).
CREATE VIEW {schema}.approval_audits AS
SELECT w.execution_id, w.step_id, w.decision, w.decided_by, w.decided_by_db_user, w.decided_at,
       EXISTS (
           SELECT 1 FROM {schema}.operator_actions x
            WHERE x.execution_id = w.execution_id AND x.step_id = w.step_id
              AND x.action = CASE w.decision WHEN 'approved' THEN 'approve' ELSE 'reject' END
              AND x.actor IS NOT DISTINCT FROM w.decided_by
              AND x.db_user IS NOT DISTINCT FROM w.decided_by_db_user) AS audited
  FROM {schema}.workflow_waits w
 WHERE w.kind = 'approval' AND w.decision IN ('approved', 'rejected');
