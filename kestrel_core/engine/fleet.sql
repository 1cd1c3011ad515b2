-- The statements of kestrel_core/engine/fleet.py: how many workers share the fleet-wide duties.

-- name: fleet_size
-- The live workers of this schema (not stopped, a beat within half their lease: a worker beats
-- every third of it, so one late beat still counts and a killed one stops counting soon),
-- this worker counted whether or not its row is written yet (its first beat).
SELECT count(*) + 1
  FROM {schema}.workers w
 WHERE w.worker_id <> %(worker_id)s AND w.stopped_at IS NULL
   AND w.last_heartbeat > now() - coalesce(w.lease, %(lease)s) / 2;
