"""Live trouble and capacity: stuck leases, workers, workflows or versions no live worker runs,
and queues (limits, pause, depth, rate window use)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kestrel_core.db import statements_beside

from .live_rows import LivePart, statement
from .session import ReaderSession

SQL = statements_beside(__file__)


def live_versions_text(versions: Iterable[str | None] | None) -> str:
    """The versions of a workflow live workers have, for a sentence ('live workers have
    ...'): 'no version of it' when they run it without one."""
    return ", ".join(sorted(v for v in versions or [] if v)) or "no version of it"


def worker_state(row: dict[str, Any]) -> str:
    """'stopped', 'silent' (no beat within dead_after), 'late' (alive, but its beat is
    overdue: frozen, or its database writes stall) or 'alive'."""
    if row.get("stopped_at") is not None:
        return "stopped"
    if not row["alive"]:
        return "silent"
    age, beat = row.get("heartbeat_age_s"), row.get("beat_s") or DEFAULT_BEAT_S
    if age is not None and age > beat * LATE_AFTER_BEATS + 1.0:
        return "late"
    return "alive"


STUCK_LEASES_PART = LivePart(
    "stuck_leases",
    (
        ("id", "bigint"),
        ("workflow_name", "text"),
        ("owner_id", "text"),
        ("lease_expires", "timestamptz"),
        ("expired_for_s", "float8"),
        ("owner_heartbeat", "timestamptz"),
        ("owner_heartbeat_age_s", "float8"),
    ),
    ("running",),
    SQL.stuck_leases,
    order=SQL.stuck_leases_order,
    limit="%(limit)s",
)
STUCK_LEASES = statement(STUCK_LEASES_PART)

# A worker beats every lease/3 (kestrel_core.engine.worker) and renews the leases of what it holds to
# now() + lease at each beat, so its lease is the earliest of those leases minus its last beat;
# a worker holding nothing is assumed to run with the default lease (30 s: a beat every 10 s).
DEFAULT_BEAT_S = 10.0
# A beat this many intervals overdue (plus a second of slack) makes an alive worker "late": a
# frozen worker says so within ~15 s, not only once it is declared dead after dead_after.
LATE_AFTER_BEATS = 1.5

WORKERS_PART = LivePart(
    "workers",
    (
        ("worker_id", "text"),
        ("hostname", "text"),
        ("pid", "bigint"),
        ("workflows", "text[]"),
        ("concurrency", "bigint"),
        ("held", "bigint"),
        ("started_at", "timestamptz"),
        ("last_heartbeat", "timestamptz"),
        ("stopped_at", "timestamptz"),
        ("heartbeat_age_s", "float8"),
        ("alive", "boolean"),
        ("beat_s", "float8"),
    ),
    ("running",),
    SQL.workers,
    order=SQL.workers_order,
)
WORKERS = statement(WORKERS_PART)

# Which names and versions are enqueued is read from executions_ready (one narrow row per
# enqueued execution, kept by triggers, migration 0015), not from one heap row per enqueued
# execution. A ready row may be stale (its execution no longer enqueued) but none
# is ever missing, so the names it gives are a superset of the truth: the executions of the
# few names (or versions) in trouble are then counted from workflow_executions, and a name
# left with none is dropped. When nothing is in trouble, workflow_executions is not read.

UNSERVED_PART = LivePart(
    "unserved_workflows",
    (("workflow_name", "text"), ("enqueued", "bigint"), ("oldest", "timestamptz"), ("oldest_age_s", "float8")),
    ("ready",),
    SQL.unserved,
    order=SQL.unserved_order,
    ctes=SQL.unserved_ctes,
)
UNSERVED = statement(UNSERVED_PART)

UNRUNNABLE_PART = LivePart(
    "unrunnable",
    (("workflow_name", "text"), ("version", "text"), ("enqueued", "bigint"), ("live_versions", "text[]")),
    ("ready",),
    SQL.unrunnable,
    order=SQL.unrunnable_order,
    ctes=SQL.unrunnable_ctes,
)
UNRUNNABLE = statement(UNRUNNABLE_PART)


class WorkerReads(ReaderSession):
    """Workers, stuck leases, unserved workflows and versions, queues."""

    def stuck_leases(self, limit: int = 500) -> list[dict[str, Any]]:
        """Running executions whose lease expired, oldest expiry first."""
        return self._rows("stuck_leases", STUCK_LEASES, {"limit": limit})

    def workers(self, recent_s: float = 3600.0) -> list[dict[str, Any]]:
        """Workers seen within ``recent_s`` or holding executions, alive ones first."""
        rows = self._rows(
            "workers", WORKERS, {"dead_after": self.dead_after_s, "recent": recent_s, "beat": DEFAULT_BEAT_S}
        )
        for row in rows:
            row["state"] = worker_state(row)
        return rows

    def unserved_workflows(self) -> list[dict[str, Any]]:
        """Workflow names with enqueued executions that no live worker has registered."""
        return self._rows("unserved_workflows", UNSERVED, {"dead_after": self.dead_after_s})

    def unrunnable(self) -> list[dict[str, Any]]:
        """(workflow, version) pairs enqueued that no live worker can run: it has other versions."""
        return self._rows("unrunnable", UNRUNNABLE, {"dead_after": self.dead_after_s})

    def queues(self) -> list[dict[str, Any]]:
        """Every queue: limits, paused, depth, running, rate window use, live workers serving it."""
        return self._rows("queues", SQL.queues, {"dead_after": self.dead_after_s})
