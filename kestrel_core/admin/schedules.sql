-- admin/schedules.py: Schedules as rows: declared in code, or added by an operator.

-- name: now
SELECT now();

-- name: declare
-- A worker (re)declares its code's schedules. Only rows that code owns are updated, and only
-- when something changed; a changed cron or timezone starts from the next tick after now, an
-- unchanged one keeps its place (restarting workers neither skip nor repeat a tick). Pausing
-- is the operator's: a redeclaration never unpauses.
INSERT INTO {schema}.schedules AS s (name, cron, timezone, workflow_name, input, catch_up,
                                     next_tick, source, created_by)
VALUES (%(name)s, %(cron)s, %(timezone)s, %(workflow)s, %(input)s, %(catch_up)s, %(next_tick)s,
        'code', %(by)s)
ON CONFLICT (name) DO UPDATE
   SET cron = EXCLUDED.cron, timezone = EXCLUDED.timezone, workflow_name = EXCLUDED.workflow_name,
       input = EXCLUDED.input, catch_up = EXCLUDED.catch_up,
       next_tick = CASE WHEN (s.cron, s.timezone) IS DISTINCT FROM (EXCLUDED.cron, EXCLUDED.timezone)
                        THEN EXCLUDED.next_tick ELSE s.next_tick END,
       updated_at = now()
 WHERE s.source = 'code'
   AND (s.cron, s.timezone, s.workflow_name, s.input, s.catch_up)
       IS DISTINCT FROM (EXCLUDED.cron, EXCLUDED.timezone, EXCLUDED.workflow_name,
                         EXCLUDED.input, EXCLUDED.catch_up);

-- name: operator_owned
SELECT name FROM {schema}.schedules WHERE name = ANY(%s) AND source = 'cli';

-- name: cron_of
SELECT cron, timezone FROM {schema}.schedules WHERE name = %s;

-- name: add
SELECT {schema}.add_schedule(%s, %s, %s, %s, %s, %s, %s, %s, %s);

-- name: set_paused
SELECT {schema}.set_schedule_paused(%s, %s, %s, %s, %s);

-- name: remove
SELECT {schema}.remove_schedule(%s, %s, %s);

-- name: trigger
SELECT {schema}.trigger_schedule(%s, %s, %s);
