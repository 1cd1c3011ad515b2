-- Kestrel schema, version 32: trigger a schedule now (issue 47).
--
-- An operator enqueues a schedule's workflow once, now, outside its ticks (the TUI's Schedules
-- screen, `kestrel-console schedule trigger NAME`), through the audited SECURITY DEFINER
-- function trigger_schedule() (schema/functions/trigger_schedule.sql): the operator role may
-- not enqueue, but may run a schedule it sees. The schedule's ticks, next_tick and last run
-- are left as they are. This migration adds the audit's action 'trigger_schedule'.

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
    allowed := array(SELECT DISTINCT unnest(allowed || ARRAY['trigger_schedule']) ORDER BY 1);
    ALTER TABLE {schema}.operator_actions DROP CONSTRAINT IF EXISTS operator_actions_action_check;
    EXECUTE format('ALTER TABLE {schema}.operator_actions ADD CONSTRAINT operator_actions_action_check '
                   'CHECK (action IN (%s))',
                   (SELECT string_agg(quote_literal(a), ', ') FROM unnest(allowed) AS a));
END
$$;
