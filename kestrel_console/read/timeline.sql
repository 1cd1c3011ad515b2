-- name: timeline
-- Attempts and waits on one time axis.
SELECT kind, step_id, attempt, started_at, finished_at,
       extract(epoch FROM finished_at - started_at)::float8 AS duration_s,
       outcome, error, owner_id, wake_at, decision, decided_by, decided_by_db_user, comment, audited
  FROM (
    -- An attempt is closed in storage by its worker, or by the transition that ended its claim
    -- (cancelled, abandoned: kestrel_core.lifecycle; migration 0034 closed the older ones):
    -- read as stored.
    SELECT 'step' AS kind, a.step_id, a.attempt, a.started_at, a.finished_at, a.outcome,
           a.error, a.owner_id, NULL::timestamptz AS wake_at, NULL::text AS decision,
           NULL::text AS decided_by, NULL::text AS decided_by_db_user, NULL::text AS comment,
           NULL::boolean AS audited, a.id AS seq
      FROM {schema}.step_attempts a
     WHERE a.execution_id = %(id)s
    UNION ALL
    SELECT w.kind, w.step_id, NULL, w.created_at, w.resolved_at,
           CASE WHEN w.resolved_at IS NULL THEN 'waiting'
                WHEN w.decision IS NOT NULL THEN w.decision
                WHEN w.kind = 'sleep' AND e.status <> 'cancelled'
                     AND w.resolved_at >= coalesce(w.wake_at, w.resolved_at) THEN 'woke'
                -- child and event waits: woken, or timed out; closed with the execution otherwise
                WHEN w.kind IN ('child', 'event') AND w.resolved_at < coalesce(e.finished_at, 'infinity')
                THEN CASE WHEN w.resolved_at >= coalesce(w.wake_at, 'infinity') THEN 'timed_out' ELSE 'woke' END
                ELSE 'cancelled' END,
           NULL, NULL, w.wake_at, w.decision, w.decided_by, w.decided_by_db_user, w.comment,
           -- A human decision is audited when an operator_actions row matches it: its gate,
           -- its verb, its actor and its database role (the view approval_audits, migration
           -- 0024, the one place this is decided). One written or edited any other way (by
           -- hand, as the owner) is shown as such.
           (SELECT a.audited FROM {schema}.approval_audits a
             WHERE a.execution_id = w.execution_id AND a.step_id = w.step_id),
           0
      FROM {schema}.workflow_waits w
      JOIN {schema}.workflow_executions e ON e.id = w.execution_id
     WHERE w.execution_id = %(id)s
  ) AS t
 ORDER BY started_at, seq, step_id, attempt;

-- name: execution_actions
-- The audit rows of one execution: the name the operator gave (actor) and the database role
-- Postgres authenticated for the session that acted (db_user; NULL before migration 0005).
SELECT at, actor, db_user, action, step_id, comment, from_status
  FROM {schema}.operator_actions WHERE execution_id = %(id)s
 ORDER BY at, id;
