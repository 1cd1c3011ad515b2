-- execution_finished(): its current definition (created by migration 0008, last redefined by 0009;
-- since 0030 a paused execution's open waits are closed when it ends, too).
--
-- An execution reached success, error or cancelled. A cancelled one's attempts still open are
-- closed 'cancelled' here (since version 34), for a cancel by an operator and for a child
-- cancelled with its parent alike: its worker's writes are fenced out from now on.
-- Lock order: the parent's wait row, then the parent's row (as the sweeper and the operator
-- functions do). Sibling children finishing at once serialize on the parent's wait row, so the
-- last one to commit sees every sibling finished and wakes the parent.
CREATE OR REPLACE FUNCTION {schema}.execution_finished() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    w workflow_waits%ROWTYPE;
BEGIN
    IF OLD.status IN ('waiting', 'paused') THEN  -- a paused one may hold waits (pause_execution)
        UPDATE workflow_waits SET resolved_at = now()
         WHERE execution_id = NEW.id AND resolved_at IS NULL;
    END IF;
    IF NEW.status = 'cancelled' THEN
        UPDATE step_attempts SET outcome = 'cancelled', finished_at = greatest(now(), started_at)
         WHERE execution_id = NEW.id AND outcome = 'running';
        -- Recursive: each cancelled child fires this trigger for its own children.
        UPDATE workflow_executions
           SET status = 'cancelled', lease_expires = NULL, updated_at = now(), finished_at = now(),
               error = format('cancelled with its parent execution %s', NEW.id)
         WHERE parent_id = NEW.id AND status IN ('enqueued', 'running', 'waiting', 'paused');
    END IF;
    IF NEW.parent_id IS NOT NULL THEN
        SELECT * INTO w FROM workflow_waits
         WHERE execution_id = NEW.parent_id AND kind = 'child' AND resolved_at IS NULL
           AND details -> 'children' @> to_jsonb(NEW.id)
           FOR UPDATE;
        -- A new statement, a new snapshot: siblings that committed while we waited are seen.
        -- Only the parent's live children are read (a partial index): usually the first one
        -- is awaited too, so a fan-in of N children costs O(N) per child, not N probes. A paused
        -- child is not in that index: its parent is woken early and parks again on it
        -- (children.py), to be woken when it ends.
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
                PERFORM pg_notify({schema}.notify_channel(),
                                  (SELECT workflow_name FROM workflow_executions WHERE id = NEW.parent_id));
            END IF;
        END IF;
    END IF;
    RETURN NULL;
END
$$;
