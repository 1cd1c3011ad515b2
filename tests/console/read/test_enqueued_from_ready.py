"""The dashboard counts enqueued executions from executions_ready (issue 22): queue_depth
directly, unserved workflows and unrunnable versions by reading there which names and versions
are in trouble. The counts equal the truth in workflow_executions through claims, lease
sweeps, releases, requeues, cancels, priority and version changes and deletes; a stale ready
row (code older than migration 0015, hand-written SQL) is dropped by the workers' sweep."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
from psycopg import sql

from kestrel_console.read import Reader
from kestrel_core import Kestrel
from kestrel_core.db.statements import render
from kestrel_core.dispatch import lease, sweeper
from kestrel_core.dispatch.claim import claim_batch
from kestrel_core.engine.registration import upsert_worker

S = "kestrel"
LEASE = timedelta(seconds=30)
DEAD_AFTER = {"dead_after": 30.0}

# The truth, as the console read it before: from workflow_executions.
TRUTH_ENQUEUED = """
SELECT workflow_name, count(*) FROM workflow_executions WHERE status = 'enqueued' GROUP BY 1 ORDER BY 1
"""
TRUTH_UNSERVED = """
SELECT q.workflow_name, q.enqueued, q.oldest
  FROM (SELECT workflow_name, count(*) AS enqueued, min(created_at) AS oldest
          FROM workflow_executions WHERE status = 'enqueued' GROUP BY workflow_name) AS q
 WHERE NOT EXISTS (
       SELECT 1 FROM workers w
        WHERE q.workflow_name = ANY (w.workflows) AND w.stopped_at IS NULL
          AND w.last_heartbeat > now() - make_interval(secs => %(dead_after)s))
 ORDER BY q.workflow_name
"""
TRUTH_UNRUNNABLE = """
SELECT v.workflow_name, v.version, v.enqueued, lv.versions AS live_versions
  FROM (SELECT workflow_name, version, count(*) AS enqueued
          FROM workflow_executions WHERE status = 'enqueued' AND version IS NOT NULL
         GROUP BY workflow_name, version) AS v
  CROSS JOIN LATERAL (
        SELECT array_agg(DISTINCT w.versions[array_position(w.workflows, v.workflow_name)]
                         ORDER BY w.versions[array_position(w.workflows, v.workflow_name)]) AS versions
          FROM workers w
         WHERE v.workflow_name = ANY (w.workflows) AND w.stopped_at IS NULL
           AND w.last_heartbeat > now() - make_interval(secs => %(dead_after)s)) AS lv
 WHERE lv.versions IS NOT NULL AND NOT (v.version = ANY (lv.versions))
 ORDER BY v.workflow_name, v.version
"""
TRUTH_QUEUES = """
SELECT queue, count(*) FROM workflow_executions WHERE status = 'enqueued' GROUP BY 1 ORDER BY 1
"""
SET_VERSION = "UPDATE workflow_executions SET version = %s WHERE id = %s"
SET_PRIORITY = "UPDATE workflow_executions SET priority = %s WHERE id = %s"
DELAY = "UPDATE workflow_executions SET run_at = now() + interval '1 hour' WHERE id = %s"
LAPSE = "UPDATE workflow_executions SET lease_expires = now() - interval '1 s' WHERE id = %s"
DELETE = "DELETE FROM workflow_executions WHERE id = %s"
# A claim as code older than migration 0015 made it: workflow_executions alone.
OLD_CLAIM = (
    "UPDATE workflow_executions SET status = 'running', owner_id = 'old', claim_epoch = claim_epoch + 1 WHERE id = %s"
)
LOCK_READY = "SELECT 1 FROM executions_ready WHERE id = %s FOR UPDATE"
ANALYZE = "ANALYZE workflow_executions, executions_ready"


def enqueued(reader: Reader) -> list[tuple[str, int]]:
    return [(r["workflow_name"], r["count"]) for r in reader.queue_depth() if r["status"] == "enqueued"]


def unserved(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r["workflow_name"], r["enqueued"], r["oldest"]) for r in rows]


def assert_exact(reader: Reader, db: psycopg.Connection) -> None:
    assert enqueued(reader) == [tuple(r) for r in db.execute(TRUTH_ENQUEUED)]
    truth = db.execute(TRUTH_UNSERVED, DEAD_AFTER).fetchall()
    assert unserved(reader.unserved_workflows()) == [tuple(r) for r in truth]
    truth = db.execute(TRUTH_UNRUNNABLE, DEAD_AFTER).fetchall()
    assert [tuple(r.values()) for r in reader.unrunnable()] == [tuple(r) for r in truth]
    queues = [(r["name"], r["enqueued"]) for r in reader.queues() if r["enqueued"]]
    assert sorted(queues) == [tuple(r) for r in db.execute(TRUTH_QUEUES)]


def claim(db: psycopg.Connection, names: list[str], n: int, versions: list[str | None] | None = None) -> list[int]:
    claims, _ = claim_batch(db, S, worker_id="w1", names=names, n=n, lease=LEASE, versions=versions)
    return [c.execution_id for c in claims]


def test_enqueued_counts_stay_exact_through_the_engines_transitions(
    reader: Reader, db: psycopg.Connection, app: Kestrel
) -> None:
    # 'a' is served (version v2 only), 'b' by no live worker, 'c' by a worker with any version.
    upsert_worker(db, S, "w1", ["a", "c"], 4, ["v2", None])
    a = app.enqueue_many("a", list(range(8)))
    b = app.enqueue_many("b", list(range(3)))
    c = app.enqueue_many("c", list(range(4)))
    db.execute(SET_VERSION, ("v1", a[0]))  # a version no live worker has
    db.execute(SET_VERSION, ("v1", a[1]))
    db.execute(SET_VERSION, ("v2", a[2]))
    assert_exact(reader, db)
    assert [r["workflow_name"] for r in reader.unserved_workflows()] == ["b"]
    assert [(r["workflow_name"], r["version"], r["enqueued"]) for r in reader.unrunnable()] == [("a", "v1", 2)]

    took = claim(db, ["a", "c"], 5, ["v2", None])  # a[2..] and c (NULL versions get stamped)
    assert len(took) == 5
    assert_exact(reader, db)
    db.execute(LAPSE, (took[0],))
    assert sweeper.sweep_leases(db, S) == [took[0]]  # running -> enqueued
    assert_exact(reader, db)
    assert sorted(lease.release_all(db, S, "w1")) == sorted(took[1:])
    assert_exact(reader, db)
    app.cancel(a[0], by="t")  # enqueued -> cancelled: the unrunnable v1 row goes
    app.cancel(b[0], by="t")
    assert_exact(reader, db)
    app.requeue(a[0], by="t")  # cancelled -> enqueued
    assert_exact(reader, db)
    db.execute(SET_PRIORITY, (5, c[0]))  # a new claim key
    db.execute(DELAY, (c[1],))
    db.execute(DELETE, (b[1],))
    assert_exact(reader, db)
    claim(db, ["a", "b", "c"], 100)  # all due and claimable
    assert_exact(reader, db)
    app.cancel(b[2], by="t")
    assert_exact(reader, db)


def test_a_stale_ready_row_is_never_reported_unserved_and_the_sweep_drops_it(
    reader: Reader, db: psycopg.Connection, app: Kestrel
) -> None:
    upsert_worker(db, S, "w1", ["a"], 4, ["v2"])
    a = app.enqueue_many("a", [1, 2])
    b = app.enqueue_many("b", [1, 2])
    db.execute(SET_VERSION, ("v1", a[0]))
    db.execute(OLD_CLAIM, (a[0],))  # its ready row stays
    db.execute(OLD_CLAIM, (b[0],))
    db.execute(OLD_CLAIM, (b[1],))  # 'b' has no enqueued execution left, only stale rows
    assert reader.unserved_workflows() == [] and reader.unrunnable() == []
    assert enqueued(reader) == [("a", 2), ("b", 2)]  # until the sweep (or a claim meeting them)
    # A ready row a claim holds is left to it.
    with psycopg.connect(db.info.dsn, options="-c search_path=kestrel") as other:
        other.execute(LOCK_READY, (b[0],))
        assert sweeper.drop_stale_ready(db, S) == 2
        other.rollback()
    assert enqueued(reader) == [("a", 1), ("b", 1)]
    assert sweeper.drop_stale_ready(db, S) == 1
    assert_exact(reader, db)
    assert sweeper.drop_stale_ready(db, S) == 0


def test_with_every_name_and_version_served_no_enqueued_execution_is_read(
    reader: Reader, db: psycopg.Connection, app: Kestrel
) -> None:
    """Nothing runs or waits here: no row of workflow_executions is read at all. Before, each
    of the three read every enqueued execution's heap row (one page read per row: 4.4 ms at
    6,000 enqueued, three times per refresh)."""
    upsert_worker(db, S, "w1", ["a", "b"], 4, ["v2", None])
    app.enqueue_many("a", list(range(300)))
    app.enqueue_many("b", list(range(300)))
    db.execute(ANALYZE)
    statements = reader.refresh_statements()
    for key in ("queue_depth", "unserved_workflows", "unrunnable"):
        statement, params = statements[key]
        plan = db.execute(sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) ") + render(statement, S), params).fetchone()[0]  # type: ignore[index]

        def enqueued_rows_read(node: dict[str, Any]) -> int:
            own = node["Actual Rows"] if node.get("Relation Name") == "workflow_executions" else 0
            return own + sum(enqueued_rows_read(child) for child in node.get("Plans", []))

        assert enqueued_rows_read(plan[0]["Plan"]) == 0, key
