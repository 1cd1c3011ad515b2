-- Kestrel schema, version 23: a lock held by another session never costs a worker its leases
-- (issue 43).
--
-- The heartbeat renews the leases it can lock and skips a row another session holds locked
-- (an operator's SELECT ... FOR UPDATE, a cancel in flight): it never waits. It records the
-- ids it skipped in its worker's row (``busy``), with the lease it runs under (``lease``), and
-- the lease sweep leaves those executions alone while that worker beats (last_heartbeat
-- within its lease): once the lock is gone, the next beat renews them. A worker that stops
-- beating (dead, frozen) loses them as before.
ALTER TABLE {schema}.workers
    ADD COLUMN busy bigint[] NOT NULL DEFAULT '{}',
    ADD COLUMN lease interval;
