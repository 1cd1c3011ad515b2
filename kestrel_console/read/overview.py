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
from kestrel_core.db import statements_beside

from .live_rows import LivePart, statement
from .session import Part, ReaderSession
from .workers import DEFAULT_BEAT_S, STUCK_LEASES, UNRUNNABLE, UNSERVED, WORKERS, worker_state
from .workers import SQL as WORKERS_SQL

SQL = statements_beside(__file__)

STATUS_COUNTS_PART = LivePart(
    "status_counts",
    (("status", "text"), ("count", "bigint")),
    ("running", "waiting", "paused", "finished"),
    SQL.status_counts,
)
STATUS_COUNTS = statement(STATUS_COUNTS_PART)

QUEUE_DEPTH_PART = LivePart(
    "queue_depth",
    (("workflow_name", "text"), ("status", "text"), ("count", "bigint")),
    ("running", "waiting", "paused", "ready", "finished"),
    SQL.queue_depth,
    order=SQL.queue_depth_order,
)
QUEUE_DEPTH = statement(QUEUE_DEPTH_PART)


_activity_ctes = SQL.activity_ctes
_activity_select = SQL.activity_select
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
    order=SQL.activity_order,
    ctes=_activity_ctes.replace("{t0}", SQL.activity_t0),
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
        return self._rows("pending_approvals", SQL.pending_approvals, {"limit": limit})

    def approvals_summary(self) -> dict[str, Any]:
        """How many approvals are pending and the age in seconds of the oldest (None if none)."""
        return self._rows("approvals_summary", SQL.approvals_summary)[0]

    def errors_since(self, seconds: int = 3600) -> int:
        """Executions that finished in error within the last ``seconds``."""
        return self._rows("errors_since", SQL.errors_since, {"seconds": seconds})[0]["count"]

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
            ("pending_approvals", SQL.pending_approvals, {"limit": limit}),
            ("approvals_summary", SQL.approvals_summary, None),
            ("workers", WORKERS, {"dead_after": self.dead_after_s, "recent": 3600.0, "beat": DEFAULT_BEAT_S}),
            ("unserved_workflows", UNSERVED, {"dead_after": self.dead_after_s}),
            ("unrunnable", UNRUNNABLE, {"dead_after": self.dead_after_s}),
            ("queues", WORKERS_SQL.queues, {"dead_after": self.dead_after_s}),
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
