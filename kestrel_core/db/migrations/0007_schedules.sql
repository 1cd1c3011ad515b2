-- Kestrel schema, version 7: cron schedules (issue 12).
--
-- One row per schedule. Every worker's maintenance loop advances the due rows
-- (kestrel_core/scheduler.py): it locks them with FOR UPDATE SKIP LOCKED, enqueues each due
-- tick with the idempotency key 'schedule:<name>:<tick in UTC>' and moves next_tick on, in one
-- short transaction: however many workers run, a tick is enqueued once.
-- Cron expressions are evaluated in Python (croniter), never here: the functions below take
-- next_tick already computed.
-- Code-declared schedules (source 'code') are upserted by workers at start; operators add
-- ('cli'), pause, resume and remove through the audited SECURITY DEFINER functions below.

CREATE TABLE {schema}.schedules (
    name              text        PRIMARY KEY,
    cron              text        NOT NULL,
    timezone          text        NOT NULL DEFAULT 'UTC',
    workflow_name     text        NOT NULL,
    input             jsonb,                    -- an object: its keys join scheduled_at in each run's input
    catch_up          boolean     NOT NULL DEFAULT false,  -- after an outage: every missed tick, or the latest
    paused            boolean     NOT NULL DEFAULT false,
    paused_by         text,
    paused_at         timestamptz,
    next_tick         timestamptz NOT NULL,     -- the next tick to enqueue (UTC instant)
    last_tick         timestamptz,              -- the last tick enqueued
    last_execution_id bigint,                   -- its execution (no FK: pruning may delete it)
    source            text        NOT NULL CHECK (source IN ('code', 'cli')),
    created_by        text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);
-- The maintenance loop's question, "which schedules are due?", reads only live ones.
CREATE INDEX schedules_due_idx ON {schema}.schedules (next_tick) WHERE NOT paused;

-- Add this migration's actions to whatever operator_actions already accepts (other migrations
-- may have added theirs, as a list of literals or as one array literal): read the current
-- list from the constraint, extend it, and write it back as a list of literals.
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
    allowed := array(SELECT DISTINCT unnest(allowed || ARRAY['add_schedule', 'pause_schedule',
                                                             'resume_schedule', 'remove_schedule'])
                     ORDER BY 1);
    ALTER TABLE {schema}.operator_actions DROP CONSTRAINT IF EXISTS operator_actions_action_check;
    EXECUTE format('ALTER TABLE {schema}.operator_actions ADD CONSTRAINT operator_actions_action_check '
                   'CHECK (action IN (%s))',
                   (SELECT string_agg(quote_literal(a), ', ') FROM unnest(allowed) AS a));
END
$$;

CREATE FUNCTION {schema}.add_schedule(
    p_name text, p_cron text, p_timezone text, p_workflow text, p_input jsonb,
    p_catch_up boolean, p_next_tick timestamptz, p_by text, p_comment text
) RETURNS timestamptz
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    s schedules%ROWTYPE;
BEGIN
    SELECT * INTO s FROM schedules WHERE name = p_name FOR UPDATE;
    IF FOUND THEN
        RAISE EXCEPTION 'cannot add schedule "%": a schedule with that name exists (%, % % for workflow "%")',
            p_name, CASE s.source WHEN 'code' THEN 'declared in code' ELSE 'added by ' || coalesce(s.created_by, '?') END,
            s.cron, s.timezone, s.workflow_name
            USING ERRCODE = 'KS409',
                  HINT = 'Choose another name, or remove it first: kestrel-console schedule remove ' || p_name;
    END IF;
    INSERT INTO schedules (name, cron, timezone, workflow_name, input, catch_up, next_tick,
                           source, created_by)
    VALUES (p_name, p_cron, p_timezone, p_workflow, p_input, p_catch_up, p_next_tick, 'cli', p_by);
    INSERT INTO operator_actions (actor, action, comment, details)
    VALUES (p_by, 'add_schedule', p_comment,
            jsonb_build_object('schedule', p_name, 'cron', p_cron, 'timezone', p_timezone,
                               'workflow', p_workflow, 'input', p_input, 'catch_up', p_catch_up));
    RETURN p_next_tick;
END
$$;

-- Pausing stops the ticks; resuming starts again from p_next_tick (the first tick after now,
-- computed by the caller): the ticks missed while paused are never enqueued.
CREATE FUNCTION {schema}.set_schedule_paused(
    p_name text, p_paused boolean, p_next_tick timestamptz, p_by text, p_comment text
) RETURNS timestamptz
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    s schedules%ROWTYPE;
    verb text := CASE WHEN p_paused THEN 'pause' ELSE 'resume' END;
BEGIN
    SELECT * INTO s FROM schedules WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cannot %: no schedule named "%"', verb, p_name
            USING ERRCODE = 'KS404', HINT = 'Schedules are listed by: kestrel-console schedule list';
    END IF;
    IF s.paused = p_paused THEN
        RAISE EXCEPTION 'cannot %: schedule "%" is already %', verb, p_name,
            CASE WHEN p_paused THEN format('paused (by %s at %s)', coalesce(s.paused_by, '?'),
                                           to_char(s.paused_at, 'YYYY-MM-DD HH24:MI:SS TZ'))
                 ELSE 'running' END
            USING ERRCODE = 'KS409';
    END IF;
    IF NOT p_paused AND p_next_tick IS NULL THEN
        RAISE EXCEPTION 'cannot resume schedule "%": no next tick given', p_name USING ERRCODE = 'KS409';
    END IF;
    UPDATE schedules
       SET paused = p_paused,
           paused_by = CASE WHEN p_paused THEN p_by END,
           paused_at = CASE WHEN p_paused THEN now() END,
           next_tick = CASE WHEN p_paused THEN next_tick ELSE p_next_tick END,
           updated_at = now()
     WHERE name = p_name;
    INSERT INTO operator_actions (actor, action, comment, details)
    VALUES (p_by, verb || '_schedule', p_comment,
            jsonb_build_object('schedule', p_name, 'workflow', s.workflow_name,
                               'next_tick', CASE WHEN p_paused THEN NULL ELSE p_next_tick END));
    RETURN CASE WHEN p_paused THEN NULL ELSE p_next_tick END;
END
$$;

CREATE FUNCTION {schema}.remove_schedule(p_name text, p_by text, p_comment text)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    s schedules%ROWTYPE;
BEGIN
    DELETE FROM schedules WHERE name = p_name RETURNING * INTO s;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cannot remove: no schedule named "%"', p_name
            USING ERRCODE = 'KS404', HINT = 'Schedules are listed by: kestrel-console schedule list';
    END IF;
    INSERT INTO operator_actions (actor, action, comment, details)
    VALUES (p_by, 'remove_schedule', p_comment,
            jsonb_build_object('schedule', p_name, 'cron', s.cron, 'timezone', s.timezone,
                               'workflow', s.workflow_name, 'source', s.source,
                               'input', s.input, 'catch_up', s.catch_up));
    RETURN s.source;
END
$$;

REVOKE EXECUTE ON FUNCTION
    {schema}.add_schedule(text, text, text, text, jsonb, boolean, timestamptz, text, text),
    {schema}.set_schedule_paused(text, boolean, timestamptz, text, text),
    {schema}.remove_schedule(text, text, text)
FROM PUBLIC;
