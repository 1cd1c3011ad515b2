-- admin/bulk.py: Bulk operator actions on a frozen set of executions.

-- name: freeze
SELECT {schema}.bulk_freeze(%s, %s, %s, %s, %s, %s);

-- name: begin
SELECT {schema}.bulk_begin(%s, %s, %s);

-- name: apply_chunk
SELECT {schema}.bulk_apply_chunk(%s, %s, %s, %s);

-- name: status
SELECT b.id, b.token, b.action, b.params, b.filter_text, b.total, b.created_by, b.created_at,
       b.expires_at, b.started_at, b.started_by, b.finished_at,
       count(*) FILTER (WHERE i.outcome = 'done') AS done,
       count(*) FILTER (WHERE i.outcome = 'refused') AS refused,
       count(*) FILTER (WHERE i.outcome IS NULL) AS "left"
  FROM {schema}.bulk_batches b JOIN {schema}.bulk_batch_items i ON i.batch_id = b.id
 WHERE b.token = %s
 GROUP BY b.id;

-- name: reasons
-- Refusals by reason: the message with its ids written '#', so that one rule is one line.
SELECT regexp_replace(reason, '(execution|id) [0-9]+', '\1 #', 'g') AS reason, count(*) AS n,
       (array_agg(execution_id ORDER BY execution_id))[1:5] AS examples
  FROM {schema}.bulk_batch_items
 WHERE batch_id = %s AND outcome = 'refused'
 GROUP BY 1 ORDER BY n DESC, reason LIMIT %s;

-- name: items
SELECT execution_id, outcome, reason, result, acted_at, acted_by
  FROM {schema}.bulk_batch_items
 WHERE batch_id = %s AND (%s::text IS NULL OR outcome IS NOT DISTINCT FROM nullif(%s::text, 'pending'))
 ORDER BY execution_id LIMIT %s;

-- name: batches
SELECT b.id, b.token, b.action, b.total, b.created_by, b.created_at, b.expires_at, b.started_at,
       b.finished_at, b.filter_text
  FROM {schema}.bulk_batches b ORDER BY b.id DESC LIMIT %s;
