"""What an on-call team watches, read once for ``kestrel-console metrics`` (the Prometheus
endpoint) and ``status --format json --all``, so that both give the same numbers.

Every part is O(live rows), never a scan of the history: enqueued executions from
``executions_ready`` (one narrow row each, migration 0015), running and waiting ones through
their partial indexes, finished ones per (workflow, status) from ``execution_counts`` (kept
exact by triggers, folded by the workers: migrations 0003/0010, ``fold_finished_counts``),
pending approvals through ``workflow_waits_pending_approval_idx``, workers and queues from
their small tables. The two parts that count what finished (``finished_since``,
``attempts_since``) read only the rows that finished in a window the caller bounds, through
``workflow_executions_finished_idx`` and ``step_attempts_finished_idx``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from kestrel_core.db import statements_beside

from .overview import SQL as OVERVIEW_SQL
from .replica import SQL as REPLICA_SQL
from .replica import ReplicaReads, ReplicaState, on_data_clock
from .session import Part
from .workers import DEFAULT_BEAT_S, WORKERS, worker_state

SQL = statements_beside(__file__)

UNTIL = on_data_clock(SQL.until) + SQL.until_now_column
FINISHED_SINCE = on_data_clock(SQL.finished_since)
ATTEMPTS_SINCE = on_data_clock(SQL.attempts_since)


class OperationsReads(ReplicaReads):
    """The on-call snapshot (``operations``) and the windows of what finished since a mark."""

    def operations(
        self,
        *,
        since: datetime | None = None,
        settle_s: float = 0.0,
        window_s: float = 600.0,
        bounds: Sequence[float] = (),
    ) -> dict[str, Any]:
        """Every part in one snapshot. Keys: ready, running, waiting, paused, finished, approvals
        (per workflow), approvals_summary (one row), workers (each with its ``state``), queues,
        until (one row: the end of the window, and now), replica (a ``ReplicaState``: the
        read server's lag), elapsed_ms.

        With ``since``: also finished_since (executions that finished after it, up to
        ``until``, at most ``window_s`` seconds of them) and, with histogram ``bounds``,
        attempts_since (step attempts, bucketed).
        """
        settle = {"settle": float(settle_s)}
        parts: list[Part] = [
            ("ready", SQL.ready, None),
            ("running", SQL.running, None),
            ("waiting", SQL.waiting, None),
            ("paused", SQL.paused, None),
            ("finished", SQL.finished, None),
            ("approvals", SQL.pending_approvals_by_workflow, None),
            ("approvals_summary", OVERVIEW_SQL.approvals_summary, None),
            ("workers", WORKERS, {"dead_after": self.dead_after_s, "recent": 3600.0, "beat": DEFAULT_BEAT_S}),
            ("queue_limits", SQL.queue_limits, None),
            ("live_workers", SQL.live_workers, {"dead_after": self.dead_after_s}),
            ("until", UNTIL, settle),
            ("replica", REPLICA_SQL.replica_state, None),
        ]
        if since is not None:
            window = {"since": since, "window": float(window_s), **settle}
            parts.append(("finished_since", FINISHED_SINCE, window))
            if bounds:
                parts.append(("attempts_since", ATTEMPTS_SINCE, {**window, "bounds": list(bounds)}))
        out = self._snapshot("operations", parts)
        for row in out["workers"]:
            row["state"] = worker_state(row)
        out["until"] = out["until"][0]
        out["approvals_summary"] = out["approvals_summary"][0]
        out["replica"] = ReplicaState.from_row(out["replica"][0])
        out["queues"] = queue_rows(out)
        return out


def queue_rows(ops: dict[str, Any]) -> list[dict[str, Any]]:
    """Every queue, declared or only named by executions (enqueued with ``queue=``): limits,
    pause, enqueued and running, and the live workers that can run something of it (they claim
    from every queue or from this one and, when code binds workflows to it, registered one of
    them: the rule of ``workers.QUEUES``). Highest priority first, then by name."""
    enqueued: dict[str, int] = {}
    running: dict[str, int] = {}
    for r in ops["ready"]:
        enqueued[r["queue"]] = enqueued.get(r["queue"], 0) + int(r["enqueued"])
    for r in ops["running"]:
        running[r["queue"]] = running.get(r["queue"], 0) + int(r["running"])
    declared = {q["name"]: q for q in ops["queue_limits"]}
    rows = []
    for name in sorted(declared.keys() | enqueued.keys() | running.keys()):
        q = declared.get(name, {})
        bound = set(q.get("workflows") or ())
        rows.append(
            {
                "name": name,
                "paused": bool(q.get("paused", False)),
                "paused_by": q.get("paused_by"),
                "enqueued": enqueued.get(name, 0),
                "running": running.get(name, 0),
                "concurrency": q.get("concurrency"),
                "per_worker": q.get("per_worker"),
                "rate_limit": q.get("rate_limit"),
                "rate_period_s": q.get("rate_period_s"),
                "rate_used": int(q.get("rate_used") or 0),
                "priority": int(q.get("priority") or 0),
                "live_workers": sum(
                    1
                    for w in ops["live_workers"]
                    if (w["queues"] is None or name in w["queues"]) and (not bound or bound & set(w["workflows"] or ()))
                ),
            }
        )
    rows.sort(key=lambda r: -r["priority"])  # stable: by name within a priority
    return rows


class OperationsReader(OperationsReads):
    """A reader of the on-call snapshot alone (the metrics endpoint's, and ``status --all``'s)."""


def summary(ops: dict[str, Any]) -> dict[str, Any]:
    """The snapshot as ``status --format json --all`` prints it: one object, the numbers the
    metrics endpoint exports (docs/metrics.md names the metric of each)."""
    approvals = ops["approvals_summary"]
    replica = ops.get("replica")
    return {
        # Where it was read: null on a primary, else the replica's lag (--read-dsn).
        "replica": None
        if replica is None or not replica.replica
        else {"lag_s": replica.lag_s, "streaming": replica.streaming},
        "queues": [
            {
                "name": q["name"],
                "paused": bool(q["paused"]),
                "paused_by": q["paused_by"],
                "enqueued": int(q["enqueued"]),
                "running": int(q["running"]),
                "concurrency": q["concurrency"],
                "per_worker": q["per_worker"],
                "rate_limit": q["rate_limit"],
                "rate_period_s": q["rate_period_s"],
                "rate_used": int(q["rate_used"] or 0),
                "live_workers": int(q["live_workers"]),
            }
            for q in ops["queues"]
        ],
        "paused_queues": sorted(q["name"] for q in ops["queues"] if q["paused"]),
        # Pausing one execution is not built yet: none is ever paused.
        "paused_executions": 0,
        "enqueued": [
            {
                "queue": r["queue"],
                "workflow_name": r["workflow_name"],
                "enqueued": int(r["enqueued"]),
                "due": int(r["due"]),
                "oldest_due_age_s": float(r["oldest_due_age_s"]),
            }
            for r in ops["ready"]
        ],
        "running": [
            {
                "queue": r["queue"],
                "workflow_name": r["workflow_name"],
                "running": int(r["running"]),
                "stuck_leases": int(r["stuck"]),
            }
            for r in ops["running"]
        ],
        "waiting": [{"workflow_name": r["workflow_name"], "waiting": int(r["waiting"])} for r in ops["waiting"]],
        "paused": [{"workflow_name": r["workflow_name"], "paused": int(r["paused"])} for r in ops["paused"]],
        "finished": [
            {"workflow_name": r["workflow_name"], "status": r["status"], "count": int(r["count"])}
            for r in ops["finished"]
        ],
        "stuck_leases": sum(int(r["stuck"]) for r in ops["running"]),
        "pending_approvals": {
            "count": int(approvals["count"] or 0),
            "oldest_age_s": approvals["oldest_age_s"],
            "by_workflow": [
                {
                    "workflow_name": r["workflow_name"],
                    "count": int(r["pending"]),
                    "oldest_age_s": float(r["oldest_age_s"]),
                }
                for r in ops["approvals"]
            ],
        },
        "workers": [
            {
                "worker_id": w["worker_id"],
                "hostname": w["hostname"],
                "pid": w["pid"],
                "state": w["state"],
                "held": int(w["held"]),
                "concurrency": w["concurrency"],
                "heartbeat_age_s": w["heartbeat_age_s"],
                "workflows": list(w["workflows"] or []),
            }
            for w in ops["workers"]
        ],
    }
