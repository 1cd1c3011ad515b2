-- kestrel: outside transaction
-- Kestrel schema, version 25: the console's search finds executions by their input (issue 46).
--
-- `input.pod=api-1` in the console's filter (and `list --where`) is `input @> '{"pod": "api-1"}'`:
-- without an index, a scan of the whole history (2.8 s at 1.1M executions, past the console's
-- statement timeout). A GIN index with jsonb_path_ops holds one hash per value path of each
-- input (a few entries per execution, written once: the input never changes, so claims,
-- heartbeats and completions stay HOT-eligible as before). Idempotency keys need none
-- (execution_keys), ids and time windows use the primary key.
--
-- The history is partitioned (0022), which takes no concurrent build: migrate builds this
-- statement partition by partition (CONCURRENTLY, writes go on), then creates the parent's
-- index ON ONLY and attaches each partition's (kestrel_core/db/migrate.py). 1M executions:
-- 7.8 s, 48 MB (the primary key: 22 MB).
CREATE INDEX CONCURRENTLY IF NOT EXISTS workflow_executions_input_idx
    ON {schema}.workflow_executions USING gin (input jsonb_path_ops);
