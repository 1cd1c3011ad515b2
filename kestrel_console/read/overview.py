"""What the dashboard and ``kestrel-console status`` read: counts per status and workflow,
pending approvals, recent errors and activity, each view in one snapshot (``_snapshot``).

Live statuses are read through the engine's partial indexes (each predicate written with a
literal status so the planner can match it); finished executions per (workflow, status) come
from ``execution_counts`` (kept exact by triggers, migration 0003), recent finishes through
``workflow_executions_finished_idx``.
"""

from __future__ import annotations

from typing import Any

from kestrel_core.admin.execution import STATUSES

from .session import Part, ReaderSession
from .workers import DEFAULT_BEAT_S, QUEUES, STUCK_LEASES, UNRUNNABLE, UNSERVED, WORKERS, worker_state

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


class OverviewReads(ReaderSession):
    """Counts, approvals, errors, activity; the dashboard's and ``status``'s snapshots."""

    def status_counts(self) -> dict[str, int]:
        """Executions per status, every status present (zeros included)."""
        return _status_counts(self._rows("status_counts", STATUS_COUNTS))

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
        return self._rows("activity", ACTIVITY, _activity_params(minutes, bucket_s))

    # -- the dashboard ---------------------------------------------------------------------

    def dashboard(self, *, minutes: int = 15, bucket_s: int = 60, errors_window_s: int = 3600) -> dict[str, Any]:
        """Everything the dashboard shows, read in one snapshot and one pipelined round trip.

        Keys: status_counts, queue_depth, stuck_leases, workers, unserved_workflows,
        approvals_summary, errors_last_hour, activity, elapsed_ms (time the reads took).
        """
        parts: list[Part] = [
            ("status_counts", STATUS_COUNTS, None),
            ("queue_depth", QUEUE_DEPTH, None),
            ("stuck_leases", STUCK_LEASES, {"limit": 500}),
            ("workers", WORKERS, {"dead_after": self.dead_after_s, "recent": 3600.0, "beat": DEFAULT_BEAT_S}),
            ("unserved_workflows", UNSERVED, {"dead_after": self.dead_after_s}),
            ("unrunnable", UNRUNNABLE, {"dead_after": self.dead_after_s}),
            ("approvals_summary", APPROVALS_SUMMARY, None),
            ("errors_last_hour", ERRORS_SINCE, {"seconds": errors_window_s}),
            ("activity", ACTIVITY, _activity_params(minutes, bucket_s)),
        ]
        out = self._snapshot("dashboard", parts)
        out["status_counts"] = _status_counts(out["status_counts"])
        for row in out["workers"]:
            row["state"] = worker_state(row)
        out["approvals_summary"] = out["approvals_summary"][0]
        out["errors_last_hour"] = out["errors_last_hour"][0]["count"]
        return out

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
