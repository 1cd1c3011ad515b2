-- The statements of kestrel_core/engine/fleet.py: how many workers share the fleet-wide duties.

-- name: fleet_size
-- The live workers of this schema (not stopped, a beat within half their lease: a worker beats
-- every third of it, so one late beat still counts and a killed one stops counting soon), and
-- of those the ones that poll for what this worker claims: a free slot at their last beat
-- (free_slots, migration 0039; NULL counts as not polling) and the same workflows, versions and
-- queues, as registered (registration.sql). Both count this worker, whose row may not be
-- written yet (its first beat), and which polls when it asks.
SELECT count(*) + 1, count(*) FILTER (
           WHERE w.free_slots > 0
             AND w.workflows = %(workflows)s::text[] AND w.versions = %(versions)s::text[]
             AND w.queues IS NOT DISTINCT FROM %(queues)s::text[]) + 1
  FROM {schema}.workers w
 WHERE w.worker_id <> %(worker_id)s AND w.stopped_at IS NULL
   AND w.last_heartbeat > now() - coalesce(w.lease, %(lease)s) / 2;

-- name: say_full
-- A worker of a large fleet whose claim took its last free slot says so at once (its poll is
-- shared among the pollers: counted as one until its next beat, it would make the idle ones
-- poll too rarely); a no-op once said. Its row locked by another session is skipped, as the
-- heartbeat skips it (lease.sql): the claim thread never waits for it (the next beat says it).
UPDATE {schema}.workers SET free_slots = 0
 WHERE ctid = ANY(ARRAY(SELECT ctid FROM {schema}.workers
                         WHERE worker_id = %(worker_id)s AND free_slots > 0 FOR NO KEY UPDATE SKIP LOCKED));
