-- send_event(): its current definition (created by migration 0008, last redefined by 0009
-- and by the file since 0024).
--
-- A machine signal: store it and wake every execution waiting for its key, in one transaction.
-- The per-key advisory lock orders it against a workflow parking on the same key (see
-- kestrel_core/events.py): one of the two always sees the other. The event records the database
-- role that sent it (sent_by_db_user, beside the name the caller gave) and an audit row.
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
    INSERT INTO operator_actions (actor, db_user, action, comment, details)
    VALUES (coalesce(p_by, session_user), session_user, 'send_event', NULL,
            jsonb_build_object('key', p_key, 'event_id', ev.id));
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
REVOKE EXECUTE ON FUNCTION {schema}.send_event(text, jsonb, text) FROM PUBLIC;
