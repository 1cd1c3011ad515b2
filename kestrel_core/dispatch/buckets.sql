-- The statements of kestrel_core/dispatch/buckets.py: the workers that share the buckets.

-- name: live_peers
-- This worker's row says how many bucket groups it serves a share of; then the workers alive
-- (not stopped, a heartbeat within their own lease, this worker's if none recorded yet) with
-- the same count and able to claim what it claims: the same workflows, versions and queues
-- (as registered). Every such worker reads the same rows, so finds the same rendezvous
-- winners; a fleet of two kinds of workers is two fleets, each serving every group. Its own
-- row is updated in this statement and read from its old version: the caller adds itself.
WITH mine AS (
    UPDATE {schema}.workers SET bucket_groups = %(groups)s
     WHERE worker_id = %(worker_id)s AND bucket_groups IS DISTINCT FROM %(groups)s
)
SELECT w.worker_id FROM {schema}.workers w
 WHERE w.bucket_groups = %(groups)s AND w.stopped_at IS NULL
   AND w.last_heartbeat > now() - coalesce(w.lease, %(lease)s)
   AND w.workflows = %(workflows)s::text[] AND w.versions = %(versions)s::text[]
   AND w.queues IS NOT DISTINCT FROM %(queues)s::text[]
