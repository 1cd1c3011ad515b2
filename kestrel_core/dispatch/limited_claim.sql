-- dispatch/limited_claim.py: The limited claim: queues with a limit, or keyed executions.

-- name: in_claim_transaction
SELECT set_config('enable_sort', %(sort)s, true), set_config('idle_in_transaction_session_timeout', %(idle_ms)s, true);

-- name: limited_with_work
-- Run after the fast path's claim (same round trip) while limited queues exist: those
-- this worker serves that hold due work it can run. Empty: no second transaction.
WITH limited AS MATERIALIZED (
    SELECT q.name FROM {schema}.queues q
     WHERE NOT q.paused
       AND {queue_is_limited}
       AND (%(queues)s::text[] IS NULL OR q.name = ANY(%(queues)s::text[]))
)
SELECT limited.name FROM limited
 CROSS JOIN LATERAL (
        -- One probe per limited queue, walking its part of the ready index in claim order (the
        -- ORDER BY keeps the planner on that index rather than a scan of the table).
        SELECT 1 FROM {schema}.executions_ready r
         WHERE r.queue = limited.name AND r.run_at <= now()
           AND r.workflow_name = ANY(%(names)s::text[]) AND {version_matches}
           AND (%(buckets)s::smallint[] IS NULL OR r.bucket = ANY(%(buckets)s::smallint[]))
         ORDER BY r.queue, r.neg_priority, r.run_at, r.id
         LIMIT 1) AS due;

-- name: lock_queues
-- The first statement: serialise with every other claiming worker of these queues. A queue paused
-- (or no longer limited) since limited_with_work is not locked, hence not claimed here (the
-- claim reads the queues again, after the lock).
SELECT q.name FROM {schema}.queues q
 WHERE q.name = ANY(%(queues)s::text[]) AND NOT q.paused
   AND {queue_is_limited}
 ORDER BY q.name
   FOR UPDATE;

-- name: claim_limited
-- The second statement (its snapshot is newer than the locks): room left per queue = the least
-- of concurrency - running, per_worker - running here, rate - claims in the window; per key at
-- most per_key running; then claim in priority order and record the claim times for the rate
-- window (kept in the queue's row, at most rate_limit of them: an exact sliding window). Only
-- the head of each backlog is looked at (%(scan)s rows): keys further back wait until it drains.
-- The rate window is read and stamped at this statement's start, after the queue locks were
-- won: the transaction's now() would be older by the lock wait, and a claim stamped early
-- leaves the window early.
WITH room AS MATERIALIZED (
    SELECT q.name, q.per_key,
           least(coalesce(q.concurrency - r.running, 2147483647),
                 coalesce(q.per_worker - r.mine, 2147483647),
                 coalesce(q.rate_limit - (SELECT count(*) FROM unnest(q.rate_starts) AS s(at)
                                           WHERE s.at > statement_timestamp() - q.rate_period), 2147483647)) AS free
      FROM {schema}.queues q
      CROSS JOIN LATERAL (
            SELECT count(*) AS running, count(*) FILTER (WHERE r.owner_id = %(worker_id)s) AS mine
              FROM {schema}.workflow_executions r
             WHERE r.status = 'running' AND r.queue = q.name) AS r
     WHERE q.name = ANY(%(queues)s::text[]) AND NOT q.paused AND {queue_is_limited}
), busy_keys AS MATERIALIZED (
    SELECT r.queue, r.concurrency_key, count(*) AS running
      FROM {schema}.workflow_executions r
     WHERE r.status = 'running' AND r.queue = ANY(%(queues)s::text[]) AND r.concurrency_key IS NOT NULL
     GROUP BY 1, 2
), head AS MATERIALIZED (
    -- Per queue with room, the head of its backlog in claim order (an ordered index walk).
    SELECT e.tid, e.id, e.queue, e.concurrency_key, e.neg_priority, e.run_at,
           row_number() OVER (PARTITION BY e.queue, e.concurrency_key
                              ORDER BY e.neg_priority, e.run_at, e.id) AS nth_of_key
      FROM room
     CROSS JOIN LATERAL (
            SELECT r.ctid AS tid, r.id, r.queue, r.concurrency_key, r.neg_priority, r.run_at
              FROM {schema}.executions_ready r
             WHERE r.queue = room.name AND r.run_at <= now()
               AND r.workflow_name = ANY(%(names)s::text[]) AND {version_matches}
               -- Of the worker's buckets (all: NULL); the room and the keys' counts above
               -- span every bucket, so the limits stay the whole queue's.
               AND (%(buckets)s::smallint[] IS NULL OR r.bucket = ANY(%(buckets)s::smallint[]))
             ORDER BY r.queue, r.neg_priority, r.run_at, r.id
             LIMIT %(scan)s) AS e
     WHERE room.free > 0
), allowed AS (
    SELECT h.tid, h.id, h.queue, h.neg_priority, h.run_at,
           row_number() OVER (PARTITION BY h.queue ORDER BY h.neg_priority, h.run_at, h.id) AS nth_of_queue
      FROM head h
      JOIN room ON room.name = h.queue
      LEFT JOIN busy_keys k ON k.queue = h.queue AND k.concurrency_key = h.concurrency_key
     WHERE h.concurrency_key IS NULL OR h.nth_of_key + coalesce(k.running, 0) <= room.per_key
), chosen AS (
    -- In claim order, n and a few more: any subset of what the limits allow is allowed, and
    -- the few more stand in for rows the next step skips as locked.
    SELECT a.tid, a.id, a.neg_priority, a.run_at FROM allowed a JOIN room ON room.name = a.queue
     WHERE a.nth_of_queue <= room.free
     ORDER BY a.neg_priority, a.run_at, a.id
     LIMIT %(n)s * 2 + 8
), locked AS (
    -- The first n of those whose ready row and execution no other session holds, both locked
    -- as every claim locks them (lock_ready_and_execution, db/statements.sql): the DELETE
    -- and the UPDATE below would wait for them, holding the queue locks. The limit counts only
    -- the rows locked, and only the chosen rows are probed.
    SELECT r.ctid AS tid FROM chosen c
      JOIN {schema}.executions_ready r ON r.ctid = c.tid
      JOIN {schema}.workflow_executions e ON e.id = c.id
     ORDER BY c.neg_priority, c.run_at, c.id
     LIMIT %(n)s
{lock_ready_and_execution}
), taken AS (
    -- Out of the ready table (a row a cancel deleted meanwhile is not taken), then to running.
    -- What is claimed is checked against the execution itself (see claim.py).
    DELETE FROM {schema}.executions_ready r USING locked
     WHERE r.ctid = locked.tid
    RETURNING r.id, r.neg_priority, r.run_at, r.workflow_name, r.queue, r.version, r.concurrency_key
), claimed AS (
    UPDATE {schema}.workflow_executions e
       SET {take_claim}
      FROM taken
     WHERE e.id = taken.id AND {ready_row_is_current}
    RETURNING e.id, e.workflow_name, {claimed_input}, e.claim_epoch, e.claims, e.queue
), stamped AS (
    UPDATE {schema}.queues q
       SET rate_starts = ARRAY(SELECT s.at FROM unnest(q.rate_starts) AS s(at)
                                WHERE s.at > statement_timestamp() - q.rate_period)
                         || array_fill(statement_timestamp(), ARRAY[c.n::int])
      FROM (SELECT queue, count(*) AS n FROM claimed GROUP BY queue) AS c
     WHERE q.name = c.queue AND q.rate_limit IS NOT NULL
)
SELECT id, workflow_name, input, input_later, claim_epoch, claims FROM claimed;
