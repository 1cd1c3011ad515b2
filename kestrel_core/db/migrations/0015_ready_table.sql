-- Kestrel schema, version 15: the claim walks a table of claimable work only (issue 22).
--
-- Under a held snapshot (a long report, an idle-in-transaction client, a replica with
-- hot_standby_feedback) vacuum removes nothing, and the claim's walk of the enqueued index of
-- workflow_executions crossed every dead entry the hold left: 0.12x the throughput after a
-- 5-minute hold (bench/README.md, "MVCC").
--
-- executions_ready holds one narrow row per execution that is 'enqueued' in
-- workflow_executions, in claim order: (neg_priority, run_at, id), the priority negated so
-- that "past this key" is one row comparison, one range scan. The claim (claim.py) DELETEs
-- from it, walking past the highest key its worker process claimed (the process's mark), and
-- moves the rows to 'running' in workflow_executions by id. workflow_executions stays the
-- record: the contract's SQL, the reports, the console and the operator functions read and
-- write it as before.
--
-- Triggers keep the ready table in step with the record, whoever writes it (enqueue, requeue,
-- the sweeps, woken waits, cancels, deadlines, old code during a rolling upgrade): a row
-- becoming 'enqueued' is inserted, one leaving it other than by a claim is deleted. A stale
-- ready row (its execution no longer enqueued: a claim by code older than this version, a
-- deleted execution) is harmless: the next claim that meets it deletes it and claims nothing.
-- The triggers' functions: their current definitions live in schema/functions/
-- (ready_inserted, ready_changed). They are created here in full, not as stubs: version 16
-- runs outside a transaction, so this one commits before the function files are applied, and
-- the triggers work from that commit on.
--
-- In place: creating the triggers takes a SHARE ROW EXCLUSIVE lock on workflow_executions
-- (writes wait, reads go on) until this transaction commits, so the copy of today's enqueued
-- rows below and the triggers see one consistent state; the copy is O(enqueued rows).

CREATE TABLE {schema}.executions_ready (
    id             bigint      NOT NULL,
    neg_priority   bigint      NOT NULL,  -- -priority: claim order ascending
    run_at         timestamptz NOT NULL,
    workflow_name  text        NOT NULL,
    queue          text        NOT NULL,
    version        text,
    concurrency_key text
) WITH (
    autovacuum_vacuum_scale_factor = 0.0,
    autovacuum_vacuum_threshold = 5000,
    autovacuum_analyze_scale_factor = 0.0,
    autovacuum_analyze_threshold = 5000,
    autovacuum_vacuum_cost_delay = 0
);
-- The fast claim's walk (claim.py) and the trigger's delete by key.
CREATE INDEX executions_ready_claim_idx ON {schema}.executions_ready (neg_priority, run_at, id);
-- The limited claim's walk, queue by queue (limited_claim.py).
CREATE INDEX executions_ready_queue_idx ON {schema}.executions_ready (queue, neg_priority, run_at, id);

CREATE FUNCTION {schema}.ready_inserted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO {schema}.executions_ready
           (id, neg_priority, run_at, workflow_name, queue, version, concurrency_key)
    SELECT id, -priority::bigint, run_at, workflow_name, queue, version, concurrency_key
      FROM new_rows
     WHERE status = 'enqueued';
    RETURN NULL;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.ready_inserted() FROM PUBLIC;
CREATE FUNCTION {schema}.ready_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM {schema}.executions_ready;
        RETURN NULL;
    END IF;
    IF OLD.status = 'enqueued' THEN
        DELETE FROM {schema}.executions_ready r
         WHERE r.ctid = ANY(ARRAY(
                SELECT s.ctid FROM {schema}.executions_ready s
                 WHERE s.neg_priority = -OLD.priority::bigint AND s.run_at = OLD.run_at AND s.id = OLD.id
                   FOR UPDATE SKIP LOCKED));
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.status = 'enqueued' THEN
        INSERT INTO {schema}.executions_ready
               (id, neg_priority, run_at, workflow_name, queue, version, concurrency_key)
        VALUES (NEW.id, -NEW.priority::bigint, NEW.run_at, NEW.workflow_name, NEW.queue, NEW.version,
                NEW.concurrency_key);
    END IF;
    RETURN NULL;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.ready_changed() FROM PUBLIC;

-- One statement per enqueue batch (a transition table), not one call per row.
CREATE TRIGGER executions_ready_insert
    AFTER INSERT ON {schema}.workflow_executions
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.ready_inserted();
-- Into or out of 'enqueued', except the claim's own move to 'running' (it deleted the ready
-- row itself), or a change of the claim key of an enqueued row. Claims, heartbeats and step
-- boundaries evaluate this WHEN clause only.
CREATE TRIGGER executions_ready_update
    AFTER UPDATE ON {schema}.workflow_executions
    FOR EACH ROW
    WHEN ((OLD.status = 'enqueued' OR NEW.status = 'enqueued') AND NEW.status <> 'running'
          AND (OLD.status IS DISTINCT FROM NEW.status OR OLD.priority IS DISTINCT FROM NEW.priority
               OR OLD.run_at IS DISTINCT FROM NEW.run_at OR OLD.queue IS DISTINCT FROM NEW.queue
               OR OLD.version IS DISTINCT FROM NEW.version
               OR OLD.workflow_name IS DISTINCT FROM NEW.workflow_name
               OR OLD.concurrency_key IS DISTINCT FROM NEW.concurrency_key))
    EXECUTE FUNCTION {schema}.ready_changed();
CREATE TRIGGER executions_ready_delete
    AFTER DELETE ON {schema}.workflow_executions
    FOR EACH ROW WHEN (OLD.status = 'enqueued')
    EXECUTE FUNCTION {schema}.ready_changed();
CREATE TRIGGER executions_ready_truncate
    AFTER TRUNCATE ON {schema}.workflow_executions
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.ready_changed();

INSERT INTO {schema}.executions_ready
       (id, neg_priority, run_at, workflow_name, queue, version, concurrency_key)
SELECT id, -priority::bigint, run_at, workflow_name, queue, version, concurrency_key
  FROM {schema}.workflow_executions
 WHERE status = 'enqueued';
