"""The dashboard's refresh (issue 22): one statement reads the live rows once for every part
that counts them (kestrel_console/read/dashboard.py), prepared once per connection. Each part's
SQL is written once (live.LivePart, next to its separate read) and both statements are composed
from it, so what the equality below checks is the composition: the live CTEs materialized once
and shared, each part's rows numbered in its order, its LIMIT, its columns through the wide
row's typed slots and back (``unpack``), all in one snapshot. The separate reads are each
checked against the rows' truth in test_reader.py, test_enqueued_from_ready.py,
test_activity_minutes.py; here through the engine's transitions, stuck leases past the 500
shown, unserved names, unrunnable versions and recorded activity minutes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
from psycopg import sql

from kestrel_console.read import Reader
from kestrel_console.read.dashboard import PARTS as LIVE_PARTS
from kestrel_console.read.dashboard import unpack
from kestrel_console.read.live_rows import LIVE, statement
from kestrel_console.read.overview import counts_by_status
from kestrel_core import Kestrel
from kestrel_core.db.statements import render
from kestrel_core.dispatch import sweeper
from kestrel_core.dispatch.claim import claim_batch
from kestrel_core.engine.registration import upsert_worker
from tests.console.read.plans import plan_nodes
from tests.seed import seed_history
from tests.waiting import wait_until_gone

S = "kestrel"
LEASE = timedelta(seconds=30)
# The dashboard's parts that come from the one statement, and the separate read of each.
PARTS = ("status_counts", "queue_depth", "stuck_leases", "workers", "unserved_workflows", "unrunnable", "activity")

SET_VERSION = "UPDATE workflow_executions SET version = %s WHERE id = %s"
LAPSE = "UPDATE workflow_executions SET lease_expires = now() - make_interval(secs => %s) WHERE id = %s"
# Live executions created within the last 10 minutes (some of them before the recorded minutes
# begin, some after), a third of each status; finished ones over the last 14 minutes.
SEED_LIVE = """
INSERT INTO workflow_executions
    (workflow_name, status, owner_id, lease_expires, claims, claim_epoch, run_at, created_at, updated_at, started_at)
SELECT (ARRAY['a', 'b', 'c'])[1 + i %% 3], kind,
       CASE WHEN kind <> 'enqueued' THEN 'w' || (i %% 4) END,
       CASE WHEN kind = 'running' THEN now() + interval '30 s' END,
       1, 1, t, t, t, CASE WHEN kind <> 'enqueued' THEN t + interval '5 s' END
  FROM generate_series(1, %(n)s) AS i,
       LATERAL (SELECT now() - interval '1 second' * (i %% 600) AS t,
                       (ARRAY['enqueued', 'running', 'waiting'])[1 + i %% 7 %% 3] AS kind) AS x
"""
SEED_FINISHED = """
INSERT INTO workflow_executions
    (workflow_name, status, claims, claim_epoch, run_at, created_at, updated_at, started_at, finished_at)
SELECT (ARRAY['a', 'b'])[1 + i %% 2], CASE WHEN i %% 7 = 0 THEN 'error' ELSE 'success' END, 1, 1,
       t - interval '20 s', t - interval '20 s', t, t - interval '10 s', t
  FROM generate_series(1, %(n)s) AS i,
       LATERAL (SELECT now() - interval '14 minutes' * i / %(n)s AS t) AS x
"""

# Finished two days ago (outside the activity's window).
OLD_HISTORY = """
INSERT INTO workflow_executions
    (workflow_name, status, claims, claim_epoch, run_at, created_at, updated_at, started_at, finished_at)
SELECT 'a', 'success', 1, 1, t, t, t, t, t
  FROM generate_series(1, %(n)s) AS i, LATERAL (SELECT now() - interval '2 days' AS t) AS x
"""


def one_snapshot(reader: Reader) -> tuple[dict[str, Any], dict[str, Any]]:
    """The one statement's parts and the separate reads, all in one snapshot (one now())."""
    statements = reader.refresh_statements()
    keys = ["dashboard_live", *PARTS]
    out = reader._snapshot("test", [(k, *statements[k]) for k in keys])
    return unpack(out.pop("dashboard_live")), out


def assert_parts_equal_the_separate_reads(reader: Reader) -> dict[str, Any]:
    live, separate = one_snapshot(reader)
    assert counts_by_status(live.pop("status_counts")) == counts_by_status(separate.pop("status_counts"))
    for part in PARTS[1:]:
        assert live[part] == separate[part], part
    # And dashboard() itself (its own snapshot, a moment later): the same counts.
    dash = reader.dashboard()
    assert dash["status_counts"] == reader.status_counts()
    assert dash["queue_depth"] == reader.queue_depth()
    assert [r["id"] for r in dash["stuck_leases"]] == [r["id"] for r in reader.stuck_leases()]
    # not the state: alive / late / dead move with the clock between the two reads (under load
    # a worker crossed 'late' between them); the one-snapshot comparison above checks it
    assert [(w["worker_id"], w["held"]) for w in dash["workers"]] == [
        (w["worker_id"], w["held"]) for w in reader.workers()
    ]
    return live


def test_an_empty_database(reader: Reader) -> None:
    live = assert_parts_equal_the_separate_reads(reader)
    assert live["queue_depth"] == live["stuck_leases"] == live["workers"] == []
    assert len(live["activity"]) == 15


def test_the_seeded_story(reader: Reader, db: psycopg.Connection) -> None:
    seed_history(db)
    live = assert_parts_equal_the_separate_reads(reader)
    assert live["stuck_leases"] and live["workers"] and live["queue_depth"]


def test_through_claims_lapsed_leases_versions_and_recorded_minutes(
    reader: Reader, db: psycopg.Connection, app: Kestrel
) -> None:
    db.execute(SEED_FINISHED, {"n": 700})
    db.execute(SEED_LIVE, {"n": 2000})
    upsert_worker(db, S, "w0", ["a", "c"], 4, ["v2", None])  # 'b' is served by no live worker
    upsert_worker(db, S, "w1", ["a"], 4, ["v3"])
    a = app.enqueue_many("a", list(range(6)))
    db.execute(SET_VERSION, ("v1", a[0]))  # a version no live worker has
    db.execute(SET_VERSION, ("v2", a[1]))
    live = assert_parts_equal_the_separate_reads(reader)
    assert [r["workflow_name"] for r in live["unserved_workflows"]] == ["b"]
    assert [(r["workflow_name"], r["version"]) for r in live["unrunnable"]] == [("a", "v1")]

    claims, _ = claim_batch(db, S, worker_id="w0", names=["a", "c"], n=20, lease=LEASE, versions=["v2", None])
    assert claims
    # More lapsed leases than the 500 shown, two of them at the same instant (the id decides).
    running = [r[0] for r in db.execute("SELECT id FROM workflow_executions WHERE status = 'running' ORDER BY id")]
    for i, execution_id in enumerate(running):
        db.execute(LAPSE, (60 + i % 250, execution_id))
    assert len(running) > 500
    live = assert_parts_equal_the_separate_reads(reader)
    assert len(live["stuck_leases"]) == 500

    assert sweeper.fold_activity(db, S, settle_s=0) >= 10  # closed minutes recorded
    assert_parts_equal_the_separate_reads(reader)
    app.cancel(a[0], by="t")
    db.execute("DELETE FROM workers WHERE worker_id = 'w1'")
    assert_parts_equal_the_separate_reads(reader)


def rows_read(node: dict[str, Any], relation: str) -> int:
    """Rows the plan read from ``relation`` (or its partitions): kept plus filtered out."""
    own = 0
    if (node.get("Relation Name") or "").startswith(relation):
        own = node["Actual Rows"] * node.get("Actual Loops", 1) + node.get("Rows Removed by Filter", 0)
    return own + sum(rows_read(child, relation) for child in node.get("Plans", []))


def test_the_live_rows_are_read_once(reader: Reader, db: psycopg.Connection) -> None:
    """Every name served, nothing enqueued, nothing finished lately: the statement reads each
    running and waiting execution once. The separate reads read the running rows four times
    (queue depth, stuck leases, workers, activity) and the waiting ones twice."""
    db.execute(OLD_HISTORY, {"n": 20_000})  # so that the live rows are read through their indexes
    db.execute(SEED_LIVE.replace("'enqueued', 'running', 'waiting'", "'running', 'running', 'waiting'"), {"n": 600})
    upsert_worker(db, S, "w0", ["a", "b", "c"], 4, [None, None, None])
    db.execute("ANALYZE workflow_executions, executions_ready")
    live = db.execute("SELECT count(*) FROM workflow_executions WHERE status IN ('running', 'waiting')").fetchone()
    assert live is not None and live[0] == 600
    statement, params = reader.refresh_statements()["dashboard_live"]
    plan = db.execute(sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) ") + render(statement, S), params).fetchone()
    assert plan is not None
    assert rows_read(plan[0][0]["Plan"], "workflow_executions") == 600
    separate = 0
    for key in ("queue_depth", "stuck_leases", "workers", "activity"):
        statement, params = reader.refresh_statements()[key]
        plan = db.execute(sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) ") + render(statement, S), params).fetchone()
        assert plan is not None
        separate += rows_read(plan[0][0]["Plan"], "workflow_executions")
    assert separate > 3 * 600


def test_the_dashboard_is_prepared_once_per_connection(reader: Reader, db: psycopg.Connection) -> None:
    """Its statements carry no parameter (our constants are written in), so the server plans
    each once and reuses the plan: no parse, no plan per refresh."""
    seed_history(db)
    for _ in range(4):
        reader.dashboard()
    prepared = reader._call(
        "test", lambda c: c.execute("SELECT generic_plans, custom_plans FROM pg_prepared_statements").fetchall()
    )
    # The live parts, the approvals, the recent errors, the paused queues (issue 46).
    assert len(prepared) == 4 and all(generic >= 3 and custom == 0 for generic, custom in prepared), prepared
    # The other reads are never prepared: planned with their values.
    reader.queue_depth()
    reader.list_executions(text="x")
    assert len(reader._call("test", lambda c: c.execute("SELECT 1 FROM pg_prepared_statements").fetchall())) == 4

    # A connection the server dropped: the next refresh opens another and prepares there.
    pid = reader._call("test", lambda c: c.info.backend_pid)
    db.execute("SELECT pg_terminate_backend(%s)", (pid,))
    wait_until_gone(db, pid)
    before = reader.status_counts()
    assert reader.dashboard()["status_counts"] == before


def test_a_part_read_alone_inlines_the_live_rows_it_names(reader: Reader, db: psycopg.Connection) -> None:
    """Alone, a part's live CTEs merge into its scans (none is materialized: a count of the
    running rows stays a count on their partial index, as when the read was written out) and
    the live rows it does not name are not read; in the dashboard each live CTE is materialized
    once."""
    seed_history(db)
    db.execute("ANALYZE")
    statements = reader.refresh_statements()
    for part in LIVE_PARTS:
        text, params = statements[part.name]
        assert text == statement(part)
        plan = db.execute(sql.SQL("EXPLAIN (FORMAT JSON) ") + render(text, S), params).fetchone()
        assert plan is not None
        nodes = list(plan_nodes(plan[0][0]["Plan"]))
        ctes = {n["Subplan Name"].removeprefix("CTE ") for n in nodes if "Subplan Name" in n}
        assert not ctes & LIVE.keys(), (part.name, ctes)
        relations = {n["Relation Name"] for n in nodes if "Relation Name" in n}
        if "ready" not in part.reads:
            assert "executions_ready" not in relations, part.name
        if "finished" not in part.reads:
            assert "execution_counts" not in relations, part.name

    text, params = statements["dashboard_live"]
    plan = db.execute(sql.SQL("EXPLAIN (FORMAT JSON) ") + render(text, S), params).fetchone()
    assert plan is not None
    names = [n["Subplan Name"] for n in plan_nodes(plan[0][0]["Plan"]) if "Subplan Name" in n]
    assert all(names.count(f"CTE {name}") == 1 for name in LIVE), names
