-- engine/scheduler.py: The scheduler: leaderless, run by every worker's maintenance loop.

-- name: next_due
-- One due schedule, locked; rows another worker holds are skipped, rows tried in this pass
-- (one whose cron fails to evaluate) are not picked again.
SELECT name, cron, timezone, workflow_name, input, catch_up, next_tick,
       coalesce(%(now)s, now()) AS now
  FROM {schema}.schedules
 WHERE NOT paused AND next_tick <= coalesce(%(now)s, now()) AND name <> ALL(%(tried)s)
 ORDER BY next_tick
 LIMIT 1
 FOR UPDATE SKIP LOCKED;

-- name: any_due
-- The common case, nothing due, in one round trip and without a transaction.
SELECT 1 FROM {schema}.schedules WHERE NOT paused AND next_tick <= coalesce(%(now)s, now()) LIMIT 1;

-- name: enqueue_tick
-- A tick's execution, placed like any enqueue (enqueue.sql's place_one, pasted in as {place_one})
-- and keyed by its engine key; a tick already enqueued yields the execution it has (the row is
-- skipped by the key trigger, execution_key_taken, and its holder read from execution_keys).
{place_one}
, ins AS (
    INSERT INTO {schema}.workflow_executions (workflow_name, input, engine_key, priority, queue)
    SELECT %(name)s, %(input)s, %(key)s, p.priority, p.queue FROM placed p
    RETURNING id
)
SELECT id, pg_notify(%(channel)s, %(name)s)::text FROM ins
UNION ALL
SELECT execution_id, NULL FROM {schema}.execution_keys
 WHERE key = %(key)s AND NOT EXISTS (SELECT 1 FROM ins);

-- name: by_engine_key
-- A tick enqueued by a transaction that committed after our statement's snapshot: read it now.
SELECT execution_id FROM {schema}.execution_keys WHERE key = %s;

-- name: advance
UPDATE {schema}.schedules
   SET next_tick = %(next_tick)s, last_tick = coalesce(%(last_tick)s, last_tick),
       last_execution_id = coalesce(%(execution_id)s, last_execution_id), updated_at = now()
 WHERE name = %(name)s;
