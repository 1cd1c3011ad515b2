"""What the dashboard and ``kestrel-console status`` read: counts per status and workflow,
pending approvals, recent errors and activity, each view in one snapshot (``_snapshot``).

Live statuses are read through the engine's partial indexes (each predicate written with a
literal status so the planner can match it); finished executions per (workflow, status) come
from ``execution_counts`` (kept exact by triggers, migration 0003), recent finishes through
``workflow_executions_finished_idx``, enqueued executions per workflow from
``executions_ready`` (migration 0015), the activity of closed minutes from
``activity_minutes`` (recorded by the workers, migration 0019).
"""

from __future__ import annotations

from typing import Any

from kestrel_core import STATUSES

from .live_rows import LivePart, statement
from .session import Part, ReaderSession
from .workers import DEFAULT_BEAT_S, QUEUES, STUCK_LEASES, UNRUNNABLE, UNSERVED, WORKERS, worker_state

# Executions per status: the enqueued ones counted from workflow_executions (an index-only
# count: a ready row may be stale), the running and waiting ones from the live rows.
STATUS_COUNTS_PART = LivePart(
    "status_counts",
    (("status", "text"), ("count", "bigint")),
    ("running", "waiting", "paused", "finished"),
    """
SELECT 'enqueued' AS status, count(*) AS count FROM {schema}.workflow_executions WHERE status = 'enqueued'
UNION ALL
SELECT 'running', count(*) FROM running
UNION ALL
SELECT 'waiting', count(*) FROM waiting
UNION ALL
SELECT 'paused', count(*) FROM paused
UNION ALL
SELECT status, sum(n)::bigint FROM finished GROUP BY status
""",
)
STATUS_COUNTS = statement(STATUS_COUNTS_PART)

# Enqueued executions are counted from executions_ready (migration 0015: one narrow row per
# enqueued execution, kept by triggers, ~200 rows a page), not from workflow_executions: that
# costs one heap fetch per enqueued row (measured in bench/README.md, "Console"). A ready row
# can outlive its execution's enqueued state (a claim rolled back in a race with a cancel,
# hand-written SQL, code older than 0015 left running across the upgrade: docs/development.md
# says to stop it); the next claim that meets it, or the workers' sweep within a minute
# (sweeper.drop_stale_ready), deletes it.
QUEUE_DEPTH_PART = LivePart(
    "queue_depth",
    (("workflow_name", "text"), ("status", "text"), ("count", "bigint")),
    ("running", "waiting", "paused", "ready", "finished"),
    """
SELECT workflow_name, status, count FROM (
    SELECT workflow_name, 'enqueued' AS status, sum(n)::bigint AS count FROM ready GROUP BY workflow_name
    UNION ALL
    SELECT workflow_name, 'running', count(*) FROM running GROUP BY workflow_name
    UNION ALL
    SELECT workflow_name, 'waiting', count(*) FROM waiting GROUP BY workflow_name
    UNION ALL
    SELECT workflow_name, 'paused', count(*) FROM paused GROUP BY workflow_name
    UNION ALL
    SELECT workflow_name, status, n FROM finished WHERE n <> 0
) AS depth
""",
    order="workflow_name, array_position({status_order}, status)",
)
QUEUE_DEPTH = statement(QUEUE_DEPTH_PART)

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

# Paused queues, for the dashboard (``status`` reads them with QUEUES): who paused each, how
# long ago, and how many executions it holds back (its ready rows, executions_ready_queue_idx).
PAUSED_QUEUES = """
SELECT q.name, q.paused_by, extract(epoch FROM now() - q.paused_at)::float8 AS paused_for_s,
       (SELECT count(*) FROM {schema}.executions_ready r WHERE r.queue = q.name) AS enqueued
  FROM {schema}.queues q
 WHERE q.paused
 ORDER BY q.name
 LIMIT %(limit)s
"""

ERRORS_SINCE = """
SELECT count(*) AS count FROM {schema}.workflow_executions
 WHERE finished_at >= now() - make_interval(secs => %(seconds)s) AND status = 'error'
"""

# Per bucket: executions created, first claimed and finished in it. Closed minutes come from
# activity_minutes (migration 0019), recorded once by the workers (fold_activity, the same
# counting as below); only what happened after the last recorded minute is read live. The
# recorded minutes count only if they run from the window's start without a gap (and the
# buckets are whole minutes): otherwise ``cut`` is the window's start and all is read live,
# as before the table existed (no worker has run yet, or none for a while).
# Live: a row created (or started) after the cut is either live now (partial indexes) or
# finished after that (finished_at index).
# The window's start. The index scans of ``recent`` spell it out rather than read it from the
# span CTE: the planner then estimates them with its value (now() and the parameters are known
# when the statement is planned) instead of guessing a third of the table for ``>= span.t0``.
# The guess made the plan cost past jit_above_cost on a big history, and JIT compilation then
# took longer than the refresh itself (bench/README.md, "Console"). The cut (a
# value the planner cannot see) is a second bound on the same index: it narrows the scan at
# run time and only lowers the estimate.
ACTIVITY_T0 = """date_bin(make_interval(secs => %(bucket)s), now(), timestamptz '2000-01-01')
             - make_interval(secs => %(bucket)s * (%(buckets)s - 1))"""
# The part's own CTEs and its body, with {t0} where ACTIVITY_T0 goes (lower case: not
# statements of their own), on the live rows ``running`` and ``waiting`` (live_rows.py).
_activity_ctes = """
span AS (
    SELECT {t0} AS t0
), folded AS (
    SELECT f.minute, f.enqueued, f.started, f.completed, f.failed
      FROM {schema}.activity_minutes f, span
     WHERE f.minute >= span.t0 AND %(bucket)s %% 60 = 0
), cut AS (
    SELECT CASE WHEN min(f.minute) = min(span.t0)
                 AND count(f.minute) = 1 + date_part('epoch', max(f.minute) - min(f.minute)) / 60
                THEN max(f.minute) + interval '1 minute'
                ELSE min(span.t0) END AS t1
      FROM span LEFT JOIN folded f ON true
), recent AS MATERIALIZED (
    -- Enqueued rows matter only if created after the cut; run_at >= created_at, so the
    -- enqueued index's run_at column skips the older backlog.
    SELECT e.created_at, e.started_at, NULL::timestamptz AS finished_at, e.status
      FROM {schema}.workflow_executions e
     WHERE e.status = 'enqueued' AND e.run_at >= {t0} AND e.run_at >= (SELECT t1 FROM cut)
       AND (e.created_at >= (SELECT t1 FROM cut) OR e.started_at >= (SELECT t1 FROM cut))
    UNION ALL
    SELECT l.created_at, l.started_at, NULL, 'running'
      FROM running AS l
     WHERE l.created_at >= (SELECT t1 FROM cut) OR l.started_at >= (SELECT t1 FROM cut)
    UNION ALL
    SELECT l.created_at, l.started_at, NULL, 'waiting'
      FROM waiting AS l
     WHERE l.created_at >= (SELECT t1 FROM cut) OR l.started_at >= (SELECT t1 FROM cut)
    UNION ALL
    SELECT created_at, started_at, finished_at, status
      FROM {schema}.workflow_executions
     WHERE finished_at >= {t0} AND finished_at >= (SELECT t1 FROM cut) AND status IN {terminal_statuses}
), counts AS (
    -- Aggregate per bucket first: 4 small group-bys instead of joining every event.
    SELECT 'enqueued' AS kind, floor(date_part('epoch', r.created_at - s.t0) / %(bucket)s)::int AS i,
           count(*) AS n
      FROM recent r, span s, cut c WHERE r.created_at >= c.t1 GROUP BY 2
    UNION ALL
    SELECT 'started', floor(date_part('epoch', r.started_at - s.t0) / %(bucket)s)::int, count(*)
      FROM recent r, span s, cut c WHERE r.started_at >= c.t1 GROUP BY 2
    UNION ALL
    SELECT 'completed', floor(date_part('epoch', r.finished_at - s.t0) / %(bucket)s)::int, count(*)
      FROM recent r, span s, cut c WHERE r.finished_at >= c.t1 GROUP BY 2
    UNION ALL
    SELECT 'failed', floor(date_part('epoch', r.finished_at - s.t0) / %(bucket)s)::int, count(*)
      FROM recent r, span s, cut c WHERE r.finished_at >= c.t1 AND r.status = 'error' GROUP BY 2
    UNION ALL
    SELECT k.kind, floor(date_part('epoch', f.minute - s.t0) / %(bucket)s)::int, k.n
      FROM folded f, span s, cut c,
           LATERAL (VALUES ('enqueued', f.enqueued), ('started', f.started),
                           ('completed', f.completed), ('failed', f.failed)) AS k(kind, n)
     WHERE f.minute < c.t1
)
"""
_activity_select = """
SELECT b.i AS bucket,
       span.t0 + make_interval(secs => %(bucket)s * b.i) AS start,
       coalesce(sum(c.n) FILTER (WHERE c.kind = 'enqueued'), 0)::bigint AS enqueued,
       coalesce(sum(c.n) FILTER (WHERE c.kind = 'started'), 0)::bigint AS started,
       coalesce(sum(c.n) FILTER (WHERE c.kind = 'completed'), 0)::bigint AS completed,
       coalesce(sum(c.n) FILTER (WHERE c.kind = 'failed'), 0)::bigint AS failed
  FROM span CROSS JOIN generate_series(0, %(buckets)s - 1) AS b(i)
  LEFT JOIN counts c ON c.i = b.i
 GROUP BY b.i, span.t0
"""
ACTIVITY_PART = LivePart(
    "activity",
    (
        ("bucket", "bigint"),
        ("start", "timestamptz"),
        ("enqueued", "bigint"),
        ("started", "bigint"),
        ("completed", "bigint"),
        ("failed", "bigint"),
    ),
    ("running", "waiting"),
    _activity_select,
    order="bucket",
    ctes=_activity_ctes.replace("{t0}", ACTIVITY_T0),
)
ACTIVITY = statement(ACTIVITY_PART)


class OverviewReads(ReaderSession):
    """Counts, approvals, errors, activity; the dashboard's and ``status``'s snapshots."""

    def status_counts(self) -> dict[str, int]:
        """Executions per status, every status present (zeros included)."""
        return counts_by_status(self._rows("status_counts", STATUS_COUNTS))

    def queue_depth(self) -> list[dict[str, Any]]:
        """Executions per (workflow_name, status), live and finished; zero rows are left out."""
        return self._rows("queue_depth", QUEUE_DEPTH)

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
        return self._rows("activity", ACTIVITY, activity_params(minutes, bucket_s))

    # -- ``kestrel-console status`` (the dashboard's refresh is in dashboard.py) -------------

    def overview(self, *, limit: int = 500) -> dict[str, Any]:
        """What ``kestrel-console status`` shows, read in one snapshot.

        Keys: queue_depth, stuck_leases, pending_approvals (the oldest ``limit``),
        approvals_summary (one row: count, oldest_age_s), workers, unserved_workflows, elapsed_ms.
        """
        parts: list[Part] = [
            ("queue_depth", QUEUE_DEPTH, None),
            ("stuck_leases", STUCK_LEASES, {"limit": limit}),
            ("pending_approvals", PENDING_APPROVALS, {"limit": limit}),
            ("approvals_summary", APPROVALS_SUMMARY, None),
            ("workers", WORKERS, {"dead_after": self.dead_after_s, "recent": 3600.0, "beat": DEFAULT_BEAT_S}),
            ("unserved_workflows", UNSERVED, {"dead_after": self.dead_after_s}),
            ("unrunnable", UNRUNNABLE, {"dead_after": self.dead_after_s}),
            ("queues", QUEUES, {"dead_after": self.dead_after_s}),
        ]
        out = self._snapshot("overview", parts)
        for row in out["workers"]:
            row["state"] = worker_state(row)
        return out


def counts_by_status(rows: list[dict[str, Any]]) -> dict[str, int]:
    """STATUS_COUNTS' rows as {status: count}, every status present (0 when it has no row)."""
    counts = {status: 0 for status in STATUSES}
    for row in rows:
        counts[row["status"]] = int(row["count"] or 0)
    return counts


def activity_params(minutes: int, bucket_s: int) -> dict[str, Any]:
    """ACTIVITY's parameters for the last ``minutes`` in buckets of ``bucket_s`` seconds."""
    if bucket_s <= 0 or minutes <= 0:
        raise ValueError("minutes and bucket_s must be positive")
    buckets = max(1, -(-int(minutes) * 60 // int(bucket_s)))
    return {"bucket": int(bucket_s), "buckets": buckets}
