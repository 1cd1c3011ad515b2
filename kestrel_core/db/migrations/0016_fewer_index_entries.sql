-- kestrel: outside transaction
-- Kestrel schema, version 16: fewer index entries per execution (issue 22).
--
-- 1. The unique keys become partial (WHERE ... IS NOT NULL): a full unique index holds an
--    entry for every row version, NULL keys included, 6 entries per one-step workflow of the
--    22 it wrote. The engine's ON CONFLICT clauses name the predicate (enqueue.py, children.py,
--    scheduler.py), which the old full indexes satisfy too: code of this version works before
--    and after this migration; code older than it cannot infer the partial indexes (its
--    enqueue fails), so producers upgrade with the workers.
-- 2. workflow_executions_enqueued_queue_idx goes: the limited claim walks executions_ready
--    (version 15).
-- 3. workflow_executions_running_lease_idx goes: it was the one index over lease_expires, so
--    a heartbeat (which changes nothing else) can now be a HOT update. The lease sweep and the
--    console's stuck leases read the running rows through running_owner_idx.
--
-- Built concurrently (writes go on); dropping a constraint takes a short ACCESS EXCLUSIVE
-- lock, bounded by lock_timeout (the migration fails and is retried by the next migrate rather
-- than queueing every writer behind a long transaction).
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS workflow_executions_idempotency_key_idx
    ON {schema}.workflow_executions (idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS workflow_executions_engine_key_idx
    ON {schema}.workflow_executions (engine_key) WHERE engine_key IS NOT NULL;
SET lock_timeout = '5s';
ALTER TABLE {schema}.workflow_executions DROP CONSTRAINT IF EXISTS workflow_executions_idempotency_key_key;
ALTER TABLE {schema}.workflow_executions DROP CONSTRAINT IF EXISTS workflow_executions_engine_key_key;
RESET lock_timeout;
DROP INDEX CONCURRENTLY IF EXISTS {schema}.workflow_executions_enqueued_queue_idx;
DROP INDEX CONCURRENTLY IF EXISTS {schema}.workflow_executions_running_lease_idx;
