-- Kestrel schema, version 6: queues with limits, and workflow versions (issue 12).
--
-- 1. queues: one row per queue. Workers upsert the limits their code declares
--    (app.queue(...)) at start; operators pause and resume (audited functions below).
--    A queue with any limit (concurrency, per_worker, rate) or with keyed executions
--    (concurrency_key) is claimed only under a lock on its row (kestrel_core/limited_claim.py), so
--    the counts every claimer reads are current; other queues keep the SKIP LOCKED fast path.
--    rate_starts holds the claim times of the current rate window (at most rate_limit of
--    them): an exact sliding window across every worker.
-- 2. workflow_executions.queue / concurrency_key / version. version NULL = any worker may run
--    it (enqueued by a process without the code, e.g. the CLI); the first claim stamps the
--    claiming worker's version on it, so replays stay on the same code.
--    An index on the enqueued rows by queue serves the limited claim and the console.
-- 3. workers.versions (parallel to workflows) and workers.queues (NULL = every queue).
-- 4. operator_actions accepts 'pause_queue' and 'resume_queue'.

CREATE TABLE {schema}.queues (
    name           text        PRIMARY KEY,
    concurrency    integer     CHECK (concurrency > 0),   -- running at once, across all workers
    per_worker     integer     CHECK (per_worker > 0),    -- running at once on one worker
    rate_limit     integer     CHECK (rate_limit > 0),    -- claims started per rate_period ...
    rate_period    interval    CHECK (rate_period > interval '0'),  -- ... across all workers
    per_key        integer     NOT NULL DEFAULT 1 CHECK (per_key > 0),  -- running per concurrency_key
    priority       integer     NOT NULL DEFAULT 0,        -- default priority of its executions
    workflows      text[]      NOT NULL DEFAULT '{}',     -- workflows bound to it in code
    keyed          boolean     NOT NULL DEFAULT false,    -- some execution carried a concurrency_key
    rate_starts    timestamptz[] NOT NULL DEFAULT '{}',   -- claim times in the current window
    paused         boolean     NOT NULL DEFAULT false,
    paused_by      text,
    paused_at      timestamptz,
    declared_at    timestamptz,                           -- last upsert by a worker
    created_at     timestamptz NOT NULL DEFAULT now(),
    CHECK ((rate_limit IS NULL) = (rate_period IS NULL))
);

ALTER TABLE {schema}.workflow_executions
    ADD COLUMN queue text NOT NULL DEFAULT 'default',
    ADD COLUMN concurrency_key text,
    ADD COLUMN version text;

-- The backlog of one queue in claim order: the limited claim reads its head, the console
-- its depth. Partial, like the engine's other hot indexes: only enqueued rows are in it.
CREATE INDEX workflow_executions_enqueued_queue_idx
    ON {schema}.workflow_executions (queue, priority DESC, run_at, id) WHERE status = 'enqueued';

ALTER TABLE {schema}.workers
    ADD COLUMN versions text[] NOT NULL DEFAULT '{}',
    ADD COLUMN queues text[];

-- Add this migration's actions to whatever operator_actions already accepts (other
-- migrations may have added theirs): read the current list from the constraint, extend it.
DO $$
DECLARE
    allowed text[];
BEGIN
    SELECT coalesce(array_agg(DISTINCT m[1]), '{}') INTO allowed
      FROM pg_constraint c,
           regexp_matches(pg_get_constraintdef(c.oid), '''([^'']+)''', 'g') AS m
     WHERE c.conrelid = '{schema}.operator_actions'::regclass
       AND c.conname = 'operator_actions_action_check';
    allowed := array(SELECT DISTINCT unnest(allowed || ARRAY['pause_queue', 'resume_queue']) ORDER BY 1);
    ALTER TABLE {schema}.operator_actions DROP CONSTRAINT IF EXISTS operator_actions_action_check;
    EXECUTE format('ALTER TABLE {schema}.operator_actions ADD CONSTRAINT operator_actions_action_check '
                   'CHECK (action = ANY (%L::text[]))', allowed);
END
$$;

CREATE FUNCTION {schema}.set_queue_paused(p_name text, p_paused boolean, p_by text, p_comment text)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    q queues%ROWTYPE;
    verb text := CASE WHEN p_paused THEN 'pause' ELSE 'resume' END;
BEGIN
    SELECT * INTO q FROM queues WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cannot %: no queue named "%"', verb, p_name
            USING ERRCODE = 'KS404',
                  HINT = 'Queues are listed by: kestrel-console queue list (a worker declares them when it starts).';
    END IF;
    IF q.paused = p_paused THEN
        RAISE EXCEPTION 'cannot %: queue "%" is already %', verb, p_name,
            CASE WHEN p_paused THEN 'paused (by ' || coalesce(q.paused_by, '?') || ')' ELSE 'running' END
            USING ERRCODE = 'KS409';
    END IF;
    UPDATE queues
       SET paused = p_paused,
           paused_by = CASE WHEN p_paused THEN p_by END,
           paused_at = CASE WHEN p_paused THEN now() END
     WHERE name = p_name;
    INSERT INTO operator_actions (actor, action, comment, details)
    VALUES (p_by, verb || '_queue', p_comment, jsonb_build_object('queue', p_name));
    IF NOT p_paused THEN
        -- Wake idle workers: the queue's backlog is claimable again.
        PERFORM pg_notify('kestrel:' || current_schema(), w)
           FROM (SELECT DISTINCT workflow_name AS w FROM workflow_executions
                  WHERE status = 'enqueued' AND queue = p_name) AS names;
    END IF;
    RETURN p_paused;
END
$$;

REVOKE EXECUTE ON FUNCTION {schema}.set_queue_paused(text, boolean, text, text) FROM PUBLIC;
