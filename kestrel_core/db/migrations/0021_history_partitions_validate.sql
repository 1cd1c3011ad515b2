-- kestrel: outside transaction
-- Kestrel schema, version 21: partitioned history, second of three steps (issue 22).
--
-- VALIDATE the first range's CHECK constraints (version 20) and build step_attempts' future
-- primary key (execution_id, id) concurrently: SHARE UPDATE EXCLUSIVE locks, writes go on
-- while the tables are scanned. Version 22 then attaches these tables without a scan.
ALTER TABLE {schema}.workflow_executions VALIDATE CONSTRAINT workflow_executions_p0_bound;
ALTER TABLE {schema}.operation_outputs VALIDATE CONSTRAINT operation_outputs_p0_bound;
ALTER TABLE {schema}.step_attempts VALIDATE CONSTRAINT step_attempts_p0_bound;
ALTER TABLE {schema}.workflow_waits VALIDATE CONSTRAINT workflow_waits_p0_bound;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS step_attempts_p0_pkey
    ON {schema}.step_attempts (execution_id, id);
