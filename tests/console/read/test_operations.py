"""The on-call snapshot (``read.operations``, what the metrics endpoint and ``status --format
json --all`` read) on a 100k history with step attempts: no statement scans
workflow_executions or step_attempts sequentially, and the windows of what finished read the
finished-time indexes. What a scrape costs at 1M and 10M is measured in bench/ (metrics)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from kestrel_console.metrics import DURATION_BUCKETS
from kestrel_console.read.operations import ATTEMPTS_SINCE, FINISHED_SINCE, SQL
from kestrel_core import Kestrel
from tests.console.read import plans
from tests.console.read.plans import plan_nodes, seq_scans

BULK = 100_000


@pytest.fixture(scope="module")
def big_history() -> Iterator[str]:
    with plans.big_history("kestrel_ops", BULK, 2000, with_steps=True) as dsn:
        yield dsn


@pytest.mark.slow  # seeds a 100k history (125 s for the file at load 20)
def test_no_statement_of_the_snapshot_scans_the_history(big_history: str) -> None:
    since = datetime.now(UTC) - timedelta(seconds=30)
    window = {"since": since, "settle": 15.0, "window": 600.0}
    statements = {
        "ready": (SQL.ready, None),
        "running": (SQL.running, None),
        "waiting": (SQL.waiting, None),
        "finished": (SQL.finished, None),
        "approvals": (SQL.pending_approvals_by_workflow, None),
        "finished_since": (FINISHED_SINCE, window),
        "attempts_since": (ATTEMPTS_SINCE, {**window, "bounds": list(DURATION_BUCKETS)}),
    }
    with psycopg.connect(big_history, autocommit=True) as conn:
        conn.execute("SET jit = off")
        conn.execute("SET max_parallel_workers_per_gather = 0")
        scans = seq_scans(conn, statements)
        bad = {k: v for k, v in scans.items() if {"workflow_executions", "step_attempts"} & set(v)}
        assert bad == {}, f"sequential scans of the history: {json.dumps(bad)}"
        assert scans["finished_since"] == [] and scans["attempts_since"] == []


@pytest.mark.slow
def test_the_windows_read_the_finished_time_indexes(big_history: str) -> None:
    from psycopg import sql

    from kestrel_core.db import render

    window = {"since": datetime.now(UTC) - timedelta(seconds=30), "settle": 15.0, "window": 600.0}
    with psycopg.connect(big_history, autocommit=True) as conn:
        used = {}
        for key, statement, params in (
            ("finished", FINISHED_SINCE, window),
            ("attempts", ATTEMPTS_SINCE, {**window, "bounds": list(DURATION_BUCKETS)}),
        ):
            plan = conn.execute(sql.SQL("EXPLAIN (FORMAT JSON) ") + render(statement, "kestrel"), params).fetchone()[0]
            used[key] = " ".join(str(n.get("Index Name")) for n in plan_nodes(plan[0]["Plan"]))
    assert "finished_idx" in used["finished"], used
    assert "step_attempts" in used["attempts"] and "finished_idx" in used["attempts"], used


def test_queue_rows_equal_the_queues_screen(app: Kestrel, db: psycopg.Connection, dsn: str) -> None:
    """``queue_rows`` (from the snapshot's parts) against ``workers.QUEUES`` (the queues screen),
    on declared and undeclared queues, bound workflows, and live workers of every kind."""
    from kestrel_console.read import Reader
    from kestrel_console.read.operations import OperationsReader

    db.execute(
        "INSERT INTO kestrel.queues (name, concurrency, per_worker, priority, workflows, paused, paused_by,"
        " rate_limit, rate_period) VALUES ('bound', 2, NULL, 5, '{ingest}', true, 'alice', 10, '1 minute'),"
        " ('idle', NULL, 1, 0, '{}', false, NULL, NULL, NULL)"
    )
    for i in range(3):
        app.enqueue("ingest", i, queue="bound")
    app.enqueue("other", 1, queue="undeclared")
    app.enqueue("other", 2)
    running = app.enqueue("other", 3, queue="bound")
    db.execute(
        "UPDATE kestrel.workflow_executions SET status = 'running', owner_id = 'w1', claim_epoch = 1,"
        " lease_expires = now() - interval '1 minute' WHERE id = %s",
        (running,),
    )
    db.execute(
        "INSERT INTO kestrel.workers (worker_id, workflows, queues, last_heartbeat, stopped_at) VALUES"
        " ('w1', '{ingest}', NULL, now(), NULL), ('w2', '{other}', '{undeclared,idle}', now(), NULL),"
        " ('w3', '{ingest,other}', '{bound}', now(), NULL),"
        " ('dead', '{ingest}', NULL, now() - interval '1 hour', NULL),"
        " ('stopped', '{ingest}', NULL, now(), now())"
    )
    with Reader(dsn) as screen, OperationsReader(dsn) as ops_reader:
        expected = screen.queues()
        ops = ops_reader.operations()
    # Every column queue_rows gives, as the screen reads it (the screen has a few more).
    keys = list(ops["queues"][0])
    assert [{k: q[k] for k in keys} for q in ops["queues"]] == [{k: q[k] for k in keys} for q in expected]
    assert [q["name"] for q in ops["queues"]] == ["bound", "default", "idle", "undeclared"]
    assert sum(r["stuck"] for r in ops["running"]) == 1
