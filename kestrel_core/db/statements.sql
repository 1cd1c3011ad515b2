-- db/statements.py: the fragments every statement may paste by name (``{claim_is_current}``...,
-- composed by ``statements.render``), each block the text of one marker. Not statements: parts.

-- name: async_commit
-- Pasted as {async_commit}, this makes its (autocommit) transaction commit without waiting for
-- the WAL flush. Used only where losing the write in a server crash is harmless: attempt
-- bookkeeping, heartbeats, sweeps (redone next time), worker registration. Claims, checkpoints,
-- waits and completions always commit durably; a later durable commit also flushes these.
(SELECT set_config('synchronous_commit', 'off', true)) AS async_commit

-- name: abandon_and_wake
-- Pasted as {abandon_and_wake}: the end of a statement whose CTE ``handed_back`` hands
-- executions back to the queue (a stopping worker's release, the lease sweep: lease.sql,
-- sweeper.sql), returning their (id, workflow_name). Their worker's writes are fenced out from
-- now on: the attempt each had open is closed here; workers are woken for their workflows
-- (the ``channel`` parameter), and the statement returns the ids.
closed AS (
    UPDATE {schema}.step_attempts a SET outcome = 'abandoned', finished_at = greatest(now(), a.started_at)
     WHERE a.execution_id = ANY(ARRAY(SELECT s.id FROM handed_back s)) AND a.outcome = 'running'
), woke AS (
    SELECT pg_notify(%(channel)s, name) FROM (SELECT DISTINCT workflow_name AS name FROM handed_back) n
)
SELECT id FROM handed_back, (SELECT count(*) FROM woke) w

-- name: lock_ready_and_execution
-- Pasted as {lock_ready_and_execution}: how a claim locks what it picked (executions_ready
-- ``r`` joined to its execution ``e``; the fast path's three walks in claim.sql, the limited
-- claim in limited_claim.sql): both rows, skipping either when another session holds it. The
-- execution's row too: the claim's UPDATE of it would otherwise wait for a lock another session
-- holds on it (an operator's SELECT ... FOR UPDATE, a cancel under way), and every other row of
-- the claim, the claiming thread and the worker's stop with it. A row skipped so is found again
-- by the look behind the mark (or the next limited claim). (NO KEY: a foreign key's check on the
-- execution, KEY SHARE, blocks nothing.) The statement's own update counts as a lock too: a
-- second, stale ready row of an execution it already took stays, for the next claim to delete
-- (taking nothing: ready_row_is_current).
     FOR UPDATE OF r SKIP LOCKED
     FOR NO KEY UPDATE OF e SKIP LOCKED

-- name: claim_is_current
-- The fence, pasted as {claim_is_current}. A write made under a claim (owner_id, claim_epoch)
-- succeeds only while that claim is still the row's current one, the row is running and its
-- deadline (if any) has not passed: a swept, cancelled, reclaimed or timed-out worker (even one
-- reclaiming under the same id) writes nothing, also before a deadline sweep got to it. Every
-- advancing write uses it (the group commit's boundary spells the same in its fence CTE).
id = %(eid)s AND owner_id = %(worker_id)s AND claim_epoch = %(claim_epoch)s AND status = 'running'
AND (deadline_at IS NULL OR deadline_at > now())

-- name: lock_if_claim_is_current
-- Pasted as {lock_if_claim_is_current}, a CTE body: also locks the row for the statement, so a
-- concurrent sweep or cancel either waits for the write or wins first.
SELECT id FROM {schema}.workflow_executions WHERE {claim_is_current} FOR NO KEY UPDATE

-- name: take_claim
-- Pasted as {take_claim}: the SET list of both claims (claim.py, limited_claim.py), on the
-- executions table aliased ``e``. Every claim bumps claim_epoch (the fence above), and stamps
-- the worker's version of the workflow on an execution enqueued without one. Times are the
-- claiming statement's: the limited claim runs it after waiting for its queue locks, and
-- stamps its rate window with the same instant. The lease is counted from the row's own claim
-- (clock_timestamp()), which commits with the statement (claim.py): not from the statement's start.
status = 'running', owner_id = %(worker_id)s, lease_expires = clock_timestamp() + %(lease)s,
claim_epoch = e.claim_epoch + 1, claims = e.claims + 1,
started_at = coalesce(e.started_at, statement_timestamp()), updated_at = statement_timestamp(),
version = coalesce(e.version, (%(versions)s::text[])[array_position(%(names)s::text[], e.workflow_name)])

-- name: claimed_input
-- Pasted as {claimed_input}, two columns of a claim's RETURNING on the executions table aliased
-- ``e``: the input when it is small (at most CLAIM_INPUT_MAX_BYTES as stored, uncompressed), and
-- whether it was left out. A claim's result must stay small: a client frozen while reading a
-- claim of 5 MB inputs held the claim transaction (and its rows' locks) open; a larger input is read after the claim, outside it (runner.py, ``load_input``).
-- {claim_input_max_bytes} is that Python constant (statements.py), composed as a literal.
CASE WHEN pg_column_size(e.input) <= {claim_input_max_bytes} AND pg_column_compression(e.input) IS NULL
THEN e.input END AS input,
coalesce(pg_column_size(e.input) > {claim_input_max_bytes} OR pg_column_compression(e.input) IS NOT NULL,
false) AS input_later

-- name: queue_is_limited
-- Pasted as {queue_is_limited}, on the queues table aliased ``q``: a queue with a limit
-- (concurrency, per worker, rate) or keyed executions, which only the limited claim serves.
(q.keyed OR q.concurrency IS NOT NULL OR q.per_worker IS NOT NULL OR q.rate_limit IS NOT NULL)

-- name: ready_row_is_current
-- Pasted as {ready_row_is_current}: what a claim takes is checked against the execution itself
-- (``e``), not the ready row it came by (``taken``, the deleted row): the execution is enqueued,
-- of a workflow and version this worker has (the names and versions parameters), and
-- exactly as the ready row says (claim key, workflow, queue, version, concurrency key). A ready
-- row left behind by a claim that rolled back while a cancel went on (the trigger skips locked
-- rows) names the execution as it was: after a requeue or a sweep it differs, and claims nothing.
e.status = 'enqueued' AND e.workflow_name = ANY(%(names)s::text[])
AND (e.version IS NULL
OR e.version = (%(versions)s::text[])[array_position(%(names)s::text[], e.workflow_name)])
AND -e.priority::bigint = taken.neg_priority AND e.run_at = taken.run_at
AND e.workflow_name = taken.workflow_name AND e.queue = taken.queue
AND e.version IS NOT DISTINCT FROM taken.version
AND e.concurrency_key IS NOT DISTINCT FROM taken.concurrency_key

-- name: version_matches
-- Pasted as {version_matches}, on executions_ready aliased ``r``: the row is of a version this
-- worker has (the names and versions parameters are parallel arrays; a NULL version is any).
(r.version IS NULL OR r.version = (%(versions)s::text[])[array_position(%(names)s::text[], r.workflow_name)])

-- name: worker_is_live
-- Pasted as {worker_is_live}, on the workers table aliased ``w``: the worker has not stopped and
-- beat within the last ``dead_after`` seconds (a parameter: how long a silent worker still counts).
(w.stopped_at IS NULL AND w.last_heartbeat > now() - make_interval(secs => %(dead_after)s))
