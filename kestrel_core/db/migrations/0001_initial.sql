-- Kestrel schema, version 1.
-- `{schema}` is replaced by the quoted schema name before this runs (see migrate.py).

CREATE TABLE {schema}.workflow_executions (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workflow_name  text        NOT NULL,
    status         text        NOT NULL DEFAULT 'enqueued'
                   CHECK (status IN ('enqueued', 'running', 'waiting', 'success', 'error', 'cancelled')),
    input          jsonb,
    output         jsonb,
    error          text,
    owner_id       text,                 -- worker holding (or that last held) the claim
    lease_expires  timestamptz,          -- set while running
    claim_epoch    bigint      NOT NULL DEFAULT 0,  -- incremented by every claim: fences stale writers
    priority       integer     NOT NULL DEFAULT 0,  -- higher runs first
    run_at         timestamptz NOT NULL DEFAULT now(),  -- not claimed before this
    idempotency_key text       UNIQUE,
    claims         integer     NOT NULL DEFAULT 0,  -- how many times a worker claimed it
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    started_at     timestamptz,          -- first claim
    finished_at    timestamptz           -- reached success/error/cancelled
);

-- Hot paths stay O(live rows): each partial index holds only rows in one live state.
CREATE INDEX workflow_executions_enqueued_idx
    ON {schema}.workflow_executions (priority DESC, run_at, id) WHERE status = 'enqueued';
CREATE INDEX workflow_executions_running_lease_idx
    ON {schema}.workflow_executions (lease_expires) WHERE status = 'running';
CREATE INDEX workflow_executions_running_owner_idx
    ON {schema}.workflow_executions (owner_id) WHERE status = 'running';
CREATE INDEX workflow_executions_waiting_idx
    ON {schema}.workflow_executions (id) WHERE status = 'waiting';
-- Recent finishes (errors in the last hour, throughput) and retention scans.
CREATE INDEX workflow_executions_finished_idx
    ON {schema}.workflow_executions (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX workflow_executions_name_idx
    ON {schema}.workflow_executions (workflow_name, id);

-- The queue table churns (every row is updated 3+ times): vacuum it early and leave room
-- on each page for HOT updates.
ALTER TABLE {schema}.workflow_executions SET (
    fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
);

-- One row per finished step (or resolved wait): the checkpoint replay reads.
CREATE TABLE {schema}.operation_outputs (
    execution_id  bigint      NOT NULL REFERENCES {schema}.workflow_executions (id) ON DELETE CASCADE,
    step_id       text        NOT NULL,
    output        jsonb,
    error         text,                 -- set when the step failed for good (retries exhausted)
    started_at    timestamptz NOT NULL DEFAULT now(),
    created_at    timestamptz NOT NULL DEFAULT now(),  -- when it finished
    attempts      integer     NOT NULL DEFAULT 1,
    owner_id      text,
    PRIMARY KEY (execution_id, step_id)
);

-- Durable sleeps and approval gates.
CREATE TABLE {schema}.workflow_waits (
    execution_id  bigint      NOT NULL REFERENCES {schema}.workflow_executions (id) ON DELETE CASCADE,
    step_id       text        NOT NULL,
    kind          text        NOT NULL CHECK (kind IN ('sleep', 'approval')),
    wake_at       timestamptz,          -- sleep: when it is due; approval: its deadline (NULL = none)
    details       jsonb,                -- what the workflow attached for the approver
    created_at    timestamptz NOT NULL DEFAULT now(),
    resolved_at   timestamptz,          -- when it stopped blocking (woke, decided, timed out, cancelled)
    decision      text CHECK (decision IN ('approved', 'rejected', 'timed_out')),
    decided_by    text,
    comment       text,
    decided_at    timestamptz,
    PRIMARY KEY (execution_id, step_id)
);
CREATE INDEX workflow_waits_due_idx
    ON {schema}.workflow_waits (wake_at) WHERE resolved_at IS NULL;
CREATE INDEX workflow_waits_pending_approval_idx
    ON {schema}.workflow_waits (created_at) WHERE resolved_at IS NULL AND kind = 'approval';
CREATE INDEX workflow_waits_decided_idx
    ON {schema}.workflow_waits (decided_at) WHERE decided_at IS NOT NULL;

-- Every attempt of every step, failed ones included: the per-step timeline.
CREATE TABLE {schema}.step_attempts (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    execution_id  bigint      NOT NULL REFERENCES {schema}.workflow_executions (id) ON DELETE CASCADE,
    step_id       text        NOT NULL,
    attempt       integer     NOT NULL,
    owner_id      text,
    claim_epoch   bigint,
    started_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at   timestamptz,
    outcome       text        NOT NULL DEFAULT 'running'
                  CHECK (outcome IN ('running', 'success', 'error')),
    error         text
);
CREATE INDEX step_attempts_execution_idx ON {schema}.step_attempts (execution_id, started_at);
CREATE INDEX step_attempts_finished_idx
    ON {schema}.step_attempts (finished_at) WHERE finished_at IS NOT NULL;

-- Workers announce themselves: which workflow names they run, and when they last beat.
CREATE TABLE {schema}.workers (
    worker_id      text        PRIMARY KEY,
    hostname       text,
    pid            integer,
    workflows      text[]      NOT NULL DEFAULT '{}',
    concurrency    integer,
    started_at     timestamptz NOT NULL DEFAULT now(),
    last_heartbeat timestamptz NOT NULL DEFAULT now(),
    stopped_at     timestamptz
);

-- Every operator action: who did what to which execution, when, and why.
CREATE TABLE {schema}.operator_actions (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at            timestamptz NOT NULL DEFAULT now(),
    actor         text        NOT NULL,
    action        text        NOT NULL CHECK (action IN ('approve', 'reject', 'cancel', 'requeue', 'prune')),
    execution_id  bigint,               -- no FK: the audit outlives pruned executions
    step_id       text,
    comment       text,
    from_status   text,
    details       jsonb
);
CREATE INDEX operator_actions_execution_idx ON {schema}.operator_actions (execution_id, at);
