-- description: Executions finished per minute over the last hour (success, error, cancelled), oldest minute first; minutes with none show 0
-- param: minutes integer = 60
WITH span AS (
    SELECT date_trunc('minute', now()) - (%(minutes)s::integer - 1) * interval '1 minute' AS first_minute,
           date_trunc('minute', now()) AS last_minute
), minutes AS (
    SELECT generate_series(first_minute, last_minute, '1 minute'::interval) AS minute FROM span
), finished AS (
    SELECT date_trunc('minute', e.finished_at) AS minute, e.status
      FROM workflow_executions e, span
     WHERE e.finished_at >= span.first_minute
)
SELECT m.minute,
       count(f.status) AS finished,
       count(*) FILTER (WHERE f.status = 'success') AS succeeded,
       count(*) FILTER (WHERE f.status = 'error') AS failed,
       count(*) FILTER (WHERE f.status = 'cancelled') AS cancelled
  FROM minutes m
  LEFT JOIN finished f ON f.minute = m.minute
 GROUP BY m.minute
 ORDER BY m.minute
