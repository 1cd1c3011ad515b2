-- name: search
-- One page of executions newest first: ``{source}`` is the table (or, under free text, the
-- window of it the keys select), ``{where}`` the keys' conditions (KEY_CONDITIONS, joined
-- with AND). Planned with its values, never prepared: a status literal meets its partial
-- index, an input document the GIN index of migration 0025, an id range the primary key
-- (and only the history's ranges it overlaps). bench/README.md "Search at 10M" has the plans.
SELECT e.id, e.workflow_name, e.status, e.created_at, e.started_at, e.finished_at,
       extract(epoch FROM now() - e.created_at)::float8 AS age_s,
       extract(epoch FROM coalesce(e.finished_at, now()) - e.started_at)::float8 AS duration_s,
       e.owner_id, cur.step_id AS current_step, e.error,
       (e.status = 'running' AND e.lease_expires < now()) AS lease_expired
  FROM (SELECT e.id, e.workflow_name, e.status, e.created_at, e.started_at, e.finished_at, e.owner_id,
               e.error, e.lease_expires
          FROM {source} AS e
         WHERE {where}
         ORDER BY e.id DESC
         LIMIT %(limit)s OFFSET %(offset)s) AS e
  -- the current step of the page's rows only (joined before a sort, it was looked up for
  -- every row of a window: 3,263 lookups for a page of 100 under since:5m at 1M)
  LEFT JOIN LATERAL (
        SELECT step_id FROM (
            SELECT w.step_id, w.created_at AS at FROM {schema}.workflow_waits w
             WHERE w.execution_id = e.id AND w.resolved_at IS NULL
            UNION ALL
            (SELECT a.step_id, a.started_at FROM {schema}.step_attempts a
              WHERE a.execution_id = e.id ORDER BY a.started_at DESC LIMIT 1)
        ) AS s ORDER BY at DESC LIMIT 1
  ) AS cur ON true
 ORDER BY e.id DESC;

-- name: ids
-- Every row a filter selects, narrow (a bulk action's preview freezes their ids): no page.
SELECT e.id, e.workflow_name, e.status, e.created_at
  FROM {source} AS e
 WHERE {where}
 ORDER BY e.id DESC
 LIMIT %(limit)s;

-- name: whole_table
{schema}.workflow_executions

-- name: text_window
-- Free text has no index (a substring of any input, error or step id: a trigram index over
-- every input would cost each enqueue hundreds of index entries): it is matched in the newest
-- search.TEXT_WINDOW executions the keys select, before the page, newest
-- first, stopping once the page is full.
(SELECT * FROM {schema}.workflow_executions AS e
     WHERE {where}
     ORDER BY e.id DESC LIMIT %(text_window)s)

-- name: text_match
-- The step-id EXISTS stay correlated (OFFSET 0), probed only for rows the columns did not
-- match: hashed, they would read every attempt of the history to match a window of rows.
(strpos(lower(e.workflow_name), lower(%(text)s::text)) > 0
        OR strpos(lower(coalesce(e.owner_id, '')), lower(%(text)s::text)) > 0
        OR strpos(lower(coalesce(e.error, '')), lower(%(text)s::text)) > 0
        OR e.id::text = %(text)s::text
        OR strpos(lower(coalesce(e.input::text, '')), lower(%(text)s::text)) > 0
        OR EXISTS (SELECT 1 FROM {schema}.step_attempts AS a
                    WHERE a.execution_id = e.id AND strpos(lower(a.step_id), lower(%(text)s::text)) > 0 OFFSET 0)
        OR EXISTS (SELECT 1 FROM {schema}.workflow_waits AS w
                    WHERE w.execution_id = e.id AND strpos(lower(w.step_id), lower(%(text)s::text)) > 0 OFFSET 0))

-- name: condition_join
-- Between the keys' conditions (KEY_CONDITIONS, input_contains): every one holds.
AND

-- name: input_contains
-- input.x=v: the input contains one of the documents (search.InputMatch.documents).
e.input @> ANY({documents}::jsonb[])

-- name: no_condition
true

-- name: id_bounds
-- The time window as a range of ids, from the primary key alone: ids grow with created_at
-- (each is handed out at insert, created_at is its transaction's start), so a binary search
-- over the ids (~24 probes of the primary key at 10M) finds the first id created at or after
-- a time. The ids are searched for the window widened by ``skew`` on both sides, and the list
-- keeps the exact times within: an execution is missed only when its enqueuing transaction ran
-- longer than ``skew`` before inserting it. from_at / until_at: the window's ends (a span ago
-- is measured on the database's clock).
WITH RECURSIVE t AS (
    SELECT greatest(%(from_at)s::timestamptz, now() - make_interval(secs => %(from_ago)s::float8)) AS from_at,
           least(%(until_at)s::timestamptz, now() - make_interval(secs => %(until_ago)s::float8)) AS until_at
), ends AS (
    SELECT coalesce((SELECT min(id) FROM {schema}.workflow_executions), 0) AS lo,
           coalesce((SELECT max(id) FROM {schema}.workflow_executions), 0) + 1 AS hi
), probe(which, at, lo, hi) AS (
    SELECT 'from', t.from_at - %(skew)s::interval, ends.lo, ends.hi FROM t, ends WHERE t.from_at IS NOT NULL
    UNION ALL
    SELECT 'until', t.until_at + %(skew)s::interval, ends.lo, ends.hi FROM t, ends WHERE t.until_at IS NOT NULL
    UNION ALL
    SELECT p.which, p.at,
           CASE WHEN r.id IS NULL OR r.id >= p.hi THEN p.lo
                WHEN r.created_at < p.at THEN r.id + 1 ELSE p.lo END,
           CASE WHEN r.id IS NULL OR r.id >= p.hi THEN (p.lo + p.hi) / 2
                WHEN r.created_at < p.at THEN p.hi ELSE r.id END
      FROM probe AS p
      LEFT JOIN LATERAL (SELECT e.id, e.created_at FROM {schema}.workflow_executions AS e
                          WHERE e.id >= (p.lo + p.hi) / 2 ORDER BY e.id LIMIT 1) AS r ON true
     WHERE p.lo < p.hi
)
SELECT t.from_at, t.until_at,
       (SELECT min(hi) FROM probe WHERE which = 'from') AS from_id,
       (SELECT min(hi) FROM probe WHERE which = 'until') AS until_id
  FROM t;

-- name: explain_json
-- Prefixed to a search statement: its plan, whose row estimate stands in for a count.
EXPLAIN (FORMAT JSON)

-- name: workflow_names
-- Every workflow name the console knows of: finished executions (the trigger-kept counters),
-- live ones (their partial indexes), and what workers registered. For "did you mean ...?".
-- The enqueued executions' names from executions_ready (narrow, kept by triggers: not one heap
-- row per enqueued execution).
SELECT workflow_name FROM {schema}.execution_counts WHERE n <> 0
UNION SELECT workflow_name FROM {schema}.executions_ready
UNION SELECT workflow_name FROM {schema}.workflow_executions WHERE status = 'running'
UNION SELECT workflow_name FROM {schema}.workflow_executions WHERE status = 'waiting'
UNION SELECT unnest(workflows) FROM {schema}.workers
ORDER BY 1;

-- name: execution
SELECT e.id, e.workflow_name, e.status, e.input, e.output, e.error, e.owner_id,
       e.lease_expires, e.claim_epoch, e.priority, e.run_at, e.idempotency_key, e.claims,
       e.created_at, e.updated_at, e.started_at, e.finished_at,
       extract(epoch FROM now() - e.created_at)::float8 AS age_s,
       extract(epoch FROM coalesce(e.finished_at, now()) - e.started_at)::float8 AS duration_s,
       e.parent_id, e.deadline_at,
       (SELECT coalesce(jsonb_agg(jsonb_build_object('id', c.id, 'workflow', c.workflow_name,
                                                     'status', c.status) ORDER BY c.id), '[]')
          FROM (SELECT id, workflow_name, status FROM {schema}.workflow_executions
                 WHERE parent_id = e.id ORDER BY id LIMIT 500) AS c) AS children,
       (SELECT jsonb_build_object('id', f.origin_id, 'step', f.from_step)
          FROM {schema}.execution_forks f WHERE f.fork_id = e.id) AS forked_from,
       (SELECT coalesce(jsonb_agg(jsonb_build_object('id', f.fork_id, 'step', f.from_step) ORDER BY f.fork_id), '[]')
          FROM (SELECT fork_id, from_step FROM {schema}.execution_forks
                 WHERE origin_id = e.id ORDER BY fork_id LIMIT 500) AS f) AS forks
  FROM {schema}.workflow_executions e WHERE e.id = %(id)s;

-- name: brief
-- An execution as a link names it (the detail screen's parent row).
SELECT id, workflow_name AS workflow, status FROM {schema}.workflow_executions WHERE id = %(id)s;

-- name: steps
SELECT step_id, output, error, started_at, created_at AS finished_at,
       extract(epoch FROM created_at - started_at)::float8 AS duration_s, attempts, owner_id
  FROM {schema}.operation_outputs WHERE execution_id = %(id)s
 ORDER BY started_at, created_at, step_id;

-- name: key_status
e.status = %(status)s::text

-- name: key_workflow
e.workflow_name >= %(workflow_from)s::text
        AND (%(workflow_to)s::text IS NULL OR e.workflow_name < %(workflow_to)s::text)
        AND e.workflow_name LIKE %(workflow_like)s::text

-- name: key_id
e.id = %(id)s::bigint

-- name: key_key
e.id IN (SELECT k.execution_id FROM {schema}.execution_keys AS k WHERE k.key = %(key)s::text)

-- name: key_before
e.id < %(before_id)s::bigint

-- name: key_from
e.id >= %(from_id)s::bigint AND e.created_at >= %(from_at)s::timestamptz

-- name: key_until
e.id < %(until_id)s::bigint AND e.created_at < %(until_at)s::timestamptz
