"""Workflow deadlines (timeout from start) and step attempt timeouts."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import psycopg

from kestrel_core import Kestrel, StepFailed
from kestrel_core.dispatch.deadlines import sweep_deadlines
from tests.waiting import wait_finished as finished
from tests.waiting import wait_for


def test_a_deadline_ends_a_waiting_execution_and_closes_its_waits(
    app: Kestrel, db: psycopg.Connection, start_worker
) -> None:
    @app.workflow("slow-approval", timeout=1)
    def slow_approval(ctx, _):
        ctx.wait_for_approval("ok")
        return "approved"

    start_worker(app)
    eid = app.enqueue("slow-approval")
    final = finished(app, eid)
    assert (final.status, final.error) == ("error", "timed out after 1s (deadline from start)")
    row = db.execute(
        "SELECT deadline_at - started_at, finished_at IS NOT NULL FROM workflow_executions WHERE id = %s", (eid,)
    ).fetchone()
    assert row[0].total_seconds() == 1 and row[1]
    assert db.execute(
        "SELECT resolved_at IS NOT NULL, decision FROM workflow_waits WHERE execution_id = %s", (eid,)
    ).fetchone() == (True, None)


def test_a_deadline_fences_out_a_running_execution(app: Kestrel, db: psycopg.Connection, start_worker) -> None:
    release = threading.Event()

    @app.workflow("runaway", timeout=0.5)
    def runaway(ctx, _):
        ctx.step("long", lambda: release.wait(20))
        ctx.step("next", lambda: "must not run")
        return "done"

    worker = start_worker(app)
    eid = app.enqueue("runaway")
    final = finished(app, eid)
    assert (final.status, final.error) == ("error", "timed out after 0.5s (deadline from start)")
    release.set()
    wait_for(lambda: worker.stats["refused_writes"] >= 1, what="the late checkpoint to be refused")
    assert db.execute("SELECT count(*) FROM operation_outputs WHERE execution_id = %s", (eid,)).fetchone() == (0,)
    assert app.get(eid).status == "error"


def test_a_requeued_timed_out_execution_gets_a_fresh_deadline(
    app: Kestrel, db: psycopg.Connection, start_worker
) -> None:
    runs = []

    @app.workflow("flaky", timeout=1)
    def flaky(ctx, _):
        runs.append(1)
        if len(runs) == 1:
            ctx.sleep("too-long", 5)
        return "ok"

    start_worker(app)
    eid = app.enqueue("flaky")
    assert finished(app, eid).status == "error"
    app.requeue(eid, by="alice")
    final = finished(app, eid)
    assert final.status == "success", final.error


def test_a_step_attempt_that_times_out_is_retried(app: Kestrel, db: psycopg.Connection, start_worker) -> None:
    calls = []

    def sometimes_slow():
        calls.append(time.monotonic())
        if len(calls) == 1:
            time.sleep(3)  # outlives its 0.3 s attempt; this result is discarded
            return "late"
        return "fast"

    @app.workflow("fetch")
    def fetch(ctx, _):
        return ctx.step("call-api", sometimes_slow, retries=2, backoff=0.05, timeout=0.3)

    start_worker(app)
    eid = app.enqueue("fetch")
    final = finished(app, eid)
    assert (final.status, final.output) == ("success", "fast")
    attempts = db.execute(
        "SELECT attempt, outcome, error FROM step_attempts WHERE execution_id = %s ORDER BY attempt", (eid,)
    ).fetchall()
    assert attempts[0][:2] == (1, "error")
    assert attempts[0][2].startswith("StepTimeout: attempt 1 of step 'call-api' timed out after 0.3s")
    assert attempts[1] == (2, "success", None)


def test_a_step_that_always_times_out_fails(app: Kestrel, start_worker) -> None:
    @app.workflow("hang")
    def hang(ctx, _):
        try:
            ctx.step("stuck", time.sleep, 2, timeout=0.2, retries=1, backoff=0.01)
        except StepFailed as exc:
            return str(exc)

    start_worker(app)
    eid = app.enqueue("hang")
    out = finished(app, eid).output
    assert out.startswith("step 'stuck' failed 2 times: StepTimeout: attempt 2 of step 'stuck' timed out after 0.2s")


def test_an_async_step_is_cancelled_at_its_timeout(app: Kestrel, start_worker) -> None:
    import asyncio

    cancelled = threading.Event()

    async def slow():
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    @app.workflow("async-hang")
    async def async_hang(ctx, _):
        try:
            await ctx.step("stuck", slow, timeout=0.2)
        except StepFailed:
            return "timed out"

    start_worker(app)
    eid = app.enqueue("async-hang")
    assert finished(app, eid).output == "timed out"
    assert cancelled.is_set()


def test_a_deadline_ends_an_enqueued_execution_swept_by_any_worker(
    app: Kestrel, dsn: str, db: psycopg.Connection, start_worker
) -> None:
    @app.workflow("gated", timeout=1.5)
    def gated(ctx, _):
        ctx.wait_for_approval("ok")
        return "approved"

    worker = start_worker(app)
    eid = app.enqueue("gated")
    wait_for(lambda: app.get(eid).status == "waiting")
    worker.stop()
    app.approve(eid, "ok", by="alice")
    assert app.get(eid).status == "enqueued"  # nobody runs "gated" now

    other = Kestrel(dsn)  # a worker for other workflows: its sweeper enforces the deadline
    try:
        other.workflow("unrelated")(lambda ctx, _: None)
        start_worker(other)
        final = finished(app, eid)
        assert (final.status, final.error) == ("error", "timed out after 1.5s (deadline from start)")
    finally:
        other.close()


def test_a_passed_deadline_fences_the_next_boundary_before_any_sweep(app: Kestrel, start_worker, db) -> None:
    """Deadlines fence at the next boundary, not only through the deadline sweep: with no sweep
    due for a minute, a workflow whose code outlived its deadline starts no step and does not
    complete (a chaos run's `deadline` workflow ended `success` when its sweep was late); the
    sweep then ends it `timed out`."""
    ran: list[str] = []
    past = threading.Event()

    @app.workflow("outlived", timeout=0.3)
    def outlived(ctx, _):
        time.sleep(0.8)  # past the deadline, in the workflow's own code
        past.set()
        return ctx.step("s1", lambda: ran.append("s1"))

    worker = start_worker(app, concurrency=2, lease=timedelta(seconds=30), sweep_interval=60)
    eid = app.enqueue("outlived")
    assert past.wait(30)
    wait_for(lambda: worker.stats["refused_writes"] >= 1 or app.get(eid).done, what="the boundary's answer")
    assert ran == [] and app.get(eid).status == "running"
    assert sweep_deadlines(db, "kestrel") == [eid]
    assert (app.get(eid).status, app.get(eid).error) == ("error", "timed out after 0.3s (deadline from start)")
    assert ran == []


def test_a_passed_deadline_fences_a_child_start_before_any_sweep(app: Kestrel, start_worker, db) -> None:
    """The deadline fences every advancing write under a claim, not only the boundary's: a
    workflow whose code outlived its deadline starts no child (before, the child was created
    0.84 s in, past a 0.3 s deadline, and ran to `success`)."""
    past = threading.Event()

    @app.workflow("kid")
    def kid(ctx, _):
        return "kid ran"

    @app.workflow("parent", timeout=0.3)
    def parent(ctx, _):
        time.sleep(0.8)  # past the deadline, in the workflow's own code
        past.set()
        return ctx.wait_for(ctx.start_child("kid"))

    worker = start_worker(app, concurrency=2, lease=timedelta(seconds=30), sweep_interval=60)
    eid = app.enqueue("parent")
    assert past.wait(30)
    wait_for(lambda: worker.stats["refused_writes"] >= 1 or app.get(eid).done, what="the child start's answer")
    assert db.execute("SELECT count(*) FROM workflow_executions WHERE workflow_name = 'kid'").fetchone() == (0,)
    assert sweep_deadlines(db, "kestrel") == [eid]
    assert app.get(eid).status == "error"
