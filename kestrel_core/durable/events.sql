-- durable/events.py: Events: durable machine signals (``app.send_event``) that workflows wait for.

-- name: key_lock
SELECT pg_advisory_xact_lock(hashtext('kestrel.event:' || %(key)s));

-- name: receive_or_park
WITH fence AS (
    {lock_if_claim_is_current}
), found AS (
    SELECT ev.id, ev.key, ev.payload, ev.sent_at, ev.sent_by
      FROM {schema}.workflow_events ev, {schema}.workflow_executions e
     WHERE e.id = %(eid)s AND ev.key = %(key)s AND ev.id > %(after_id)s AND ev.sent_at >= e.created_at
       AND EXISTS (SELECT 1 FROM fence)
     ORDER BY ev.id
     LIMIT 1
), checkpoint AS (
    INSERT INTO {schema}.operation_outputs (execution_id, step_id, output, owner_id, seq)
    SELECT %(eid)s, %(step)s,
           jsonb_build_object('key', key, 'payload', payload, 'event_id', id, 'sent_at', sent_at,
                              'sent_by', sent_by, 'timed_out', false),
           %(worker_id)s, %(position)s
      FROM found
    ON CONFLICT DO NOTHING
    RETURNING output
), wait AS (
    INSERT INTO {schema}.workflow_waits (execution_id, step_id, kind, wake_at, details, seq)
    SELECT id, %(step)s, 'event', now() + %(after)s::interval,
           jsonb_build_object('key', %(key)s::text, 'after_id', %(after_id)s::bigint), %(position)s
      FROM fence WHERE NOT EXISTS (SELECT 1 FROM found)
    ON CONFLICT (execution_id, step_id) DO UPDATE SET resolved_at = NULL
     WHERE {schema}.workflow_waits.decision IS NULL
), parked AS (
    UPDATE {schema}.workflow_executions
       SET status = 'waiting', lease_expires = NULL, updated_at = now()
     WHERE id IN (SELECT id FROM fence) AND NOT EXISTS (SELECT 1 FROM found)
)
SELECT EXISTS (SELECT 1 FROM fence), (SELECT output FROM checkpoint);

-- name: send
SELECT {schema}.send_event(%s, %s, %s);
