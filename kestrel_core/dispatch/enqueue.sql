-- dispatch/enqueue.py: Enqueue: insert ``enqueued`` rows and wake idle workers with NOTIFY.

-- name: place_one
-- One execution placed from scalar parameters (children.sql's start_child and scheduler.sql's
-- enqueue_tick build on it): a statement's first CTEs. ({place_rows}: the block below.)
WITH req AS (
    SELECT 1::bigint AS n, %(name)s::text AS name, %(queue)s::text AS queue,
           %(priority)s::int AS priority, %(ckey)s::text AS ckey
)
{place_rows}

-- name: enqueue
-- Rows in, one result row per execution that holds a key of the batch or was inserted now:
-- (id, idempotency_key). Rows are inserted in array order, so the new unkeyed ids, ascending,
-- are the unkeyed rows in order; a key is inserted by its first row and refused for later rows
-- and for a key already taken (the row is skipped by the execution_key_taken trigger, which
-- takes the key in execution_keys, ON CONFLICT DO NOTHING: migration 0020), and the last branch
-- finds its holder in execution_keys (the statement's snapshot does not see the keys its
-- trigger inserts, so no key comes back twice).
-- The holders are not looked up at all for a batch without keys (``keyed`` false: a one-time
-- filter, even in a cached plan). Without that gate the lookup was a sequential scan in the
-- generic plan a pooled connection caches at its fifth call while the table is small, and until
-- the next ANALYZE every batch read the whole table (one 1-row enqueue: 1.4 ms at 0 rows, 7.3 ms
-- at 10,000, 21.7 ms at 30,000; bench/README.md, "Ingestion"). A keyed batch may still meet such
-- a plan until that ANALYZE; a lookup per key (a scalar subquery) avoided it but made Postgres
-- plan the statement anew at every call, which cost more.
-- The inputs and names travel as binary arrays: psycopg writes a text array in Python, quoting
-- and escaping every JSON element with a regular expression, and copies a binary one (client
-- CPU for a 64-row batch: 14-17 us a row in text, 7.5-10 in binary).
-- ({place_rows}: the block below.)
WITH req AS (
    SELECT * FROM unnest(%(names)b::text[], %(inputs)b::jsonb[], %(keys)s::text[],
                         %(run_ats)s::timestamptz[], %(priorities)s::int[], %(queues)s::text[],
                         %(ckeys)s::text[], %(versions)s::text[], %(traces)s::text[])
           WITH ORDINALITY AS r(name, input, key, run_at, priority, queue, ckey, version, trace, n)
)
{place_rows}
, ins AS (
    INSERT INTO {schema}.workflow_executions
           (workflow_name, input, idempotency_key, run_at, priority, queue, concurrency_key, version, trace_context)
    SELECT r.name, r.input, r.key, coalesce(r.run_at, now()), p.priority, p.queue, r.ckey, r.version, r.trace
      FROM req r JOIN placed p ON p.n = r.n
     ORDER BY r.n
    RETURNING id, idempotency_key, workflow_name
), woke AS (
    SELECT pg_notify(%(channel)s, w.name) FROM (SELECT DISTINCT workflow_name AS name FROM ins) w
     WHERE %(notify)s
)
SELECT id, idempotency_key FROM ins, (SELECT count(*) FROM woke) AS notified
UNION ALL
SELECT execution_id, key FROM {schema}.execution_keys
 WHERE %(keyed)s AND key = ANY(%(keys)s::text[]);

-- name: place_rows
-- The placement of new executions, after a CTE ``req(n, name, queue, priority, ckey)``; defines
-- ``placed(n, queue, priority)``. The queue: the one given, else the one the workflow is bound
-- to in the code of the workers (queues.workflows), else the default; the priority defaults to
-- the queue's. A keyed execution marks its queue keyed (claimed under the queue's lock, see
-- claim.py) in the same statement; the check first keeps the common case from touching the
-- queue's row. Placed once per (name, queue) of the batch, not once per row.
, target AS (
    SELECT g.name, g.queue AS given,
           coalesce(g.queue,
                    (SELECT q.name FROM {schema}.queues q WHERE g.name = ANY(q.workflows)
                      ORDER BY q.declared_at DESC NULLS LAST, q.name LIMIT 1),
                    'default') AS queue
      FROM (SELECT DISTINCT name, queue FROM req) g
), placed AS (
    SELECT r.n, t.queue, coalesce(r.priority, q.priority, 0) AS priority, r.ckey
      FROM req r
      JOIN target t ON t.name = r.name AND t.given IS NOT DISTINCT FROM r.queue
      LEFT JOIN {schema}.queues q ON q.name = t.queue
), keyed AS (
    INSERT INTO {schema}.queues AS q (name, keyed)
    SELECT DISTINCT p.queue, true FROM placed p
     WHERE p.ckey IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM {schema}.queues k WHERE k.name = p.queue AND k.keyed)
    ON CONFLICT (name) DO UPDATE SET keyed = true
)

-- name: wake
-- The wake-up of a batch written without NOTIFY (``notify=False``), sent once it committed: a
-- transaction of its own that commits without waiting for the WAL flush, so it holds the
-- notify lock (Postgres's one per database, up to the end of the commit) for microseconds,
-- not for the batch's flush, and batches' commits can share flushes. Losing it in a crash
-- loses nothing: listeners reconnect and claim.
SELECT {async_commit}, pg_notify(%(channel)s, name) FROM unnest(%(names)s::text[]) AS name;

-- name: begin
-- A batch of the group commit in one round trip, pipelined on an autocommit connection: its
-- own transaction (BEGIN, ENQUEUE without NOTIFY, COMMIT), then WAKE in a transaction of its own.
BEGIN;

-- name: commit
COMMIT;

-- name: by_keys
-- Keys an enqueue with the same key committed after our snapshot (our insert saw the row, our
-- read did not): read them now.
SELECT key, execution_id FROM {schema}.execution_keys WHERE key = ANY(%s::text[]);

-- name: trace_context
-- The trace context enqueue recorded (tracing on: the worker's span of the execution is its child).
SELECT trace_context FROM {schema}.workflow_executions WHERE id = %s;
