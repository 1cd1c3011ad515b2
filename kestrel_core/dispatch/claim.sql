-- dispatch/claim.py: Claim: move up to N due ``enqueued`` rows to ``running`` for one worker.

-- name: claim
-- The fast path. It walks executions_ready (migration 0015: the enqueued executions, in claim
-- order, nothing else) past the key (after_p, after_at, after_id): the highest key this worker
-- process took (its mark, ClaimMark), or the start. It deletes the rows it takes and moves
-- their executions to 'running'. Besides due and registered, a row must be of a version this
-- worker has (the names and versions parameters are parallel arrays; NULL = any), of a queue it
-- serves (NULL = all), of a bucket it serves (NULL = all: buckets.py), and not of a paused or
-- limited queue (the tiny queues table, read once per statement). The first claim stamps the
-- worker's version on a row that had none.
--
-- What is claimed is checked against the execution itself, not the ready row ({ready_row_is_current}):
-- a ready row can outlive its execution's enqueued state (a claim that had it locked rolled
-- back while a cancel went on: the trigger skips locked rows), and after a requeue or a sweep it
-- would name an old version, queue or run_at. Such a row is deleted and claims nothing.
-- ({claimable} and {take_picked}: the blocks of those names below, pasted in by claim.py;
-- {lock_ready_and_execution}: db/statements.sql, shared with the limited claim.)
WITH picked AS (
    SELECT r.ctid AS tid FROM {schema}.executions_ready r
      JOIN {schema}.workflow_executions e ON e.id = r.id
     WHERE (r.neg_priority, r.run_at, r.id) > (%(after_p)s::bigint, %(after_at)s::timestamptz, %(after_id)s::bigint)
       AND {claimable}
     ORDER BY r.neg_priority, r.run_at, r.id
     LIMIT %(n)s
{lock_ready_and_execution}
{take_picked};

-- name: claim_behind
-- The look behind the mark, walking the claim index from the start up to the mark (inclusive):
-- rows that became claimable there (a claim rolled back, a higher priority, a row skipped as
-- locked, a queue resumed, a version now served, an enqueue that committed late).
WITH picked AS (
    SELECT r.ctid AS tid FROM {schema}.executions_ready r
      JOIN {schema}.workflow_executions e ON e.id = r.id
     WHERE (r.neg_priority, r.run_at, r.id) <= (%(upto_p)s::bigint, %(upto_at)s::timestamptz, %(upto_id)s::bigint)
       AND {claimable}
     ORDER BY r.neg_priority, r.run_at, r.id
     LIMIT %(n)s
{lock_ready_and_execution}
{take_picked};

-- name: claim_behind_slice
-- The same look, one slice of the table's heap at a time (blocks lo to hi, a TID range scan):
-- what a slice costs is bounded by its size, dead rows included, whatever a held snapshot left
-- in the claim index. Used while walks of the index time out (ClaimMark, BehindPass).
WITH slice AS MATERIALIZED (
    SELECT r.ctid AS tid, r.neg_priority, r.run_at, r.id FROM {schema}.executions_ready r
     WHERE r.ctid >= %(lo)s::tid AND r.ctid < %(hi)s::tid
       -- (+ 0: not a bound of the claim index, which the planner would walk instead of the slice)
       AND (r.neg_priority + 0, r.run_at, r.id) <= (%(upto_p)s::bigint, %(upto_at)s::timestamptz, %(upto_id)s::bigint)
       AND {claimable}
), picked AS (
    SELECT r.ctid AS tid FROM {schema}.executions_ready r
      JOIN {schema}.workflow_executions e ON e.id = r.id
     -- In claim order: ordered by the aggregate, not by a Sort the session's enable_sort = off
     -- would price out (and a plan priced that high is JIT-compiled: seconds).
     WHERE r.ctid = ANY(((SELECT (array_agg(s.tid ORDER BY s.neg_priority, s.run_at, s.id))[1:%(n)s]
                            FROM slice s))::tid[])
{lock_ready_and_execution}
{take_picked};

-- name: claimable
-- What a claim may take from executions_ready (aliased ``r``): a condition, pasted after AND.
-- Of the worker's buckets (NULL: all; buckets.py).
       r.run_at <= now() AND r.workflow_name = ANY(%(names)s::text[])
       AND {version_matches}
       AND (%(queues)s::text[] IS NULL OR r.queue = ANY(%(queues)s::text[]))
       AND (%(buckets)s::smallint[] IS NULL OR r.bucket = ANY(%(buckets)s::smallint[]))
       AND r.queue <> ALL (ARRAY(
             SELECT q.name FROM {schema}.queues q WHERE q.paused OR {queue_is_limited}))

-- name: take_picked
-- How a claim takes what it picked (a CTE ``picked(tid)``): the rest of its statement.
), taken AS (
    DELETE FROM {schema}.executions_ready r USING picked
     WHERE r.ctid = picked.tid
    RETURNING r.id, r.neg_priority, r.run_at, r.workflow_name, r.queue, r.version, r.concurrency_key
)
UPDATE {schema}.workflow_executions e
   SET {take_claim}
  FROM taken
 WHERE e.id = taken.id AND {ready_row_is_current}
RETURNING e.id, e.workflow_name, {claimed_input}, e.claim_epoch, e.claims, taken.neg_priority, taken.run_at

-- name: ready_blocks
-- How many blocks the ready table has now: a pass of slices covers them.
SELECT pg_relation_size(%(ready)s::regclass) / current_setting('block_size')::bigint;

-- name: ordered_plan
-- The claim must walk the ready index in order and stop after N rows. The planner may
-- believe the queue is tiny and sort the whole backlog instead (13-16 ms instead of 0.2-0.4 ms
-- at 36-40k rows): when its statistics predate a burst of enqueues (autovacuum analyzes up to
-- a minute later), and, even with fresh statistics, when every row has the same queue (the
-- "not a limited queue" filter is then estimated to keep ~0 rows). Ruling out the sort keeps
-- the plan right at any size: the worker's own claim session sets it once for the session
-- (CLAIM_SESSION_SETTINGS), so that each claim is ONE autocommit statement; on any other
-- connection (a test's, one through PgBouncer) the claim is a transaction that sets it first.
SET LOCAL enable_sort = off;

-- name: claimed_input_later
-- A large input left out of the claim's result ({claimed_input}): read by the runner thread
-- after the claim committed, only while the claim is current.
SELECT input FROM {schema}.workflow_executions WHERE {claim_is_current};
