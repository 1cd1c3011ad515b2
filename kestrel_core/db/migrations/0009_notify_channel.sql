-- Kestrel schema, version 9: the LISTEN/NOTIFY channel is named in one place in SQL.
--
-- Migrations 0002 to 0008 spelled the channel as 'kestrel:' || current_schema() in each
-- function that wakes workers. Applied migrations are never edited, so the latest definition
-- of each of those functions is re-created here, unchanged except that it calls
-- notify_channel(). Python names the same channel with kestrel_core.statements.notify_channel
-- (tests/core/test_statements.py checks they agree).
--
-- The function sets its own search_path, so current_schema() is this schema whoever calls it.
-- It is called only by the SECURITY DEFINER functions below (they run as the schema's owner):
-- no role needs EXECUTE on it.

CREATE FUNCTION {schema}.notify_channel() RETURNS text
LANGUAGE sql STABLE SET search_path = {schema}, pg_temp AS $$
    SELECT 'kestrel:' || current_schema()
$$;
REVOKE EXECUTE ON FUNCTION {schema}.notify_channel() FROM PUBLIC;

-- The functions of migrations 0005, 0006 and 0008 that notify. CREATE OR REPLACE keeps each
-- one's privileges (EXECUTE revoked from PUBLIC, granted to the roles by kestrel_core.roles)
-- and the triggers that call execution_finished().

CREATE OR REPLACE FUNCTION {schema}.decide_approval(
    p_execution_id bigint, p_step_id text, p_approved boolean, p_by text, p_comment text
) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    e workflow_executions%ROWTYPE;
    w workflow_waits%ROWTYPE;
    v jsonb;
    verb text := CASE WHEN p_approved THEN 'approve' ELSE 'reject' END;
BEGIN
    -- Lock order everywhere: the wait row, then the execution row (the sweeper does the same).
    SELECT * INTO w FROM workflow_waits
        WHERE execution_id = p_execution_id AND step_id = p_step_id FOR UPDATE;
    SELECT * INTO e FROM workflow_executions WHERE id = p_execution_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cannot %: no execution with id %', verb, p_execution_id
            USING ERRCODE = 'KS404', HINT = 'List executions with: kestrel-console list';
    END IF;
    IF w.execution_id IS NULL THEN
        RAISE EXCEPTION 'cannot %: execution % has no approval gate "%"', verb, p_execution_id, p_step_id
            USING ERRCODE = 'KS404', HINT = 'Pending approvals are listed by: kestrel-console status';
    END IF;
    IF w.kind <> 'approval' THEN
        RAISE EXCEPTION 'cannot %: "%" of execution % is a durable sleep, not an approval gate',
            verb, p_step_id, p_execution_id USING ERRCODE = 'KS409';
    END IF;
    IF w.decision IS NOT NULL THEN
        RAISE EXCEPTION 'cannot %: approval "%" of execution % was already decided (% by % at %)',
            verb, p_step_id, p_execution_id, w.decision, coalesce(w.decided_by, 'the timeout'),
            to_char(w.decided_at, 'YYYY-MM-DD HH24:MI:SS TZ')
            USING ERRCODE = 'KS409';
    END IF;
    IF e.status <> 'waiting' OR w.resolved_at IS NOT NULL THEN
        RAISE EXCEPTION 'cannot %: execution % is %, not waiting for approval "%"',
            verb, p_execution_id, e.status, p_step_id USING ERRCODE = 'KS409';
    END IF;

    UPDATE workflow_waits
       SET decision = CASE WHEN p_approved THEN 'approved' ELSE 'rejected' END,
           decided_by = p_by, decided_by_db_user = session_user, comment = p_comment,
           decided_at = now(), resolved_at = now()
     WHERE execution_id = p_execution_id AND step_id = p_step_id;

    v := jsonb_build_object('approved', p_approved, 'by', p_by, 'comment', p_comment,
                            'timed_out', false, 'decided_at', now());
    -- The decision is the gate's checkpoint: replay returns it without waiting again.
    INSERT INTO operation_outputs (execution_id, step_id, output, started_at)
    VALUES (p_execution_id, p_step_id, v, w.created_at)
    ON CONFLICT DO NOTHING;

    INSERT INTO operator_actions (actor, db_user, action, execution_id, step_id, comment, from_status)
    VALUES (p_by, session_user, verb, p_execution_id, p_step_id, p_comment, e.status);

    UPDATE workflow_executions
       SET status = 'enqueued', run_at = now(), updated_at = now(), lease_expires = NULL
     WHERE id = p_execution_id;
    PERFORM pg_notify({schema}.notify_channel(), e.workflow_name);
    RETURN v;
END
$$;

CREATE OR REPLACE FUNCTION {schema}.requeue_execution(p_execution_id bigint, p_by text, p_comment text)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    e workflow_executions%ROWTYPE;
BEGIN
    SELECT * INTO e FROM workflow_executions WHERE id = p_execution_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cannot requeue: no execution with id %', p_execution_id
            USING ERRCODE = 'KS404', HINT = 'List executions with: kestrel-console list';
    END IF;
    IF e.status = 'running' AND e.lease_expires >= now() THEN
        RAISE EXCEPTION 'cannot requeue: execution % is running on % (lease live until %)',
            p_execution_id, e.owner_id, to_char(e.lease_expires, 'YYYY-MM-DD HH24:MI:SS TZ')
            USING ERRCODE = 'KS409',
                  HINT = 'Cancel it first, or wait for its lease to lapse if the worker is stuck.';
    ELSIF e.status IN ('enqueued', 'waiting', 'success') THEN
        RAISE EXCEPTION 'cannot requeue: execution % is %', p_execution_id, e.status
            USING ERRCODE = 'KS409',
                  HINT = 'Only executions that errored, were cancelled, or hold an expired lease can be re-enqueued.';
    END IF;
    -- Replay keeps every successful checkpoint; steps that failed for good run again.
    DELETE FROM operation_outputs WHERE execution_id = p_execution_id AND error IS NOT NULL;
    UPDATE workflow_executions
       SET status = 'enqueued', run_at = now(), updated_at = now(), owner_id = NULL,
           lease_expires = NULL, finished_at = NULL, error = NULL, output = NULL
     WHERE id = p_execution_id;
    INSERT INTO operator_actions (actor, db_user, action, execution_id, comment, from_status)
    VALUES (p_by, session_user, 'requeue', p_execution_id, p_comment, e.status);
    PERFORM pg_notify({schema}.notify_channel(), e.workflow_name);
    RETURN e.status;
END
$$;

CREATE OR REPLACE FUNCTION {schema}.set_queue_paused(p_name text, p_paused boolean, p_by text, p_comment text)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    q queues%ROWTYPE;
    verb text := CASE WHEN p_paused THEN 'pause' ELSE 'resume' END;
BEGIN
    SELECT * INTO q FROM queues WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cannot %: no queue named "%"', verb, p_name
            USING ERRCODE = 'KS404',
                  HINT = 'Queues are listed by: kestrel-console queue list (a worker declares them when it starts).';
    END IF;
    IF q.paused = p_paused THEN
        RAISE EXCEPTION 'cannot %: queue "%" is already %', verb, p_name,
            CASE WHEN p_paused THEN 'paused (by ' || coalesce(q.paused_by, '?') || ')' ELSE 'running' END
            USING ERRCODE = 'KS409';
    END IF;
    UPDATE queues
       SET paused = p_paused,
           paused_by = CASE WHEN p_paused THEN p_by END,
           paused_at = CASE WHEN p_paused THEN now() END
     WHERE name = p_name;
    INSERT INTO operator_actions (actor, action, comment, details)
    VALUES (p_by, verb || '_queue', p_comment, jsonb_build_object('queue', p_name));
    IF NOT p_paused THEN
        -- Wake idle workers: the queue's backlog is claimable again.
        PERFORM pg_notify({schema}.notify_channel(), w)
           FROM (SELECT DISTINCT workflow_name AS w FROM workflow_executions
                  WHERE status = 'enqueued' AND queue = p_name) AS names;
    END IF;
    RETURN p_paused;
END
$$;

CREATE OR REPLACE FUNCTION {schema}.execution_finished() RETURNS trigger
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
                PERFORM pg_notify({schema}.notify_channel(),
                                  (SELECT workflow_name FROM workflow_executions WHERE id = NEW.parent_id));
            END IF;
        END IF;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION {schema}.send_event(p_key text, p_payload jsonb, p_by text) RETURNS bigint
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
      FROM (SELECT pg_notify({schema}.notify_channel(), name)
              FROM (SELECT DISTINCT workflow_name AS name FROM woken) n) x;
    RETURN ev.id;
END
$$;
