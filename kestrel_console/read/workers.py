"""Live trouble and capacity: stuck leases, workers, workflows or versions no live worker runs,
and queues (limits, pause, depth, rate window use)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

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

# A worker beats every lease/3 (kestrel_core.engine.worker) and renews the leases of what it holds to
# now() + lease at each beat, so its lease is the earliest of those leases minus its last beat;
# a worker holding nothing is assumed to run with the default lease (30 s: a beat every 10 s).
DEFAULT_BEAT_S = 10.0
# A beat this many intervals overdue (plus a second of slack) makes an alive worker "late": a
# frozen worker says so within ~15 s, not only once it is declared dead after dead_after.
LATE_AFTER_BEATS = 1.5

WORKERS = """
SELECT w.worker_id, w.hostname, w.pid, w.workflows, w.concurrency,
       coalesce(h.held, 0) AS held,
       w.started_at, w.last_heartbeat, w.stopped_at,
       extract(epoch FROM now() - w.last_heartbeat)::float8 AS heartbeat_age_s,
       (w.stopped_at IS NULL
        AND w.last_heartbeat > now() - make_interval(secs => %(dead_after)s)) AS alive,
       -- (greatest ignores NULLs: it goes outside the coalesce)
       greatest(coalesce(extract(epoch FROM h.first_lease - w.last_heartbeat)::float8 / 3, %(beat)s),
                0.1) AS beat_s
  FROM {schema}.workers w
  LEFT JOIN (SELECT owner_id, count(*) AS held, min(lease_expires) AS first_lease
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
    SELECT w.queues, w.workflows FROM {schema}.workers w
     WHERE w.stopped_at IS NULL AND w.last_heartbeat > now() - make_interval(secs => %(dead_after)s)
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
