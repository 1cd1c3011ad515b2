"""The console's canned read queries: the one place the CLI and the TUI read Kestrel's tables.

Every query on a refresh path stays O(live rows) on any history: live statuses are read through
the engine's partial indexes (each predicate written with a literal status so the planner can
match it), finished executions per (workflow, status) come from ``execution_counts`` (kept
exact by triggers, migration 0003), and recent finishes through ``workflow_executions_finished_idx``.
``tests/console/test_queries.py`` checks with EXPLAIN that none of them scans
``workflow_executions`` sequentially on a 200k-row history.

Use one ``Reader`` per thread (or per TUI view): it holds one connection and serialises calls on
it with a lock, so sharing one between threads is safe but makes them wait for each other.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

import psycopg
from psycopg.rows import dict_row

from kestrel_core import KestrelError
from kestrel_core.connection import close_quietly, connect, unavailable
from kestrel_core.execution import STATUSES, TERMINAL_STATUSES
from kestrel_core.migrate import check_current
from kestrel_core.statements import check_schema_name, render

from .humanize import duration
from .workflow_match import describe_unknown_workflow, prefix_params

T = TypeVar("T")

APPLICATION_NAME = "kestrel-console"
LIVE_STATUSES = ("enqueued", "running", "waiting")
FINISHED_STATUSES = ("success", "error", "cancelled")
# A worker is alive while it has not stopped and beat within this many seconds.
DEFAULT_DEAD_AFTER_S = 30.0
# The executions list shows at most this many rows per page.
MAX_LIMIT = 10_000


class ReadTimeout(KestrelError):
    """A console query ran longer than the Reader's statement_timeout (it was cancelled)."""


# Session settings of the Reader's connection: a bounded wait per query, and read-only even
# outside explicit transactions (a belt: every statement here only reads).
SET_SESSION = """
SELECT set_config('statement_timeout', %(timeout)s, false),
       set_config('default_transaction_read_only', 'on', false)
"""

NOW = "SELECT now() AS now"

# -- counts --------------------------------------------------------------------------------

# Live statuses through their partial indexes; finished ones from the trigger-kept counters.
STATUS_COUNTS = """
SELECT 'enqueued' AS status, count(*) AS count FROM {schema}.workflow_executions WHERE status = 'enqueued'
UNION ALL
SELECT 'running', count(*) FROM {schema}.workflow_executions WHERE status = 'running'
UNION ALL
SELECT 'waiting', count(*) FROM {schema}.workflow_executions WHERE status = 'waiting'
UNION ALL
SELECT status, sum(n)::bigint FROM {schema}.execution_counts GROUP BY status
"""

QUEUE_DEPTH = """
SELECT workflow_name, status, count FROM (
    SELECT workflow_name, 'enqueued' AS status, count(*) AS count
      FROM {schema}.workflow_executions WHERE status = 'enqueued' GROUP BY workflow_name
    UNION ALL
    SELECT workflow_name, 'running', count(*)
      FROM {schema}.workflow_executions WHERE status = 'running' GROUP BY workflow_name
    UNION ALL
    SELECT workflow_name, 'waiting', count(*)
      FROM {schema}.workflow_executions WHERE status = 'waiting' GROUP BY workflow_name
    UNION ALL
    SELECT workflow_name, status, sum(n)::bigint
      FROM {schema}.execution_counts GROUP BY workflow_name, status HAVING sum(n) <> 0
) AS depth
ORDER BY workflow_name,
         array_position(ARRAY['enqueued', 'running', 'waiting', 'success', 'error', 'cancelled'], status)
"""

# -- live trouble ----------------------------------------------------------------------------

STUCK_LEASES = """
SELECT e.id, e.workflow_name, e.owner_id, e.lease_expires,
       extract(epoch FROM now() - e.lease_expires)::float8 AS expired_for_s,
       w.last_heartbeat AS owner_heartbeat,
       extract(epoch FROM now() - w.last_heartbeat)::float8 AS owner_heartbeat_age_s
  FROM {schema}.workflow_executions e
  LEFT JOIN {schema}.workers w ON w.worker_id = e.owner_id
 WHERE e.status = 'running' AND e.lease_expires < now()
 ORDER BY e.lease_expires, e.id
 LIMIT %(limit)s
"""

WORKERS = """
SELECT w.worker_id, w.hostname, w.pid, w.workflows, w.concurrency,
       coalesce(h.held, 0) AS held,
       w.started_at, w.last_heartbeat, w.stopped_at,
       extract(epoch FROM now() - w.last_heartbeat)::float8 AS heartbeat_age_s,
       (w.stopped_at IS NULL
        AND w.last_heartbeat > now() - make_interval(secs => %(dead_after)s)) AS alive
  FROM {schema}.workers w
  LEFT JOIN (SELECT owner_id, count(*) AS held
               FROM {schema}.workflow_executions WHERE status = 'running'
              GROUP BY owner_id) AS h ON h.owner_id = w.worker_id
 WHERE w.last_heartbeat > now() - make_interval(secs => %(recent)s) OR h.held > 0
 ORDER BY alive DESC, w.worker_id
"""

# Workflow names with enqueued rows that no live worker has registered.
UNSERVED = """
SELECT q.workflow_name, q.enqueued, q.oldest,
       extract(epoch FROM now() - q.oldest)::float8 AS oldest_age_s
  FROM (SELECT workflow_name, count(*) AS enqueued, min(created_at) AS oldest
          FROM {schema}.workflow_executions WHERE status = 'enqueued'
         GROUP BY workflow_name) AS q
 WHERE NOT EXISTS (
       SELECT 1 FROM {schema}.workers w
        WHERE q.workflow_name = ANY (w.workflows) AND w.stopped_at IS NULL
          AND w.last_heartbeat > now() - make_interval(secs => %(dead_after)s))
 ORDER BY q.workflow_name
"""

# Enqueued executions whose recorded version no live worker has (though some live worker
# runs the workflow: with none at all, UNSERVED says so).
UNRUNNABLE = """
SELECT v.workflow_name, v.version, v.enqueued, lv.versions AS live_versions
  FROM (SELECT workflow_name, version, count(*) AS enqueued
          FROM {schema}.workflow_executions WHERE status = 'enqueued' AND version IS NOT NULL
         GROUP BY workflow_name, version) AS v
  CROSS JOIN LATERAL (
        SELECT array_agg(DISTINCT w.versions[array_position(w.workflows, v.workflow_name)]
                         ORDER BY w.versions[array_position(w.workflows, v.workflow_name)]) AS versions
          FROM {schema}.workers w
         WHERE v.workflow_name = ANY (w.workflows) AND w.stopped_at IS NULL
           AND w.last_heartbeat > now() - make_interval(secs => %(dead_after)s)) AS lv
 WHERE lv.versions IS NOT NULL AND NOT (v.version = ANY (lv.versions))
 ORDER BY v.workflow_name, v.version
"""

# Every queue: declared limits, pause, depth and running (live statuses through their
# partial indexes), claims in the current rate window, live workers serving it. Queues that
# only executions name (enqueued with --queue, never declared) are listed too.
QUEUES = """
WITH depth AS (
    SELECT queue, count(*) AS enqueued, 0::bigint AS running
      FROM {schema}.workflow_executions WHERE status = 'enqueued' GROUP BY queue
    UNION ALL
    SELECT queue, 0, count(*) FROM {schema}.workflow_executions WHERE status = 'running' GROUP BY queue
), per_queue AS (
    SELECT queue, sum(enqueued)::bigint AS enqueued, sum(running)::bigint AS running FROM depth GROUP BY queue
), live AS (
    SELECT w.queues FROM {schema}.workers w
     WHERE w.stopped_at IS NULL AND w.last_heartbeat > now() - make_interval(secs => %(dead_after)s)
)
SELECT coalesce(q.name, d.queue) AS name, coalesce(q.paused, false) AS paused, q.paused_by, q.paused_at,
       coalesce(d.enqueued, 0) AS enqueued, coalesce(d.running, 0) AS running,
       q.concurrency, q.per_worker, q.rate_limit,
       extract(epoch FROM q.rate_period)::float8 AS rate_period_s,
       (SELECT count(*) FROM unnest(q.rate_starts) AS s(at) WHERE s.at > now() - q.rate_period) AS rate_used,
       coalesce(q.per_key, 1) AS per_key, coalesce(q.priority, 0) AS priority,
       coalesce(q.workflows, '{{}}') AS workflows,
       (SELECT count(*) FROM live WHERE live.queues IS NULL
                                    OR coalesce(q.name, d.queue) = ANY (live.queues)) AS live_workers
  FROM {schema}.queues q
  FULL JOIN per_queue d ON d.queue = q.name
 ORDER BY coalesce(q.priority, 0) DESC, 1
"""

PENDING_APPROVALS = """
SELECT w.execution_id, e.workflow_name, w.step_id, w.created_at AS waiting_since,
       extract(epoch FROM now() - w.created_at)::float8 AS waiting_s,
       w.wake_at AS deadline, w.details
  FROM {schema}.workflow_waits w
  JOIN {schema}.workflow_executions e ON e.id = w.execution_id
 WHERE w.resolved_at IS NULL AND w.kind = 'approval'
 ORDER BY w.created_at, w.execution_id, w.step_id
 LIMIT %(limit)s
"""

APPROVALS_SUMMARY = """
SELECT count(*) AS count, extract(epoch FROM now() - min(created_at))::float8 AS oldest_age_s
  FROM {schema}.workflow_waits
 WHERE resolved_at IS NULL AND kind = 'approval'
"""

ERRORS_SINCE = """
SELECT count(*) AS count FROM {schema}.workflow_executions
 WHERE finished_at >= now() - make_interval(secs => %(seconds)s) AND status = 'error'
"""

# Per bucket: executions created, first claimed and finished in it. A row created (or started)
# in the window is either live now (partial indexes) or finished after that (finished_at index).
ACTIVITY = """
WITH span AS (
    SELECT date_bin(make_interval(secs => %(bucket)s), now(), timestamptz '2000-01-01')
             - make_interval(secs => %(bucket)s * (%(buckets)s - 1)) AS t0
), recent AS MATERIALIZED (
    -- Enqueued rows matter only if created in the window; run_at >= created_at, so the
    -- enqueued index's run_at column skips the older backlog.
    SELECT e.created_at, e.started_at, NULL::timestamptz AS finished_at, e.status
      FROM {schema}.workflow_executions e, span
     WHERE e.status = 'enqueued' AND e.run_at >= span.t0
    UNION ALL
    SELECT created_at, started_at, NULL, status
      FROM {schema}.workflow_executions WHERE status = 'running'
    UNION ALL
    SELECT created_at, started_at, NULL, status
      FROM {schema}.workflow_executions WHERE status = 'waiting'
    UNION ALL
    SELECT created_at, started_at, finished_at, status
      FROM {schema}.workflow_executions, span
     WHERE finished_at >= span.t0 AND status IN ('success', 'error', 'cancelled')
), counts AS (
    -- Aggregate per bucket first: 4 small group-bys instead of joining every event.
    SELECT 'enqueued' AS kind, floor(date_part('epoch', r.created_at - s.t0) / %(bucket)s)::int AS i,
           count(*) AS n
      FROM recent r, span s WHERE r.created_at >= s.t0 GROUP BY 2
    UNION ALL
    SELECT 'started', floor(date_part('epoch', r.started_at - s.t0) / %(bucket)s)::int, count(*)
      FROM recent r, span s WHERE r.started_at >= s.t0 GROUP BY 2
    UNION ALL
    SELECT 'completed', floor(date_part('epoch', r.finished_at - s.t0) / %(bucket)s)::int, count(*)
      FROM recent r, span s WHERE r.finished_at >= s.t0 GROUP BY 2
    UNION ALL
    SELECT 'failed', floor(date_part('epoch', r.finished_at - s.t0) / %(bucket)s)::int, count(*)
      FROM recent r, span s WHERE r.finished_at >= s.t0 AND r.status = 'error' GROUP BY 2
)
SELECT b.i AS bucket,
       span.t0 + make_interval(secs => %(bucket)s * b.i) AS start,
       coalesce(sum(c.n) FILTER (WHERE c.kind = 'enqueued'), 0)::bigint AS enqueued,
       coalesce(sum(c.n) FILTER (WHERE c.kind = 'started'), 0)::bigint AS started,
       coalesce(sum(c.n) FILTER (WHERE c.kind = 'completed'), 0)::bigint AS completed,
       coalesce(sum(c.n) FILTER (WHERE c.kind = 'failed'), 0)::bigint AS failed
  FROM span CROSS JOIN generate_series(0, %(buckets)s - 1) AS b(i)
  LEFT JOIN counts c ON c.i = b.i
 GROUP BY b.i, span.t0
 ORDER BY b.i
"""

# -- executions ------------------------------------------------------------------------------

# Newest first. A NULL filter is folded away by the planner (the statement is planned with its
# values, never prepared), so a status filter meets its partial index. The workflow filter is a
# case-sensitive prefix (``workflow:remediate`` finds remediate-incident): a range on the
# (workflow_name, id) index, checked exactly by LIKE (see ``workflow_match.prefix_params``).
LIST_EXECUTIONS = """
SELECT e.id, e.workflow_name, e.status, e.created_at, e.started_at, e.finished_at,
       extract(epoch FROM now() - e.created_at)::float8 AS age_s,
       extract(epoch FROM coalesce(e.finished_at, now()) - e.started_at)::float8 AS duration_s,
       e.owner_id, cur.step_id AS current_step, e.error,
       (e.status = 'running' AND e.lease_expires < now()) AS lease_expired
  FROM {schema}.workflow_executions e
  LEFT JOIN LATERAL (
        SELECT step_id FROM (
            SELECT w.step_id, w.created_at AS at FROM {schema}.workflow_waits w
             WHERE w.execution_id = e.id AND w.resolved_at IS NULL
            UNION ALL
            (SELECT a.step_id, a.started_at FROM {schema}.step_attempts a
              WHERE a.execution_id = e.id ORDER BY a.started_at DESC LIMIT 1)
        ) AS s ORDER BY at DESC LIMIT 1
  ) AS cur ON true
 WHERE (%(status)s::text IS NULL OR e.status = %(status)s::text)
   AND (%(workflow_like)s::text IS NULL
        OR (e.workflow_name >= %(workflow_from)s::text
            AND (%(workflow_to)s::text IS NULL OR e.workflow_name < %(workflow_to)s::text)
            AND e.workflow_name LIKE %(workflow_like)s::text))
   AND (%(before_id)s::bigint IS NULL OR e.id < %(before_id)s::bigint)
   AND (%(text)s::text IS NULL
        OR strpos(lower(e.workflow_name), lower(%(text)s::text)) > 0
        OR strpos(lower(coalesce(e.owner_id, '')), lower(%(text)s::text)) > 0
        OR strpos(lower(coalesce(e.error, '')), lower(%(text)s::text)) > 0
        OR e.id::text = %(text)s::text)
 ORDER BY e.id DESC
 LIMIT %(limit)s OFFSET %(offset)s
"""

# Every workflow name the console knows of: finished executions (the trigger-kept counters),
# live ones (their partial indexes), and what workers registered. For "did you mean ...?".
WORKFLOW_NAMES = """
SELECT workflow_name FROM {schema}.execution_counts WHERE n <> 0
UNION SELECT workflow_name FROM {schema}.workflow_executions WHERE status = 'enqueued'
UNION SELECT workflow_name FROM {schema}.workflow_executions WHERE status = 'running'
UNION SELECT workflow_name FROM {schema}.workflow_executions WHERE status = 'waiting'
UNION SELECT unnest(workflows) FROM {schema}.workers
ORDER BY 1
"""

EXECUTION = """
SELECT e.id, e.workflow_name, e.status, e.input, e.output, e.error, e.owner_id,
       e.lease_expires, e.claim_epoch, e.priority, e.run_at, e.idempotency_key, e.claims,
       e.created_at, e.updated_at, e.started_at, e.finished_at,
       extract(epoch FROM now() - e.created_at)::float8 AS age_s,
       extract(epoch FROM coalesce(e.finished_at, now()) - e.started_at)::float8 AS duration_s,
       e.parent_id, e.deadline_at,
       (SELECT coalesce(jsonb_agg(jsonb_build_object('id', c.id, 'workflow', c.workflow_name,
                                                     'status', c.status) ORDER BY c.id), '[]')
          FROM (SELECT id, workflow_name, status FROM {schema}.workflow_executions
                 WHERE parent_id = e.id ORDER BY id LIMIT 500) AS c) AS children
  FROM {schema}.workflow_executions e WHERE e.id = %(id)s
"""

STEPS = """
SELECT step_id, output, error, started_at, created_at AS finished_at,
       extract(epoch FROM created_at - started_at)::float8 AS duration_s, attempts, owner_id
  FROM {schema}.operation_outputs WHERE execution_id = %(id)s
 ORDER BY started_at, created_at, step_id
"""

# Attempts and waits on one time axis.
TIMELINE = """
SELECT kind, step_id, attempt, started_at, finished_at,
       extract(epoch FROM finished_at - started_at)::float8 AS duration_s,
       outcome, error, owner_id, wake_at, decision, decided_by, decided_by_db_user, comment
  FROM (
    -- An attempt still open when its execution finished (cancelled mid-step, or its worker
    -- gone) ended with the execution: it is closed there, not shown running forever.
    SELECT 'step' AS kind, a.step_id, a.attempt, a.started_at,
           CASE WHEN a.outcome = 'running' AND e.finished_at IS NOT NULL
                THEN greatest(e.finished_at, a.started_at) ELSE a.finished_at END AS finished_at,
           CASE WHEN a.outcome <> 'running' OR e.finished_at IS NULL THEN a.outcome
                WHEN e.status = 'cancelled' THEN 'cancelled'
                ELSE 'abandoned' END AS outcome,
           a.error, a.owner_id, NULL::timestamptz AS wake_at, NULL::text AS decision,
           NULL::text AS decided_by, NULL::text AS decided_by_db_user, NULL::text AS comment,
           a.id AS seq
      FROM {schema}.step_attempts a
      JOIN {schema}.workflow_executions e ON e.id = a.execution_id
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
           NULL, NULL, w.wake_at, w.decision, w.decided_by, w.decided_by_db_user, w.comment, 0
      FROM {schema}.workflow_waits w
      JOIN {schema}.workflow_executions e ON e.id = w.execution_id
     WHERE w.execution_id = %(id)s
  ) AS t
 ORDER BY started_at, seq, step_id, attempt
"""

# The audit rows of one execution: the name the operator gave (actor) and the database role
# Postgres authenticated for the session that acted (db_user; NULL before migration 0005).
EXECUTION_ACTIONS = """
SELECT at, actor, db_user, action, step_id, comment, from_status
  FROM {schema}.operator_actions WHERE execution_id = %(id)s
 ORDER BY at, id
"""

# Everything "why isn't it running?" needs, about one execution, in one statement.
BLOCKER_FACTS = """
SELECT e.id, e.workflow_name, e.status, e.run_at, e.owner_id, e.lease_expires,
       extract(epoch FROM e.run_at - now())::float8 AS starts_in_s,
       extract(epoch FROM now() - e.lease_expires)::float8 AS lease_expired_for_s,
       ow.last_heartbeat AS owner_heartbeat, ow.stopped_at AS owner_stopped_at,
       extract(epoch FROM now() - ow.last_heartbeat)::float8 AS owner_heartbeat_age_s,
       (ow.worker_id IS NOT NULL) AS owner_known,
       wt.kind AS wait_kind, wt.step_id AS wait_step, wt.created_at AS wait_since,
       wt.wake_at AS wait_until,
       extract(epoch FROM wt.wake_at - now())::float8 AS wait_until_in_s,
       live.workers AS live_workers, live.slots AS live_slots, live.held AS live_held,
       ever.workers AS any_workers,
       e.queue, e.version, e.concurrency_key, lv.versions AS live_versions, lv.serving AS queue_workers,
       q.paused AS queue_paused, q.paused_by AS queue_paused_by, q.paused_at AS queue_paused_at,
       q.concurrency AS queue_concurrency, q.per_worker AS queue_per_worker, q.per_key AS queue_per_key,
       q.rate_limit AS queue_rate_limit, extract(epoch FROM q.rate_period)::float8 AS queue_rate_period_s,
       (SELECT count(*) FROM unnest(q.rate_starts) AS s(at) WHERE s.at > now() - q.rate_period) AS queue_rate_used,
       (SELECT extract(epoch FROM min(s.at) + q.rate_period - now())::float8
          FROM unnest(q.rate_starts) AS s(at) WHERE s.at > now() - q.rate_period) AS queue_rate_frees_in_s,
       qr.running AS queue_running, qr.key_running
  FROM {schema}.workflow_executions e
  LEFT JOIN {schema}.queues q ON q.name = e.queue
  CROSS JOIN LATERAL (
        SELECT count(*) AS running,
               count(*) FILTER (WHERE r.concurrency_key = e.concurrency_key) AS key_running
          FROM {schema}.workflow_executions r WHERE r.status = 'running' AND r.queue = e.queue) AS qr
  CROSS JOIN LATERAL (
        SELECT array_agg(DISTINCT w.versions[array_position(w.workflows, e.workflow_name)]) AS versions,
               count(*) FILTER (WHERE w.queues IS NULL OR e.queue = ANY (w.queues)) AS serving
          FROM {schema}.workers w
         WHERE e.workflow_name = ANY (w.workflows) AND w.stopped_at IS NULL
           AND w.last_heartbeat > now() - make_interval(secs => %(dead_after)s)) AS lv
  LEFT JOIN {schema}.workers ow ON ow.worker_id = e.owner_id
  LEFT JOIN LATERAL (
        SELECT w.kind, w.step_id, w.created_at, w.wake_at FROM {schema}.workflow_waits w
         WHERE w.execution_id = e.id AND w.resolved_at IS NULL
         ORDER BY w.created_at DESC LIMIT 1) AS wt ON true
  CROSS JOIN LATERAL (
        SELECT count(*) AS workers, coalesce(sum(w.concurrency), 0) AS slots,
               coalesce(sum((SELECT count(*) FROM {schema}.workflow_executions r
                              WHERE r.status = 'running' AND r.owner_id = w.worker_id)), 0) AS held
          FROM {schema}.workers w
         WHERE e.workflow_name = ANY (w.workflows) AND w.stopped_at IS NULL
           AND w.last_heartbeat > now() - make_interval(secs => %(dead_after)s)) AS live
  CROSS JOIN LATERAL (
        SELECT count(*) AS workers FROM {schema}.workers w
         WHERE e.workflow_name = ANY (w.workflows)) AS ever
 WHERE e.id = %(id)s
"""


def _seconds(value: float | None) -> str:
    """A duration for a sentence: '42 s', '3 m 04 s', '2 h 05 m', '3 d 04 h'."""
    return "?" if value is None else duration(max(value, 0.0), subsecond=False)


def _when(value: datetime | None) -> str:
    """'2024-05-01 12:00:03Z' for UTC, else with its offset."""
    if value is None:
        return "?"
    text = value.isoformat(sep=" ", timespec="seconds")
    offset = value.utcoffset()
    return text[: -len("+00:00")] + "Z" if offset is not None and not offset else text


def describe_blocker(f: dict[str, Any], *, dead_after_s: float = DEFAULT_DEAD_AFTER_S) -> str | None:
    """The one sentence that says why an execution is not moving, from BLOCKER_FACTS' row."""
    status = f["status"]
    name = f["workflow_name"]
    no_worker = (
        f"no live worker has registered workflow {name!r}"
        + ("" if f["any_workers"] else " (no worker ever did)")
        + ": start one that runs it (kestrel-console worker MODULE)"
    )
    if status == "enqueued":
        if f["starts_in_s"] is not None and f["starts_in_s"] > 0:
            return f"it is scheduled for later: not before {_when(f['run_at'])} (in {_seconds(f['starts_in_s'])})"
        if not f["live_workers"]:
            return no_worker
        queue_reason = describe_queue_blocker(f)
        if queue_reason:
            return queue_reason
        if f["live_slots"] and f["live_held"] >= f["live_slots"]:
            return (f"every slot of the {f['live_workers']} live worker(s) running {name!r} is busy "
                    f"({f['live_held']}/{f['live_slots']}): it waits for a free one")
        return None
    if status == "running":
        owner = f["owner_id"]
        expired = f["lease_expired_for_s"] is not None and f["lease_expired_for_s"] > 0
        if not f["owner_known"]:
            if expired:
                return (f"its lease is held by {owner!r}, which is not a registered worker, and "
                        f"expired {_seconds(f['lease_expired_for_s'])} ago: re-enqueue it (e)")
            return None
        hb_age = f["owner_heartbeat_age_s"]
        if f["owner_stopped_at"] is not None or (hb_age is not None and hb_age > dead_after_s) or expired:
            lease = (f"its lease expired {_seconds(f['lease_expired_for_s'])} ago" if expired
                     else f"its lease runs until {_when(f['lease_expires'])}")
            stopped = ("stopped" if f["owner_stopped_at"] is not None else "whose heartbeat stopped")
            return (f"the lease is held by worker {owner!r} {stopped} {_seconds(hb_age)} ago; "
                    f"{lease}: a live worker's sweeper re-enqueues it, or re-enqueue it now (e)")
        return None
    if status == "waiting":
        kind = f["wait_kind"]
        if kind == "approval":
            deadline = f" (deadline {_when(f['wait_until'])})" if f["wait_until"] is not None else ""
            return (f"it waits for approval {f['wait_step']!r} since {_when(f['wait_since'])}"
                    f"{deadline}: approve (a) or reject (x)")
        if kind == "sleep":
            if f["wait_until_in_s"] is not None and f["wait_until_in_s"] > 0:
                return (f"it sleeps ({f['wait_step']!r}) until {_when(f['wait_until'])} "
                        f"(in {_seconds(f['wait_until_in_s'])})")
            if not f["live_workers"]:
                return no_worker
            return None
        if kind == "child":
            return f"it waits for its child execution(s) to finish ({f['wait_step']!r}, since {_when(f['wait_since'])})"
        if kind == "event":
            return (f"it waits for an event ({f['wait_step']!r}, since {_when(f['wait_since'])}): "
                    "app.send_event(KEY, payload) wakes it")
        if not f["live_workers"]:
            return no_worker
        return None
    return None


def describe_queue_blocker(f: dict[str, Any]) -> str | None:
    """Why an enqueued execution with live workers for its workflow is not claimed: its
    version, its queue (paused, unserved, at a limit) or its concurrency key."""
    name, queue = f["workflow_name"], f.get("queue")
    have = sorted(v for v in (f.get("live_versions") or []) if v)
    if f.get("version") and f["version"] not in have:
        return (f"it needs version {f['version']} of {name!r}, live workers have "
                f"{', '.join(have) or 'no version of it'}: start a worker with that code "
                "(executions drain on the version they started under)")
    if queue is None:
        return None
    if f.get("queue_paused"):
        return (f"its queue {queue!r} is paused (by {f['queue_paused_by'] or '?'} at "
                f"{_when(f['queue_paused_at'])}): resume it (kestrel-console queue resume {queue})")
    if not f.get("queue_workers"):
        return (f"no live worker serves queue {queue!r} (workers started with --queues leave it out): "
                "start one that serves it")
    limit, running = f.get("queue_concurrency"), f.get("queue_running") or 0
    if limit is not None and running >= limit:
        return (f"queue {queue!r} is at its concurrency limit ({running}/{limit} running across all "
                "workers): it waits for one to finish")
    rate, used = f.get("queue_rate_limit"), f.get("queue_rate_used") or 0
    if rate is not None and used >= rate:
        return (f"queue {queue!r} reached its rate limit ({used} started in the last "
                f"{_seconds(f['queue_rate_period_s'])}, limit {rate}): the next start is possible "
                f"in {_seconds(f['queue_rate_frees_in_s'])}")
    per_key = f.get("queue_per_key") or 1
    if f.get("concurrency_key") is not None and (f.get("key_running") or 0) >= per_key:
        return (f"{f['key_running']} execution(s) with concurrency key {f['concurrency_key']!r} already "
                f"run in queue {queue!r} (limit {per_key} per key): it waits for them to finish")
    return None


class Reader:
    """Read-only access to one Kestrel schema for the console, on its own connection.

    The connection opens on first use (autocommit, ``application_name=kestrel-console``,
    ``statement_timeout`` set), is dropped when it breaks, and is reopened by the next call, so
    a console survives the server going away. Unreachable server: DatabaseUnavailable; a query
    slower than the timeout: ReadTimeout. Not meant to be shared between threads (calls are
    serialised by a lock if it is).
    """

    def __init__(
        self, dsn: str, *, schema: str = "kestrel", statement_timeout_ms: int = 2000,
        dead_after_s: float = DEFAULT_DEAD_AFTER_S, connect_timeout: int = 5,
    ) -> None:
        self.dsn = dsn
        self.schema = check_schema_name(schema)
        self.statement_timeout_ms = int(statement_timeout_ms)
        self.dead_after_s = float(dead_after_s)
        self.connect_timeout = connect_timeout
        self._conn: psycopg.Connection | None = None
        self._lock = threading.RLock()

    # -- connection ------------------------------------------------------------------------

    def _open(self) -> psycopg.Connection:
        # Never prepared: each statement is planned with its values, so NULL filters fold away
        # and a status literal meets its partial index.
        conn = connect(self.dsn, application_name=APPLICATION_NAME,
                       connect_timeout=self.connect_timeout, prepare=False)
        try:
            conn.execute(SET_SESSION, {"timeout": f"{self.statement_timeout_ms}ms"})
            check_current(conn, self.schema)
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            conn.read_only = True
        except psycopg.OperationalError as exc:  # the server went away right after accepting us
            conn.close()
            raise unavailable(self.dsn, exc) from None
        except BaseException:
            conn.close()
            raise
        return conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        close_quietly(conn)

    def close(self) -> None:
        """Close the connection (the next call opens a new one)."""
        with self._lock:
            self._drop()

    def cancel(self) -> None:
        """Ask the server to cancel the query running now, if any (safe from another thread:
        the TUI calls it when the view that asked is closed). The call raises ReadTimeout."""
        conn = self._conn
        if conn is not None and not conn.closed:
            try:
                conn.cancel_safe(timeout=2.0)
            except psycopg.Error:
                pass

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, what: str, fn: Callable[[psycopg.Connection], T]) -> T:
        """Run ``fn`` on the connection, reconnecting once if the server dropped it."""
        with self._lock:
            for retry in (True, False):
                fresh = self._conn is None or self._conn.closed
                if fresh:
                    self._drop()
                    self._conn = self._open()
                conn = self._conn
                try:
                    return fn(conn)
                except psycopg.errors.QueryCanceled as exc:
                    if "statement timeout" not in (exc.diag.message_primary or ""):
                        raise ReadTimeout(f"the console query {what!r} was cancelled") from None
                    raise ReadTimeout(
                        f"the console query {what!r} took longer than "
                        f"{self.statement_timeout_ms} ms and was cancelled: the database is "
                        "slow or a lock blocks it"
                    ) from None
                except psycopg.errors.UndefinedTable:
                    check_current(conn, self.schema)  # raises SchemaOutdated if that is why
                    raise
                except psycopg.OperationalError as exc:
                    broken = conn.broken or conn.closed
                    self._drop()
                    if broken and retry and not fresh:
                        continue  # the server restarted since the last call: one new connection
                    raise unavailable(self.dsn, exc) from None
            raise AssertionError("unreachable")

    def _rows(self, what: str, statement: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        query = render(statement, self.schema)

        def run(conn: psycopg.Connection) -> list[dict[str, Any]]:
            with conn.cursor(row_factory=dict_row) as cur:
                cur.execute(query, params)
                return cur.fetchall()

        return self._call(what, run)

    # -- counts ----------------------------------------------------------------------------

    def now(self) -> datetime:
        """The database's clock (ages and bars are measured against it, not the local one)."""
        return self._rows("now", NOW)[0]["now"]

    def status_counts(self) -> dict[str, int]:
        """Executions per status, every status present (zeros included)."""
        return _status_counts(self._rows("status_counts", STATUS_COUNTS))

    def queue_depth(self) -> list[dict[str, Any]]:
        """Executions per (workflow_name, status), live and finished; zero rows are left out."""
        return self._rows("queue_depth", QUEUE_DEPTH)

    # -- live trouble ----------------------------------------------------------------------

    def stuck_leases(self, limit: int = 500) -> list[dict[str, Any]]:
        """Running executions whose lease expired, oldest expiry first."""
        return self._rows("stuck_leases", STUCK_LEASES, {"limit": limit})

    def workers(self, recent_s: float = 3600.0) -> list[dict[str, Any]]:
        """Workers seen within ``recent_s`` or holding executions, alive ones first."""
        return self._rows("workers", WORKERS, {"dead_after": self.dead_after_s, "recent": recent_s})

    def unserved_workflows(self) -> list[dict[str, Any]]:
        """Workflow names with enqueued executions that no live worker has registered."""
        return self._rows("unserved_workflows", UNSERVED, {"dead_after": self.dead_after_s})

    def unrunnable(self) -> list[dict[str, Any]]:
        """(workflow, version) pairs enqueued that no live worker can run: it has other versions."""
        return self._rows("unrunnable", UNRUNNABLE, {"dead_after": self.dead_after_s})

    def queues(self) -> list[dict[str, Any]]:
        """Every queue: limits, paused, depth, running, rate window use, live workers serving it."""
        return self._rows("queues", QUEUES, {"dead_after": self.dead_after_s})

    def pending_approvals(self, limit: int = 500) -> list[dict[str, Any]]:
        """Approval gates waiting for a decision, oldest first."""
        return self._rows("pending_approvals", PENDING_APPROVALS, {"limit": limit})

    def approvals_summary(self) -> dict[str, Any]:
        """How many approvals are pending and the age in seconds of the oldest (None if none)."""
        return self._rows("approvals_summary", APPROVALS_SUMMARY)[0]

    def errors_since(self, seconds: int = 3600) -> int:
        """Executions that finished in error within the last ``seconds``."""
        return self._rows("errors_since", ERRORS_SINCE, {"seconds": seconds})[0]["count"]

    def activity(self, minutes: int = 15, bucket_s: int = 60) -> list[dict[str, Any]]:
        """Per bucket of ``bucket_s`` over the last ``minutes``, oldest first: executions
        enqueued, started (first claim), completed (any end) and failed (error)."""
        return self._rows("activity", ACTIVITY, _activity_params(minutes, bucket_s))

    # -- executions ------------------------------------------------------------------------

    def list_executions(
        self, *, status: str | None = None, workflow: str | None = None, text: str | None = None,
        limit: int = 50, offset: int = 0, before_id: int | None = None,
    ) -> list[dict[str, Any]]:
        """Executions newest first, filtered by status, workflow name and free text (which
        matches the workflow name, owner, error text, or the id exactly).

        Page with ``before_id`` (the last id shown: cheap on any history) or ``offset``.
        """
        if status is not None and status not in STATUSES:
            raise ValueError(f"unknown status {status!r}: use one of {', '.join(STATUSES)}")
        params = {
            "status": status, **prefix_params(workflow or None), "text": (text or None),
            "before_id": before_id, "limit": max(0, min(int(limit), MAX_LIMIT)),
            "offset": max(0, int(offset)),
        }
        return self._rows("list_executions", LIST_EXECUTIONS, params)

    def workflow_names(self) -> list[str]:
        """Every workflow name with executions (live or finished) or registered by a worker."""
        return [r["workflow_name"] for r in self._rows("workflow_names", WORKFLOW_NAMES)]

    def unknown_workflow(self, prefix: str) -> str | None:
        """None if some known workflow name starts with ``prefix``; else the sentence to show:
        ``no workflow named 'x'; did you mean remediate-incident?`` (closest names, if any)."""
        return describe_unknown_workflow(prefix, self.workflow_names())

    def execution(self, execution_id: int) -> dict[str, Any] | None:
        """Every column of one execution (plus age_s, duration_s), or None."""
        rows = self._rows("execution", EXECUTION, {"id": execution_id})
        return rows[0] if rows else None

    def steps(self, execution_id: int) -> list[dict[str, Any]]:
        """The execution's checkpoints (finished steps and decided waits), in start order."""
        return self._rows("steps", STEPS, {"id": execution_id})

    def timeline(self, execution_id: int) -> list[dict[str, Any]]:
        """Every step attempt and every wait of one execution, ordered by start.

        kind is 'step', 'sleep', 'approval', 'child' or 'event'; for steps outcome is
        running/success/error, for waits it is waiting, woke, approved, rejected, timed_out or
        cancelled.
        """
        return self._rows("timeline", TIMELINE, {"id": execution_id})

    def actions(self, execution_id: int) -> list[dict[str, Any]]:
        """The operator actions taken on one execution, oldest first (who claimed to act, and
        as which database role)."""
        return self._rows("actions", EXECUTION_ACTIONS, {"id": execution_id})

    def blocker(self, execution_id: int) -> str | None:
        """Why this execution is not moving, in one sentence; None if it is moving or done."""
        rows = self._rows("blocker", BLOCKER_FACTS, {"id": execution_id, "dead_after": self.dead_after_s})
        if not rows:
            return None
        return describe_blocker(rows[0], dead_after_s=self.dead_after_s)

    # -- the dashboard ---------------------------------------------------------------------

    def dashboard(self, *, minutes: int = 15, bucket_s: int = 60, errors_window_s: int = 3600) -> dict[str, Any]:
        """Everything the dashboard shows, read in one snapshot and one pipelined round trip.

        Keys: status_counts, queue_depth, stuck_leases, workers, unserved_workflows,
        approvals_summary, errors_last_hour, activity, elapsed_ms (time the reads took).
        """
        parts: list[tuple[str, str, dict[str, Any] | None]] = [
            ("status_counts", STATUS_COUNTS, None),
            ("queue_depth", QUEUE_DEPTH, None),
            ("stuck_leases", STUCK_LEASES, {"limit": 500}),
            ("workers", WORKERS, {"dead_after": self.dead_after_s, "recent": 3600.0}),
            ("unserved_workflows", UNSERVED, {"dead_after": self.dead_after_s}),
            ("unrunnable", UNRUNNABLE, {"dead_after": self.dead_after_s}),
            ("approvals_summary", APPROVALS_SUMMARY, None),
            ("errors_last_hour", ERRORS_SINCE, {"seconds": errors_window_s}),
            ("activity", ACTIVITY, _activity_params(minutes, bucket_s)),
        ]
        out = self._snapshot("dashboard", parts)
        out["status_counts"] = _status_counts(out["status_counts"])
        out["approvals_summary"] = out["approvals_summary"][0]
        out["errors_last_hour"] = out["errors_last_hour"][0]["count"]
        return out

    def overview(self, *, limit: int = 500) -> dict[str, Any]:
        """What ``kestrel-console status`` shows, read in one snapshot.

        Keys: queue_depth, stuck_leases, pending_approvals (the oldest ``limit``),
        approvals_summary (one row: count, oldest_age_s), workers, unserved_workflows, elapsed_ms.
        """
        parts: list[tuple[str, str, dict[str, Any] | None]] = [
            ("queue_depth", QUEUE_DEPTH, None),
            ("stuck_leases", STUCK_LEASES, {"limit": limit}),
            ("pending_approvals", PENDING_APPROVALS, {"limit": limit}),
            ("approvals_summary", APPROVALS_SUMMARY, None),
            ("workers", WORKERS, {"dead_after": self.dead_after_s, "recent": 3600.0}),
            ("unserved_workflows", UNSERVED, {"dead_after": self.dead_after_s}),
            ("unrunnable", UNRUNNABLE, {"dead_after": self.dead_after_s}),
            ("queues", QUEUES, {"dead_after": self.dead_after_s}),
        ]
        return self._snapshot("overview", parts)

    def _snapshot(self, what: str, parts: list[tuple[str, str, dict[str, Any] | None]]) -> dict[str, Any]:
        """Run several queries pipelined in one REPEATABLE READ READ ONLY transaction: one
        snapshot (the parts agree with each other), one round trip for the statements."""
        queries = [(key, render(statement, self.schema), params) for key, statement, params in parts]

        def run(conn: psycopg.Connection) -> dict[str, Any]:
            started = time.perf_counter()
            cursors = []
            with conn.pipeline(), conn.transaction():
                for key, query, params in queries:
                    cur = conn.cursor(row_factory=dict_row)
                    cur.execute(query, params)
                    cursors.append((key, cur))
            out: dict[str, Any] = {key: cur.fetchall() for key, cur in cursors}
            out["elapsed_ms"] = (time.perf_counter() - started) * 1000.0
            return out

        return self._call(what, run)

    # -- for tests and EXPLAIN -------------------------------------------------------------

    def refresh_statements(self, *, workflow: str = "remediate", text: str = "upstream"
                           ) -> dict[str, tuple[str, dict[str, Any] | None]]:
        """Every query a refresh path runs, with typical parameters (EXPLAIN-checked in tests).

        The free-text filter is the one exception to "O(live rows)": it walks the primary key
        newest first until a page is full (an index scan, never a sequential one).
        """
        live = {"dead_after": self.dead_after_s}
        first_page = {"status": None, **prefix_params(None), "text": None, "before_id": None,
                      "limit": 50, "offset": 0}
        return {
            "status_counts": (STATUS_COUNTS, None),
            "queue_depth": (QUEUE_DEPTH, None),
            "stuck_leases": (STUCK_LEASES, {"limit": 500}),
            "workers": (WORKERS, {**live, "recent": 3600.0}),
            "unserved_workflows": (UNSERVED, live),
            "unrunnable": (UNRUNNABLE, live),
            "queues": (QUEUES, live),
            "pending_approvals": (PENDING_APPROVALS, {"limit": 500}),
            "approvals_summary": (APPROVALS_SUMMARY, None),
            "errors_since": (ERRORS_SINCE, {"seconds": 3600}),
            "activity": (ACTIVITY, _activity_params(15, 60)),
            "list_executions": (LIST_EXECUTIONS, first_page),
            **{f"list_executions[status={s}]": (LIST_EXECUTIONS, {**first_page, "status": s})
               for s in STATUSES},
            "list_executions[workflow]": (LIST_EXECUTIONS, {**first_page, **prefix_params(workflow)}),
            "workflow_names": (WORKFLOW_NAMES, None),
            "list_executions[text]": (LIST_EXECUTIONS, {**first_page, "text": text}),
            "list_executions[next page]": (LIST_EXECUTIONS, {**first_page, "before_id": 100_000}),
        }


def _status_counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    counts = {status: 0 for status in STATUSES}
    for row in rows:
        counts[row["status"]] = int(row["count"] or 0)
    return counts


def _activity_params(minutes: int, bucket_s: int) -> dict[str, Any]:
    if bucket_s <= 0 or minutes <= 0:
        raise ValueError("minutes and bucket_s must be positive")
    buckets = max(1, -(-int(minutes) * 60 // int(bucket_s)))
    return {"bucket": int(bucket_s), "buckets": buckets}


__all__ = [
    "APPLICATION_NAME", "FINISHED_STATUSES", "LIVE_STATUSES", "ReadTimeout", "Reader",
    "TERMINAL_STATUSES", "describe_blocker", "describe_unknown_workflow",
]
