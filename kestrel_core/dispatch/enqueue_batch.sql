-- dispatch/enqueue_batch.py: Group commit for enqueues.

-- name: generic_plans
-- The writer connection plans ENQUEUE once, not at every batch. Postgres replans a prepared
-- statement for as long as its generic plan looks dearer than the custom ones; the generic
-- plan assumes 10 rows from each array, so a batch of fewer rows (8 callers: 8 rows) was
-- planned anew every time: 2.3 ms of planning for 0.7 ms of execution, most of a small batch's
-- server time (bench/README.md, "Ingestion"). The connection runs nothing but ENQUEUE, WAKE and
-- by_keys, whose generic plans are the custom ones without the row counts.
SET plan_cache_mode = force_generic_plan;
