-- admin/execution.py: Reading one execution back: what ``Kestrel.get`` returns.

-- name: get
SELECT id, workflow_name, status, input, output, error, owner_id, lease_expires, claims,
       run_at, created_at, updated_at, started_at, finished_at
  FROM {schema}.workflow_executions WHERE id = %s;
