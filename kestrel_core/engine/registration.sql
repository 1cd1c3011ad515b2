-- engine/registration.py: Announcing a worker at its start, and retiring it.

-- name: register
INSERT INTO {schema}.workers (worker_id, hostname, pid, workflows, concurrency, versions, queues)
VALUES (%(worker_id)s, %(hostname)s, %(pid)s, %(workflows)s, %(concurrency)s, %(versions)s, %(queues)s)
ON CONFLICT (worker_id) DO UPDATE
   SET hostname = EXCLUDED.hostname, pid = EXCLUDED.pid, workflows = EXCLUDED.workflows,
       concurrency = EXCLUDED.concurrency, started_at = now(), last_heartbeat = now(),
       stopped_at = NULL, versions = EXCLUDED.versions, queues = EXCLUDED.queues;

-- name: retire
UPDATE {schema}.workers SET stopped_at = now() WHERE worker_id = %(worker_id)s;
