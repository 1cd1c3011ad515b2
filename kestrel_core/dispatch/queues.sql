-- dispatch/queues.py: Queues: declarations in code, upserted by workers; pause and resume by operators.

-- name: declare
-- Limits as declared (NULL = no limit); the workflows bound to the queue are added to its list
-- (read by enqueues from processes without the code, e.g. the CLI).
INSERT INTO {schema}.queues AS q
       (name, concurrency, per_worker, rate_limit, rate_period, per_key, priority, workflows, declared_at)
VALUES (%(name)s, %(concurrency)s, %(per_worker)s, %(rate_limit)s, %(rate_period)s, %(per_key)s,
        %(priority)s, %(workflows)s, now())
ON CONFLICT (name) DO UPDATE
   SET concurrency = EXCLUDED.concurrency, per_worker = EXCLUDED.per_worker,
       rate_limit = EXCLUDED.rate_limit, rate_period = EXCLUDED.rate_period,
       per_key = EXCLUDED.per_key, priority = EXCLUDED.priority,
       workflows = ARRAY(SELECT DISTINCT w FROM unnest(q.workflows || EXCLUDED.workflows) AS t(w) ORDER BY 1),
       declared_at = now();

-- name: bind
-- A queue a workflow is bound to without a declaration: exists, limits untouched.
INSERT INTO {schema}.queues AS q (name, workflows, declared_at) VALUES (%(name)s, %(workflows)s, now())
ON CONFLICT (name) DO UPDATE
   SET workflows = ARRAY(SELECT DISTINCT w FROM unnest(q.workflows || EXCLUDED.workflows) AS t(w) ORDER BY 1),
       declared_at = now();

-- name: set_paused
SELECT {schema}.set_queue_paused(%s, %s, %s, %s);

-- name: undeclared
-- Of the queues a worker was told to serve, those no deployment declared or bound a workflow to.
SELECT s.name FROM unnest(%(names)s::text[]) AS s(name)
 WHERE NOT EXISTS (SELECT 1 FROM {schema}.queues q WHERE q.name = s.name)
 ORDER BY 1;
