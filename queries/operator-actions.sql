-- description: The audit trail: every operator action (approve, reject, cancel, requeue, prune) in the period, newest first, optionally for one actor. actor is the name the operator gave; db_user the database role Postgres authenticated (empty for actions before migration 5)
-- param: since interval = '7 days'
-- param: actor text = null
SELECT at,
       actor,
       db_user,
       action,
       execution_id,
       step_id,
       comment,
       from_status
  FROM operator_actions
 WHERE at > now() - %(since)s::interval
   AND (%(actor)s::text IS NULL OR actor = %(actor)s::text)
 ORDER BY at DESC, id DESC
