-- trigger_schedule(): its current definition (created with migration 0032).
--
-- An operator runs a schedule once, now, audited: its workflow is enqueued with the input a
-- tick gives (the schedule's input, 'schedule' and 'scheduled_at' = now, in UTC), placed as
-- any enqueue (the queue that declares the workflow, else 'default'; that queue's priority).
-- The schedule's ticks are left alone (next_tick, last_tick, last_execution_id), and a paused
-- schedule stays paused: this is one run beside them, not a tick. Returns the new id.
CREATE OR REPLACE FUNCTION {schema}.trigger_schedule(p_name text, p_by text, p_comment text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    s schedules%ROWTYPE;
    v_queue text;
    v_priority integer;
    v_input jsonb;
    new_id bigint;
BEGIN
    s := lock_schedule(p_name, 'trigger', true);
    v_queue := coalesce((SELECT q.name FROM queues q WHERE s.workflow_name = ANY(q.workflows)
                          ORDER BY q.declared_at DESC NULLS LAST, q.name LIMIT 1), 'default');
    v_priority := coalesce((SELECT q.priority FROM queues q WHERE q.name = v_queue), 0);
    v_input := CASE WHEN jsonb_typeof(s.input) = 'object' THEN s.input ELSE '{}'::jsonb END
               || jsonb_build_object('schedule', s.name, 'scheduled_at',
                                     to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'));
    INSERT INTO workflow_executions (workflow_name, input, priority, queue)
    VALUES (s.workflow_name, v_input, v_priority, v_queue)
    RETURNING id INTO new_id;
    INSERT INTO operator_actions (actor, db_user, action, execution_id, comment, details)
    VALUES (p_by, session_user, 'trigger_schedule', new_id, p_comment,
            jsonb_build_object('schedule', s.name, 'workflow', s.workflow_name, 'paused', s.paused));
    PERFORM pg_notify({schema}.notify_channel(), s.workflow_name);
    RETURN new_id;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.trigger_schedule(text, text, text) FROM PUBLIC;
