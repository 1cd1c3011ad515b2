-- name: audit
-- The newest actions the filter keeps, one page. Each optional filter is folded away by the
-- planner when its value is NULL (the Reader plans statements with their values).
SELECT id, at, actor, db_user, action, execution_id, step_id, from_status, comment, details
  FROM {schema}.operator_actions
 WHERE id < %(before_id)s
   AND (%(action)s::text IS NULL OR action = %(action)s::text)
   AND (%(actor)s::text IS NULL OR actor = %(actor)s::text)
   AND (%(execution_id)s::bigint IS NULL OR execution_id = %(execution_id)s::bigint)
   AND (%(since_s)s::float8 IS NULL OR at >= now() - make_interval(secs => %(since_s)s::float8))
   AND (%(text)s::text IS NULL
        OR strpos(lower(concat_ws(' ', actor, comment, step_id, db_user)), lower(%(text)s::text)) > 0)
 ORDER BY id DESC
 LIMIT %(limit)s;
