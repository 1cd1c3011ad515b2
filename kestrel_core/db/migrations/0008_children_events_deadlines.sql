-- Kestrel schema, version 8: child workflows, events, deadlines, replay order (issue 12).
--
-- 1. parent_id: a child execution names the execution that started it (ctx.start_child).
--    No foreign key: pruning a finished parent must not touch its (finished) children.
-- 2. deadline_at / timeout: a workflow's deadline (@app.workflow(timeout=...)), set by the
--    worker at the first claim; the sweeper ends an execution past it as 'error'.
-- 3. workflow_waits kinds 'child' (ctx.wait_for) and 'event' (ctx.wait_for_event), and the
--    position (seq) of the parked operation.
-- 4. operation_outputs.seq: the n-th durable operation of the execution. A replay that asks
--    for another step at a recorded position fails as a non-deterministic change.
-- 5. workflow_events: durable machine signals (app.send_event), and send_event().
-- 6. One trigger on an execution reaching a terminal status: closes its waits, cancels its
--    live children when it is cancelled, and wakes its parent when the parent waits on it.

ALTER TABLE {schema}.workflow_executions
    ADD COLUMN parent_id   bigint,
    ADD COLUMN timeout     interval,
    ADD COLUMN deadline_at timestamptz;
CREATE INDEX workflow_executions_parent_idx
    ON {schema}.workflow_executions (parent_id) WHERE parent_id IS NOT NULL;
-- The live children of a parent: the wake-up check and the cancel cascade read only these.
CREATE INDEX workflow_executions_live_children_idx
    ON {schema}.workflow_executions (parent_id)
    WHERE parent_id IS NOT NULL AND status IN ('enqueued', 'running', 'waiting');
CREATE INDEX workflow_executions_deadline_idx
    ON {schema}.workflow_executions (deadline_at)
    WHERE deadline_at IS NOT NULL AND status IN ('enqueued', 'running', 'waiting');

ALTER TABLE {schema}.operation_outputs ADD COLUMN seq integer;
ALTER TABLE {schema}.workflow_waits ADD COLUMN seq integer;
ALTER TABLE {schema}.workflow_waits DROP CONSTRAINT workflow_waits_kind_check;
ALTER TABLE {schema}.workflow_waits
    ADD CONSTRAINT workflow_waits_kind_check CHECK (kind IN ('sleep', 'approval', 'child', 'event'));
CREATE INDEX workflow_waits_event_idx
    ON {schema}.workflow_waits ((details ->> 'key')) WHERE kind = 'event' AND resolved_at IS NULL;

CREATE TABLE {schema}.workflow_events (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key      text        NOT NULL,
    payload  jsonb,
    sent_by  text,
    sent_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX workflow_events_key_idx ON {schema}.workflow_events (key, id);

-- A checkpoint written for a wait by someone other than the workflow (a decision, the
-- sweeper, a wake-up) takes the position the wait was parked at.
CREATE FUNCTION {schema}.checkpoint_seq_from_wait() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    NEW.seq := (SELECT w.seq FROM {schema}.workflow_waits w
                 WHERE w.execution_id = NEW.execution_id AND w.step_id = NEW.step_id);
    RETURN NEW;
END
$$;
CREATE TRIGGER operation_outputs_seq
    BEFORE INSERT ON {schema}.operation_outputs
    FOR EACH ROW WHEN (NEW.seq IS NULL)
    EXECUTE FUNCTION {schema}.checkpoint_seq_from_wait();

-- An execution reached success, error or cancelled.
-- Lock order: the parent's wait row, then the parent's row (as the sweeper and the operator
-- functions do). Sibling children finishing at once serialize on the parent's wait row, so the
-- last one to commit sees every sibling finished and wakes the parent.
CREATE FUNCTION {schema}.execution_finished() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    w workflow_waits%ROWTYPE;
BEGIN
    IF OLD.status = 'waiting' THEN
        UPDATE workflow_waits SET resolved_at = now()
         WHERE execution_id = NEW.id AND resolved_at IS NULL;
    END IF;
    IF NEW.status = 'cancelled' THEN
        -- Recursive: each cancelled child fires this trigger for its own children.
        UPDATE workflow_executions
           SET status = 'cancelled', lease_expires = NULL, updated_at = now(), finished_at = now(),
               error = format('cancelled with its parent execution %s', NEW.id)
         WHERE parent_id = NEW.id AND status IN ('enqueued', 'running', 'waiting');
    END IF;
    IF NEW.parent_id IS NOT NULL THEN
        SELECT * INTO w FROM workflow_waits
         WHERE execution_id = NEW.parent_id AND kind = 'child' AND resolved_at IS NULL
           AND details -> 'children' @> to_jsonb(NEW.id)
           FOR UPDATE;
        -- A new statement, a new snapshot: siblings that committed while we waited are seen.
        -- Only the parent's live children are read (a partial index): usually the first one
        -- is awaited too, so a fan-in of N children costs O(N) per child, not N probes.
        IF FOUND AND NOT EXISTS (
            SELECT 1 FROM workflow_executions c
             WHERE c.parent_id = NEW.parent_id AND c.status IN ('enqueued', 'running', 'waiting')
               AND c.id = ANY (ARRAY(SELECT jsonb_array_elements_text(w.details -> 'children')::bigint))) THEN
            UPDATE workflow_waits SET resolved_at = now()
             WHERE execution_id = w.execution_id AND step_id = w.step_id;
            UPDATE workflow_executions
               SET status = 'enqueued', run_at = now(), updated_at = now()
             WHERE id = NEW.parent_id AND status = 'waiting';
            IF FOUND THEN
                PERFORM pg_notify('kestrel:' || current_schema(),
                                  (SELECT workflow_name FROM workflow_executions WHERE id = NEW.parent_id));
            END IF;
        END IF;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER execution_finished
    AFTER UPDATE OF status ON {schema}.workflow_executions
    FOR EACH ROW
    WHEN (NEW.status IN ('success', 'error', 'cancelled')
          AND OLD.status IN ('enqueued', 'running', 'waiting')
          AND (OLD.status = 'waiting' OR NEW.status = 'cancelled' OR NEW.parent_id IS NOT NULL))
    EXECUTE FUNCTION {schema}.execution_finished();

-- A requeued execution gets a fresh deadline from its next start.
CREATE FUNCTION {schema}.execution_requeued() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    NEW.deadline_at := NULL;
    RETURN NEW;
END
$$;
CREATE TRIGGER execution_requeued
    BEFORE UPDATE OF status ON {schema}.workflow_executions
    FOR EACH ROW
    WHEN (OLD.status IN ('success', 'error', 'cancelled') AND NEW.status = 'enqueued'
          AND NEW.deadline_at IS NOT NULL)
    EXECUTE FUNCTION {schema}.execution_requeued();

-- A machine signal: store it and wake every execution waiting for its key, in one transaction.
-- The per-key advisory lock orders it against a workflow parking on the same key (see
-- kestrel_core/events.py): one of the two always sees the other.
CREATE FUNCTION {schema}.send_event(p_key text, p_payload jsonb, p_by text) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    ev workflow_events%ROWTYPE;
    woke integer;
BEGIN
    IF p_key IS NULL OR p_key = '' THEN
        RAISE EXCEPTION 'cannot send an event without a key' USING ERRCODE = 'KS409';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('kestrel.event:' || p_key));
    INSERT INTO workflow_events (key, payload, sent_by) VALUES (p_key, p_payload, p_by)
    RETURNING * INTO ev;
    WITH due AS (
        SELECT w.execution_id, w.step_id, w.created_at FROM workflow_waits w
          JOIN workflow_executions e ON e.id = w.execution_id
         WHERE w.kind = 'event' AND w.resolved_at IS NULL AND w.details ->> 'key' = p_key
           AND coalesce((w.details ->> 'after_id')::bigint, 0) < ev.id
           AND e.created_at <= ev.sent_at
         ORDER BY w.execution_id, w.step_id
           FOR UPDATE OF w
    ), resolved AS (
        UPDATE workflow_waits w SET resolved_at = now()
          FROM due WHERE w.execution_id = due.execution_id AND w.step_id = due.step_id
        RETURNING w.execution_id, w.step_id, w.created_at
    ), checkpointed AS (
        INSERT INTO operation_outputs (execution_id, step_id, output, started_at)
        SELECT execution_id, step_id,
               jsonb_build_object('key', ev.key, 'payload', ev.payload, 'event_id', ev.id,
                                  'sent_at', ev.sent_at, 'sent_by', ev.sent_by, 'timed_out', false),
               created_at
          FROM resolved
        ON CONFLICT DO NOTHING
    ), woken AS (
        UPDATE workflow_executions e SET status = 'enqueued', run_at = now(), updated_at = now()
          FROM resolved WHERE e.id = resolved.execution_id AND e.status = 'waiting'
        RETURNING e.workflow_name
    )
    SELECT count(*) INTO woke
      FROM (SELECT pg_notify('kestrel:' || current_schema(), name)
              FROM (SELECT DISTINCT workflow_name AS name FROM woken) n) x;
    RETURN ev.id;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.send_event(text, jsonb, text) FROM PUBLIC;
