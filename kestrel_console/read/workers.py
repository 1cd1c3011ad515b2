"""Live trouble and capacity: stuck leases, workers, workflows or versions no live worker runs,
and queues (limits, pause, depth, rate window use)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .live_rows import LivePart, statement
from .session import ReaderSession


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
    """
SELECT e.id, e.workflow_name, e.owner_id, e.lease_expires,
       extract(epoch FROM now() - e.lease_expires)::float8 AS expired_for_s,
       w.last_heartbeat AS owner_heartbeat,
       extract(epoch FROM now() - w.last_heartbeat)::float8 AS owner_heartbeat_age_s
  FROM running e
  LEFT JOIN {schema}.workers w ON w.worker_id = e.owner_id
 WHERE e.lease_expires < now()
""",
    order="lease_expires, id",
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
    """
SELECT w.worker_id, w.hostname, w.pid, w.workflows, w.concurrency,
       coalesce(h.held, 0) AS held,
       w.started_at, w.last_heartbeat, w.stopped_at,
       extract(epoch FROM now() - w.last_heartbeat)::float8 AS heartbeat_age_s,
       {worker_is_live} AS alive,
       -- (greatest ignores NULLs: it goes outside the coalesce)
       greatest(coalesce(extract(epoch FROM h.first_lease - w.last_heartbeat)::float8 / 3, %(beat)s),
                0.1) AS beat_s
  FROM {schema}.workers w
  LEFT JOIN (SELECT owner_id, count(*) AS held, min(lease_expires) AS first_lease
               FROM running GROUP BY owner_id) AS h ON h.owner_id = w.worker_id
 WHERE w.last_heartbeat > now() - make_interval(secs => %(recent)s) OR h.held > 0
""",
    order="alive DESC, worker_id",
)
WORKERS = statement(WORKERS_PART)

# Which names and versions are enqueued is read from executions_ready (one narrow row per
# enqueued execution, kept by triggers, migration 0015), not from one heap row per enqueued
# execution. A ready row may be stale (its execution no longer enqueued) but none
# is ever missing, so the names it gives are a superset of the truth: the executions of the
# few names (or versions) in trouble are then counted from workflow_executions, and a name
# left with none is dropped. When nothing is in trouble, workflow_executions is not read.

# Workflow names with enqueued rows that no live worker has registered; how long the oldest
# has waited since it was last enqueued (every move to 'enqueued' sets updated_at: a requeue,
# a decision, an event), not since it was created: one re-enqueued 15 minutes ago has waited
# 15 minutes, whatever its age: the operator asks how long it has been stuck.
UNSERVED_PART = LivePart(
    "unserved_workflows",
    (("workflow_name", "text"), ("enqueued", "bigint"), ("oldest", "timestamptz"), ("oldest_age_s", "float8")),
    ("ready",),
    """
SELECT e.workflow_name, count(*) AS enqueued, min(e.updated_at) AS oldest,
       extract(epoch FROM now() - min(e.updated_at))::float8 AS oldest_age_s
  FROM {schema}.workflow_executions e
 WHERE EXISTS (SELECT 1 FROM unserved_names)  -- checked once, before the scan
   AND e.status = 'enqueued' AND e.workflow_name IN (SELECT workflow_name FROM unserved_names)
 GROUP BY e.workflow_name
""",
    order="workflow_name",
    ctes="""
unserved_names AS MATERIALIZED (
    SELECT r.workflow_name FROM (SELECT DISTINCT workflow_name FROM ready) AS r
     WHERE NOT EXISTS (SELECT 1 FROM {schema}.workers w WHERE r.workflow_name = ANY (w.workflows) AND {worker_is_live})
)
""",
)
UNSERVED = statement(UNSERVED_PART)

# Enqueued executions whose recorded version no live worker has (though some live worker
# runs the workflow: with none at all, UNSERVED says so).
UNRUNNABLE_PART = LivePart(
    "unrunnable",
    (("workflow_name", "text"), ("version", "text"), ("enqueued", "bigint"), ("live_versions", "text[]")),
    ("ready",),
    """
SELECT e.workflow_name, e.version, count(*) AS enqueued, min(v.live_versions) AS live_versions
  FROM {schema}.workflow_executions e
  JOIN unrunnable_versions v ON v.workflow_name = e.workflow_name AND v.version = e.version
 WHERE EXISTS (SELECT 1 FROM unrunnable_versions)  -- checked once, before the scan
   AND e.status = 'enqueued'
 GROUP BY e.workflow_name, e.version
""",
    order="workflow_name, version",
    ctes="""
unrunnable_versions AS MATERIALIZED (
    SELECT v.workflow_name, v.version, lv.versions AS live_versions
      FROM ready AS v
      CROSS JOIN LATERAL (
            SELECT array_agg(DISTINCT w.versions[array_position(w.workflows, v.workflow_name)]
                             ORDER BY w.versions[array_position(w.workflows, v.workflow_name)]) AS versions
              FROM {schema}.workers w
             WHERE v.workflow_name = ANY (w.workflows) AND {worker_is_live}) AS lv
     WHERE v.version IS NOT NULL AND lv.versions IS NOT NULL AND NOT (v.version = ANY (lv.versions))
)
""",
)
UNRUNNABLE = statement(UNRUNNABLE_PART)

# Every queue: declared limits, pause, depth and running (live statuses through their
# partial indexes), claims in the current rate window, live workers serving it. Queues that
# only executions name (enqueued with --queue, never declared) are listed too. Enqueued ones
# are counted from executions_ready, as in QUEUE_DEPTH (overview.py).
QUEUES = """
WITH depth AS (
    SELECT queue, count(*) AS enqueued, 0::bigint AS running
      FROM {schema}.executions_ready GROUP BY queue
    UNION ALL
    SELECT queue, 0, count(*) FROM {schema}.workflow_executions WHERE status = 'running' GROUP BY queue
), per_queue AS (
    SELECT queue, sum(enqueued)::bigint AS enqueued, sum(running)::bigint AS running FROM depth GROUP BY queue
), live AS (
    SELECT w.queues, w.workflows FROM {schema}.workers w
     WHERE {worker_is_live}
)
SELECT coalesce(q.name, d.queue) AS name, coalesce(q.paused, false) AS paused, q.paused_by, q.paused_at,
       coalesce(d.enqueued, 0) AS enqueued, coalesce(d.running, 0) AS running,
       q.concurrency, q.per_worker, q.rate_limit,
       extract(epoch FROM q.rate_period)::float8 AS rate_period_s,
       (SELECT count(*) FROM unnest(q.rate_starts) AS s(at) WHERE s.at > now() - q.rate_period) AS rate_used,
       coalesce(q.per_key, 1) AS per_key, coalesce(q.priority, 0) AS priority,
       coalesce(q.workflows, '{{}}') AS workflows,
       -- Live workers that can run something of the queue: they claim from it (every queue, or
       -- this one among theirs) and, when code binds workflows to it, registered one of them.
       (SELECT count(*) FROM live
         WHERE (live.queues IS NULL OR coalesce(q.name, d.queue) = ANY (live.queues))
           AND (cardinality(coalesce(q.workflows, '{{}}')) = 0 OR live.workflows && q.workflows)) AS live_workers
  FROM {schema}.queues q
  FULL JOIN per_queue d ON d.queue = q.name
 ORDER BY coalesce(q.priority, 0) DESC, 1
"""


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
        return self._rows("queues", QUEUES, {"dead_after": self.dead_after_s})
