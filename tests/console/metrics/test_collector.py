"""The collector against real workers: the finished counter and the step histogram count each
finish once (never twice across scrapes, again after a requeue), while the stored counts go
down with a requeue; settle holds back fresh finishes; generated step ids fold into
step="(other)"; an unreachable database is kestrel_up 0 with the counters kept; and
``status --format json --all`` gives the numbers the gauges give."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.registry import CollectorRegistry

from kestrel_console.metrics import KestrelCollector
from kestrel_console.read.operations import OperationsReader
from kestrel_core import Kestrel
from tests.cli.script import console
from tests.waiting import wait_for

UNREACHABLE = "host=127.0.0.1 port=1 user=postgres dbname=postgres connect_timeout=2"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(collector: KestrelCollector) -> Samples:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    out: Samples = {}
    for family in registry.collect():
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def pick(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


@pytest.fixture
def reader(dsn: str) -> Iterator[OperationsReader]:
    r = OperationsReader(dsn)
    yield r
    r.close()


def finished(db: psycopg.Connection, n: int) -> bool:
    row = db.execute("SELECT count(*) FROM kestrel.workflow_executions WHERE status IN ('success', 'error')").fetchone()
    return row[0] == n


def run_one(app: Kestrel, db: psycopg.Connection, workflow: str, input: Any) -> None:
    """Run one execution of ``workflow`` to its end on a worker started for it."""
    worker = app.worker(concurrency=2, lease=timedelta(seconds=5), poll_interval=0.1)
    worker.start()
    try:
        app.enqueue(workflow, input)
        wait_for(lambda: finished(db, 1), what="finished")
    finally:
        worker.stop(grace=timedelta(0))


def test_finishes_and_step_attempts_are_counted_once_and_again_after_a_requeue(
    app: Kestrel, db: psycopg.Connection, reader: OperationsReader
) -> None:
    failing = {"on": True}

    @app.workflow("ok")
    def ok(ctx: Any, x: int) -> int:
        ctx.step("a", lambda: x)
        return ctx.step("b", lambda: x + 1)

    @app.workflow("bad")
    def bad(ctx: Any, x: int) -> None:
        def boom() -> None:
            if failing["on"]:
                raise RuntimeError("boom")

        ctx.step("boom", boom)

    collector = KestrelCollector(reader, settle_s=0)
    first = scrape(collector)  # the mark: nothing before it is counted
    assert pick(first, "kestrel_executions_finished_total", workflow="ok", status="success") is None
    worker = app.worker(concurrency=4, lease=timedelta(seconds=5), poll_interval=0.1)
    worker.start()
    try:
        for i in range(3):
            app.enqueue("ok", i)
        bad_ids = [app.enqueue("bad", i) for i in range(2)]
        wait_for(lambda: finished(db, 5), what="5 finished")
        s = scrape(collector)
        assert pick(s, "kestrel_executions_finished_total", workflow="ok", status="success") == 3
        assert pick(s, "kestrel_executions_finished_total", workflow="bad", status="error") == 2
        assert pick(s, "kestrel_step_duration_seconds_count", workflow="ok", step="a", outcome="success") == 3
        assert pick(s, "kestrel_step_duration_seconds_count", workflow="ok", step="b", outcome="success") == 3
        assert pick(s, "kestrel_step_duration_seconds_count", workflow="bad", step="boom", outcome="error") == 2
        assert (
            pick(s, "kestrel_step_duration_seconds_bucket", workflow="ok", step="a", outcome="success", le="+Inf") == 3
        )
        assert pick(s, "kestrel_history_executions", workflow="bad", status="error") == 2
        # A second scrape adds nothing: each finish was counted once.
        again = scrape(collector)
        assert pick(again, "kestrel_executions_finished_total", workflow="ok", status="success") == 3
        assert pick(again, "kestrel_step_duration_seconds_count", workflow="ok", step="a", outcome="success") == 3

        # A requeue lowers the stored count; the counter never goes down, and the second
        # finish counts again.
        failing["on"] = False
        app.requeue(bad_ids[0], by="test")
        s = scrape(collector)
        assert pick(s, "kestrel_executions_finished_total", workflow="bad", status="error") == 2
        wait_for(lambda: finished(db, 5), what="the requeued one finished again")
        s = scrape(collector)
        assert pick(s, "kestrel_history_executions", workflow="bad", status="error") == 1
        assert pick(s, "kestrel_history_executions", workflow="bad", status="success") == 1
        assert pick(s, "kestrel_executions_finished_total", workflow="bad", status="error") == 2
        assert pick(s, "kestrel_executions_finished_total", workflow="bad", status="success") == 1
        assert pick(s, "kestrel_step_duration_seconds_count", workflow="bad", step="boom", outcome="success") == 1
    finally:
        worker.stop(grace=timedelta(0))


def test_settle_holds_back_fresh_finishes(app: Kestrel, db: psycopg.Connection, reader: OperationsReader) -> None:
    @app.workflow("ok")
    def ok(ctx: Any, x: int) -> int:
        return ctx.step("a", lambda: x)

    collector = KestrelCollector(reader, settle_s=3600)
    scrape(collector)
    run_one(app, db, "ok", 1)
    s = scrape(collector)
    assert pick(s, "kestrel_executions_finished_total", workflow="ok", status="success") is None
    assert pick(s, "kestrel_history_executions", workflow="ok", status="success") == 1  # the gauge is not held back


def test_generated_step_ids_fold_into_other(app: Kestrel, db: psycopg.Connection, reader: OperationsReader) -> None:
    @app.workflow("many")
    def many(ctx: Any, n: int) -> None:
        for i in range(n):
            ctx.step(f"item-{i}", lambda: i)

    collector = KestrelCollector(reader, settle_s=0, max_steps=2)
    scrape(collector)
    run_one(app, db, "many", 5)
    s = scrape(collector)
    counts = {
        dict(labels)["step"]: value
        for (name, labels), value in s.items()
        if name == "kestrel_step_duration_seconds_count" and dict(labels)["workflow"] == "many"
    }
    assert len(counts) == 3 and counts["(other)"] == 3, counts
    assert sum(counts.values()) == 5


def test_an_unreachable_database_is_up_0_and_keeps_the_counters(app: Kestrel, db: psycopg.Connection, dsn: str) -> None:
    @app.workflow("ok")
    def ok(ctx: Any, x: int) -> int:
        return ctx.step("a", lambda: x)

    reader = OperationsReader(dsn)
    collector = KestrelCollector(reader, settle_s=0)
    scrape(collector)
    run_one(app, db, "ok", 1)
    assert pick(scrape(collector), "kestrel_executions_finished_total", workflow="ok", status="success") == 1
    reader.close()
    reader.dsn = UNREACHABLE  # the database goes away
    s = scrape(collector)
    assert pick(s, "kestrel_up") == 0
    assert collector.last_error and "127.0.0.1" in collector.last_error
    assert pick(s, "kestrel_executions_finished_total", workflow="ok", status="success") == 1
    assert pick(s, "kestrel_queue_depth", queue="default", workflow="ok") is None
    reader.close()


def test_status_all_gives_the_numbers_the_gauges_give(
    app: Kestrel, db: psycopg.Connection, dsn: str, reader: OperationsReader
) -> None:
    db.execute("INSERT INTO kestrel.queues (name, concurrency) VALUES ('bulk', 3)")  # as a worker declares it
    for i in range(4):
        app.enqueue("ingest", i, queue="bulk")
    app.enqueue("ingest", 9, queue="bulk", delay=timedelta(hours=1))
    app.pause_queue("bulk", by="alice")
    app.cancel(app.enqueue("other", 1), by="alice")
    result = console("status", "--format", "json", "--all", dsn=dsn)
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    s = scrape(KestrelCollector(reader, settle_s=0))
    assert status["paused_queues"] == ["bulk"] and status["paused_executions"] == 0
    assert pick(s, "kestrel_queue_paused", queue="bulk") == 1
    for row in status["enqueued"]:
        labels = {"queue": row["queue"], "workflow": row["workflow_name"]}
        assert pick(s, "kestrel_queue_depth", **labels) == row["enqueued"] == 5
        assert pick(s, "kestrel_queue_due", **labels) == row["due"] == 4
    assert (
        [r["count"] for r in status["finished"]]
        == [pick(s, "kestrel_history_executions", workflow="other", status="cancelled")]
        == [1]
    )
    bulk = next(q for q in status["queues"] if q["name"] == "bulk")
    assert bulk["concurrency"] == pick(s, "kestrel_queue_concurrency_limit", queue="bulk") == 3
    assert status["stuck_leases"] == 0 and status["pending_approvals"]["count"] == 0
    assert status["workers"] == []
    # --all is an object: json only.
    refused = console("status", "--all", dsn=dsn)
    assert (
        refused.returncode == 2
        and refused.stderr.strip() == "error: --all goes with --format json (one object with every part)"
    )


# -- the gauges equal the tables, on any mix of executions ---------------------------------------

KINDS = ("due", "delayed", "running", "stuck", "waiting", "approval", "success", "error", "cancelled")
INSERT = """
INSERT INTO kestrel.workflow_executions
       (workflow_name, queue, status, run_at, owner_id, lease_expires, claim_epoch, started_at, finished_at)
VALUES (%(name)s, %(queue)s, %(status)s, now() + %(run_in)s * interval '1 hour', %(owner)s,
        now() + %(lease_in)s * interval '1 minute', %(epoch)s, %(started)s, %(finished)s)
RETURNING id
"""
STATUS = {"due": "enqueued", "delayed": "enqueued", "stuck": "running", "approval": "waiting"}
# What the tables hold, counted the plain way (whole scans: fine on a few rows).
TRUTH = {
    "kestrel_queue_depth": "SELECT queue, workflow_name, count(*) FROM kestrel.workflow_executions"
    " WHERE status = 'enqueued' GROUP BY 1, 2",
    "kestrel_queue_due": "SELECT queue, workflow_name, count(*) FROM kestrel.workflow_executions"
    " WHERE status = 'enqueued' AND run_at <= now() GROUP BY 1, 2",
    "kestrel_running": "SELECT queue, workflow_name, count(*) FROM kestrel.workflow_executions"
    " WHERE status = 'running' GROUP BY 1, 2",
    "kestrel_stuck_leases": "SELECT queue, workflow_name, count(*) FILTER (WHERE lease_expires < now())"
    " FROM kestrel.workflow_executions WHERE status = 'running' GROUP BY 1, 2",
    "kestrel_waiting": "SELECT workflow_name, count(*) FROM kestrel.workflow_executions"
    " WHERE status = 'waiting' GROUP BY 1",
    "kestrel_pending_approvals": "SELECT e.workflow_name, count(*) FROM kestrel.workflow_waits w"
    " JOIN kestrel.workflow_executions e ON e.id = w.execution_id"
    " WHERE w.kind = 'approval' AND w.resolved_at IS NULL GROUP BY 1",
    "kestrel_history_executions": "SELECT workflow_name, status, count(*) FROM kestrel.workflow_executions"
    " WHERE status IN ('success', 'error', 'cancelled') GROUP BY 1, 2",
}
LABELS = {
    "kestrel_waiting": ("workflow",),
    "kestrel_pending_approvals": ("workflow",),
    "kestrel_history_executions": ("workflow", "status"),
}


def truth(db: psycopg.Connection, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    labels = LABELS.get(name, ("queue", "workflow"))
    return {
        tuple(sorted(zip(labels, row[:-1]))): float(row[-1]) for row in db.execute(TRUTH[name]).fetchall() if row[-1]
    }


def family(samples: Samples, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The family's non-zero samples (a gauge may say 0 where a GROUP BY has no row)."""
    return {labels: value for (n, labels), value in samples.items() if n == name and value}


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["ingest", "remediate"]), st.sampled_from(["default", "bulk"]), st.sampled_from(KINDS)
        ),
        max_size=25,
    )
)
def test_the_gauges_equal_the_tables_on_any_mix(
    db: psycopg.Connection, reader: OperationsReader, mix: list[tuple[str, str, str]]
) -> None:
    db.execute("DELETE FROM kestrel.workflow_executions")  # with their waits, counts and ready rows
    for name, queue, kind in mix:
        status = STATUS.get(kind, kind)
        live = status in ("running", "waiting")
        (eid,) = db.execute(
            INSERT,
            {
                "name": name,
                "queue": queue,
                "status": status,
                "run_in": 1 if kind == "delayed" else -0.01,
                "owner": "w1" if status == "running" else None,
                "lease_in": (-1 if kind == "stuck" else 30) if status == "running" else None,
                "epoch": 1 if live else 0,
                "started": datetime.now(UTC) if live else None,
                "finished": datetime.now(UTC) if status in ("success", "error", "cancelled") else None,
            },
        ).fetchone()
        if kind == "approval":
            db.execute(
                "INSERT INTO kestrel.workflow_waits (execution_id, step_id, kind) VALUES (%s, 'ok', 'approval')", (eid,)
            )
    s = scrape(KestrelCollector(reader, settle_s=0))
    for name in TRUTH:
        assert family(s, name) == truth(db, name), name
    status = json.loads(console("status", "--format", "json", "--all", dsn=reader.dsn).stdout)
    assert status["stuck_leases"] == sum(truth(db, "kestrel_stuck_leases").values())
    assert status["pending_approvals"]["count"] == sum(truth(db, "kestrel_pending_approvals").values())
    assert {(r["queue"], r["workflow_name"]): r["enqueued"] for r in status["enqueued"]} == {
        (dict(k)["queue"], dict(k)["workflow"]): v for k, v in truth(db, "kestrel_queue_depth").items()
    }
