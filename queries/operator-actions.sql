-- description: The audit trail: every operator action (approve, reject, cancel, requeue, prune) in the period, newest first, optionally for one actor
-- param: since interval = '7 days'
-- param: actor text = null
--
-- actor is the name the operator gave (a claim: --operator, $KESTREL_OPERATOR, $USER);
-- db_user is the database role Postgres authenticated for the session that acted (NULL for
-- actions recorded before schema version 5).
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
