-- Kestrel schema, version 31: bulk actions on a frozen set of executions (issue 47).
--
-- A preview (`kestrel-console cancel --where FILTER --dry-run`) freezes the ids a filter
-- selects into bulk_batch_items under a random token (bulk_freeze()); acting with that token
-- (bulk_begin(), then bulk_apply_chunk() until nothing is left) acts on exactly those rows,
-- never on a filter evaluated again. Each row goes through its single-row operator function
-- (cancel_execution(), requeue_execution(), fork_execution(), ...), whose own state rule holds:
-- a row it refuses is recorded 'refused' with the refusal's message. A row's outcome is
-- written in the transaction that acts on it, so a batch interrupted anywhere (a console
-- killed) resumes with the same token and acts on each row once.
--
-- The audit: the preview is one operator_actions row (action 'bulk', details name the batch);
-- each row's action is audited by its function as always, and carries the batch's id in the
-- new column operator_actions.batch_id (set by the trigger below, only for an execution of
-- the batch being applied in this transaction).
--
-- Written only by the SECURITY DEFINER functions (schema/functions/bulk_*.sql): the operator
-- role reads these tables and cannot write them, so an outcome is never recorded without the
-- action it records.
CREATE TABLE {schema}.bulk_batches (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    token       text NOT NULL UNIQUE,
    action      text NOT NULL CHECK (action ~ '^[a-z_]+$'),
    params      jsonb NOT NULL DEFAULT '{}',
    filter_text text,
    total       integer NOT NULL,
    created_by  text NOT NULL,
    db_user     text NOT NULL DEFAULT session_user,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    started_at  timestamptz,
    started_by  text,
    finished_at timestamptz
);

CREATE TABLE {schema}.bulk_batch_items (
    batch_id     bigint NOT NULL REFERENCES {schema}.bulk_batches (id) ON DELETE CASCADE,
    execution_id bigint NOT NULL,  -- no FK: the history is partitioned and pruned
    outcome      text CHECK (outcome IN ('done', 'refused')),
    reason       text,             -- a refusal's message
    result       jsonb,            -- what the action returned (the previous status, a fork's id)
    acted_at     timestamptz,
    acted_by     text,
    PRIMARY KEY (batch_id, execution_id)
);
-- What is left to do of a batch (resuming reads only these).
CREATE INDEX bulk_batch_items_pending_idx ON {schema}.bulk_batch_items (batch_id, execution_id)
    WHERE outcome IS NULL;

ALTER TABLE {schema}.operator_actions ADD COLUMN batch_id bigint;
CREATE INDEX operator_actions_batch_idx ON {schema}.operator_actions (batch_id) WHERE batch_id IS NOT NULL;

-- tag_bulk_batch() lives in schema/functions/; created here first because the trigger needs it.
CREATE FUNCTION {schema}.tag_bulk_batch() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
BEGIN
    RETURN NEW;
END
$$;
-- Fires only while a bulk chunk runs (bulk_apply_chunk sets the setting for its transaction).
CREATE TRIGGER tag_bulk_batch
    BEFORE INSERT ON {schema}.operator_actions
    FOR EACH ROW
    WHEN (coalesce(current_setting('kestrel.bulk_batch', true), '') <> '')
    EXECUTE FUNCTION {schema}.tag_bulk_batch();

DO $$
DECLARE
    allowed text[];
BEGIN
    SELECT coalesce(array_agg(DISTINCT v), '{}') INTO allowed
      FROM pg_constraint c,
           regexp_matches(pg_get_constraintdef(c.oid), '''([^'']+)''', 'g') AS m,
           unnest(CASE WHEN m[1] LIKE '{%}' THEN m[1]::text[] ELSE ARRAY[m[1]] END) AS v
     WHERE c.conrelid = '{schema}.operator_actions'::regclass
       AND c.conname = 'operator_actions_action_check';
    allowed := array(SELECT DISTINCT unnest(allowed || ARRAY['bulk']) ORDER BY 1);
    ALTER TABLE {schema}.operator_actions DROP CONSTRAINT IF EXISTS operator_actions_action_check;
    EXECUTE format('ALTER TABLE {schema}.operator_actions ADD CONSTRAINT operator_actions_action_check '
                   'CHECK (action IN (%s))',
                   (SELECT string_agg(quote_literal(a), ', ') FROM unnest(allowed) AS a));
END
$$;
