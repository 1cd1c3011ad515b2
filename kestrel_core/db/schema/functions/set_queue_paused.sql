-- set_queue_paused(): its current definition (created by migration 0006, last redefined by 0009; the audit's role explicit since 0024).
--
-- An operator pauses or resumes a queue, audited; resuming wakes idle workers.
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
    INSERT INTO operator_actions (actor, db_user, action, comment, details)
    VALUES (p_by, session_user, verb || '_queue', p_comment, jsonb_build_object('queue', p_name));
    IF NOT p_paused THEN
        -- Wake idle workers: the queue's backlog is claimable again.
        PERFORM pg_notify({schema}.notify_channel(), w)
           FROM (SELECT DISTINCT workflow_name AS w FROM workflow_executions
                  WHERE status = 'enqueued' AND queue = p_name) AS names;
    END IF;
    RETURN p_paused;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.set_queue_paused(text, boolean, text, text) FROM PUBLIC;
