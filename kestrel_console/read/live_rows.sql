-- name: running
    SELECT id, workflow_name, owner_id, lease_expires, created_at, started_at
      FROM {schema}.workflow_executions WHERE status = 'running';

-- name: waiting
    SELECT workflow_name, created_at, started_at
      FROM {schema}.workflow_executions WHERE status = 'waiting';

-- name: paused
    SELECT workflow_name FROM {schema}.workflow_executions WHERE status = 'paused';

-- name: ready
    SELECT workflow_name, version, count(*) AS n
      FROM {schema}.executions_ready GROUP BY workflow_name, version;

-- name: finished
    SELECT workflow_name, status, sum(n)::bigint AS n
      FROM {schema}.execution_counts GROUP BY workflow_name, status;

-- name: live_cte
-- A live CTE in a part read alone: referenced once, PostgreSQL inlines it.
{name} AS ({body})

-- name: live_cte_materialized
-- A live CTE in the dashboard's statement: read once for all its parts.
{name} AS MATERIALIZED ({body})

-- name: ordered
{body} ORDER BY {order}

-- name: limited
{rows} LIMIT {limit}

-- name: part_alone
-- A part read alone: the live CTEs it reads, its own CTEs, its rows in order.
WITH {ctes}
{rows};
