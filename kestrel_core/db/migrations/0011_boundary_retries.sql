-- Kestrel schema, version 11: a step boundary retried after its commit went through (its
-- connection broke before the answer came back) recognises its own write (boundary.py).
--
-- 1. step_attempts holds one row per (execution_id, step_id, attempt). The retried statement
--    writes nothing twice: an attempt written with its end, or opened by this claim, is found
--    instead of inserted again. Rows a retry duplicated before this version are merged first
--    (the oldest row of each attempt is kept).
-- 2. operation_outputs.claim_epoch: the claim that wrote a step's checkpoint. With owner_id and
--    attempts it tells a retry that the checkpoint standing is its own write, not another's.

DELETE FROM {schema}.step_attempts a
 USING {schema}.step_attempts b
 WHERE a.execution_id = b.execution_id AND a.step_id = b.step_id AND a.attempt = b.attempt
   AND a.id > b.id;

CREATE UNIQUE INDEX step_attempts_attempt_key
    ON {schema}.step_attempts (execution_id, step_id, attempt);

ALTER TABLE {schema}.operation_outputs ADD COLUMN claim_epoch bigint;
