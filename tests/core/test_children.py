"""Child workflows: start once, wait durably, outputs and failures, cancel cascades."""

from __future__ import annotations

import threading

import psycopg

from kestrel_core import ChildFailed, Kestrel
from kestrel_core.workflow.context import Unwind
from tests.waiting import wait_finished as done
from tests.waiting import wait_for, wait_waiting_child


def register_gated(app: Kestrel) -> None:
    """Register "gated", the child these tests cancel, time out or borrow: it waits for
    approval "ok", which none of them gives."""

    @app.workflow("gated")
    def gated(ctx, _):
        ctx.wait_for_approval("ok")
        return "approved"


def test_wait_for_returns_the_child_output(app: Kestrel, db: psycopg.Connection, start_worker) -> None:
    @app.workflow("double")
    def double(ctx, n):
        return ctx.step("times-two", lambda: 2 * n)

    @app.workflow("parent")
    def parent(ctx, n):
        handle = ctx.start_child("double", n)
        return {"child": handle.execution_id, "result": ctx.wait_for(handle)}

    start_worker(app)
    eid = app.enqueue("parent", 21)
    final = done(app, eid)
    assert final.status == "success", final.error
    child = final.output["child"]
    assert final.output["result"] == 42
    assert db.execute(
        "SELECT parent_id, status, engine_key FROM workflow_executions WHERE id = %s", (child,)
    ).fetchone() == (eid, "success", f"child:{eid}:child:double")
    # the parent parked on the child (no thread held) and was woken by its completion
    wait = db.execute(
        "SELECT kind, details, resolved_at IS NOT NULL FROM workflow_waits WHERE execution_id = %s", (eid,)
    ).fetchall()
    assert wait in ([], [("child", {"children": [child]}, True)])


def test_a_failed_child_raises_child_failed_in_the_parent(app: Kestrel, start_worker) -> None:
    @app.workflow("boom")
    def boom(ctx, _):
        raise RuntimeError("disk full")

    @app.workflow("parent")
    def parent(ctx, _):
        handle = ctx.start_child("boom")
        try:
            ctx.wait_for(handle)
        except ChildFailed as exc:
            return {"id": exc.child_id, "status": exc.status, "error": exc.error.splitlines()[0], "message": str(exc)}
        return "unreachable"

    start_worker(app)
    eid = app.enqueue("parent")
    final = done(app, eid)
    assert final.status == "success", final.error
    out = final.output
    assert out["status"] == "error" and out["error"] == "RuntimeError: disk full"
    assert out["message"] == f"child execution {out['id']} ('boom') ended error: RuntimeError: disk full"


def test_a_replay_starts_no_second_child(app: Kestrel, db: psycopg.Connection, start_worker) -> None:
    """The parent crashes (its lease lapses) after starting its children: the replay gets the
    same children back."""
    crashed = threading.Event()

    @app.workflow("leaf")
    def leaf(ctx, i):
        return i * i

    @app.workflow("fan")
    def fan(ctx, n):
        handles = [ctx.start_child("leaf", i) for i in range(n)]
        if not crashed.is_set():
            crashed.set()
            raise Unwind("engine_error")  # as if the worker died here: the lease lapses
        return ctx.wait_for_all(handles)

    start_worker(app)
    eid = app.enqueue("fan", 5)
    final = done(app, eid, timeout=30)
    assert final.status == "success", final.error
    assert final.output == [0, 1, 4, 9, 16]
    assert db.execute("SELECT count(*) FROM workflow_executions WHERE parent_id = %s", (eid,)).fetchone() == (5,)
    assert db.execute("SELECT claims > 1 FROM workflow_executions WHERE id = %s", (eid,)).fetchone() == (True,)


def test_fan_in_of_children_already_finished_does_not_park(app: Kestrel, db: psycopg.Connection, start_worker) -> None:
    release = threading.Event()

    @app.workflow("leaf")
    def leaf(ctx, i):
        return i + 100

    @app.workflow("fan")
    def fan(ctx, n):
        handles = [ctx.start_child("leaf", i) for i in range(n)]
        ctx.step("let-them-finish", release.wait, 20)
        return [ctx.wait_for(h) for h in handles]

    start_worker(app, concurrency=4)
    eid = app.enqueue("fan", 20)
    wait_for(
        lambda: (
            db.execute(
                "SELECT count(*) FROM workflow_executions WHERE parent_id = %s AND status = 'success'", (eid,)
            ).fetchone()[0]
            == 20
        ),
        timeout=30,
        what="every child to finish",
    )
    release.set()
    final = done(app, eid)
    assert final.output == [i + 100 for i in range(20)]
    assert db.execute("SELECT count(*) FROM workflow_waits WHERE execution_id = %s", (eid,)).fetchone() == (0,)
    assert db.execute("SELECT claims FROM workflow_executions WHERE id = %s", (eid,)).fetchone() == (1,)


def test_wait_for_all_parks_once(app: Kestrel, db: psycopg.Connection, start_worker) -> None:
    @app.workflow("leaf")
    def leaf(ctx, i):
        ctx.sleep("pause", 0.2 + 0.05 * (i % 3))
        return i

    @app.workflow("fan")
    def fan(ctx, n):
        return sum(ctx.wait_for_all([ctx.start_child("leaf", i) for i in range(n)]))

    start_worker(app, concurrency=4)
    eid = app.enqueue("fan", 12)
    final = done(app, eid, timeout=30)
    assert (final.status, final.output) == ("success", sum(range(12)))
    waits = db.execute("SELECT kind, step_id FROM workflow_waits WHERE execution_id = %s", (eid,)).fetchall()
    assert waits == [("child", "wait-all:child:leaf+11")]
    assert db.execute("SELECT claims FROM workflow_executions WHERE id = %s", (eid,)).fetchone() == (2,)


def test_cancel_of_a_parent_cancels_its_children_recursively(
    app: Kestrel, db: psycopg.Connection, start_worker
) -> None:
    started = threading.Event()
    stop = threading.Event()

    @app.workflow("busy")
    def busy(ctx, _):
        started.set()
        ctx.step("spin", lambda: stop.wait(20))
        ctx.step("after", lambda: "should not run")

    register_gated(app)

    @app.workflow("middle")
    def middle(ctx, _):
        handles = [ctx.start_child("gated"), ctx.start_child("gated")]
        return ctx.wait_for_all(handles)

    @app.workflow("top")
    def top(ctx, _):
        handles = [ctx.start_child("busy"), ctx.start_child("middle"), ctx.start_child("never-registered")]
        return ctx.wait_for_all(handles)

    worker = start_worker(app, concurrency=4)
    eid = app.enqueue("top")
    wait_for(
        lambda: (
            started.is_set()
            and db.execute(
                "SELECT count(*) FROM workflow_waits WHERE kind = 'approval' AND resolved_at IS NULL"
            ).fetchone()[0]
            == 2
        ),
        timeout=20,
        what="the running child and the two gated grandchildren",
    )
    tree = dict(
        db.execute(
            "WITH RECURSIVE t AS (SELECT id, workflow_name FROM workflow_executions WHERE id = %s"
            " UNION ALL SELECT e.id, e.workflow_name FROM workflow_executions e JOIN t ON e.parent_id = t.id)"
            " SELECT id, workflow_name FROM t",
            (eid,),
        ).fetchall()
    )
    assert sorted(tree.values()) == ["busy", "gated", "gated", "middle", "never-registered", "top"]
    statuses = dict(
        db.execute("SELECT workflow_name, status FROM workflow_executions WHERE id = ANY(%s)", (list(tree),)).fetchall()
    )
    assert statuses["busy"] == "running" and statuses["never-registered"] == "enqueued"

    app.cancel(eid, by="alice", comment="wrong target")
    stop.set()
    rows = db.execute(
        "SELECT id, status, error, finished_at IS NOT NULL FROM workflow_executions WHERE id = ANY(%s)", (list(tree),)
    ).fetchall()
    assert {r[1] for r in rows} == {"cancelled"}
    assert all(r[3] for r in rows)
    by_id = {r[0]: r[2] for r in rows}
    assert by_id[eid] == "wrong target"
    middle_id = next(i for i, n in tree.items() if n == "middle")
    assert by_id[middle_id] == f"cancelled with its parent execution {eid}"
    assert db.execute("SELECT count(*) FROM workflow_waits WHERE resolved_at IS NULL").fetchone() == (0,)
    # the running child is fenced out: its next step never runs
    busy_id = next(i for i, n in tree.items() if n == "busy")
    wait_for(lambda: worker.stats["refused_writes"] >= 1, what="the busy child's checkpoint to be refused")
    assert db.execute(
        "SELECT count(*) FROM operation_outputs WHERE execution_id = %s AND step_id = 'after'", (busy_id,)
    ).fetchone() == (0,)
    assert db.execute("SELECT status FROM workflow_executions WHERE id = %s", (busy_id,)).fetchone() == ("cancelled",)
    audit = db.execute("SELECT actor, action, execution_id FROM operator_actions").fetchall()
    assert audit == [("alice", "cancel", eid)]


def test_a_cancelled_child_fails_the_waiting_parent(app: Kestrel, db: psycopg.Connection, start_worker) -> None:
    register_gated(app)

    @app.workflow("parent")
    def parent(ctx, _):
        try:
            ctx.wait_for(ctx.start_child("gated"))
        except ChildFailed as exc:
            return exc.status

    start_worker(app)
    eid = app.enqueue("parent")
    child = wait_waiting_child(db, eid, what="the child to park")
    wait_for(lambda: app.get(eid).status == "waiting", what="the parent to park")
    app.cancel(child, by="bob")
    assert (done(app, eid).status, app.get(eid).output) == ("success", "cancelled")


def test_wait_for_with_a_timeout_raises_child_failed_timed_out(
    app: Kestrel, db: psycopg.Connection, start_worker
) -> None:
    register_gated(app)

    @app.workflow("impatient")
    def impatient(ctx, _):
        handle = ctx.start_child("gated")
        try:
            return ctx.wait_for(handle, timeout=0.5)
        except ChildFailed as exc:
            return {"timed_out": exc.timed_out, "status": exc.status, "child": exc.child_id}

    start_worker(app)
    eid = app.enqueue("impatient")
    final = done(app, eid)
    child = final.output["child"]
    assert final.output == {"timed_out": True, "status": "waiting", "child": child}
    assert app.get(child).status == "waiting"  # the child itself goes on


def test_requeue_of_the_parent_after_requeue_of_its_failed_child_waits_again(
    app: Kestrel, db: psycopg.Connection, start_worker
) -> None:
    fail = threading.Event()
    fail.set()

    @app.workflow("flaky")
    def flaky(ctx, _):
        if fail.is_set():
            raise RuntimeError("upstream down")
        return "ok"

    @app.workflow("parent")
    def parent(ctx, _):
        return ctx.wait_for(ctx.start_child("flaky"))

    start_worker(app)
    eid = app.enqueue("parent")
    assert done(app, eid).status == "error"
    assert "ChildFailed: child execution" in app.get(eid).error
    child = db.execute("SELECT id FROM workflow_executions WHERE parent_id = %s", (eid,)).fetchone()[0]
    fail.clear()
    app.requeue(child, by="alice")
    app.requeue(eid, by="alice")
    final = done(app, eid)
    assert (final.status, final.output) == ("success", "ok")
    assert db.execute("SELECT count(*) FROM workflow_executions WHERE parent_id = %s", (eid,)).fetchone() == (1,)


def test_an_async_parent_fans_out_and_in(app: Kestrel, start_worker) -> None:
    import asyncio

    @app.workflow("square")
    async def square(ctx, n):
        return await ctx.step("mul", lambda: n * n)

    @app.workflow("async-fan")
    async def async_fan(ctx, n):
        handles = [await ctx.start_child("square", i) for i in range(n)]
        first = await ctx.wait_for(handles[0])
        rest = await asyncio.gather(*(ctx.wait_for(h) for h in handles[1:]))
        return [first, *rest]

    start_worker(app)
    eid = app.enqueue("async-fan", 6)
    final = done(app, eid, timeout=30)
    assert (final.status, final.output) == ("success", [0, 1, 4, 9, 16, 25]), final.error


def test_waiting_for_an_execution_that_is_not_a_child_fails_at_once(app: Kestrel, start_worker) -> None:
    register_gated(app)

    @app.workflow("nosy")
    def nosy(ctx, other):
        try:
            ctx.wait_for({"execution_id": other, "workflow_name": "gated", "step_id": "borrowed"})
        except ChildFailed as exc:
            return [exc.status, exc.error]

    start_worker(app)
    stranger = app.enqueue("gated")
    wait_for(lambda: app.get(stranger).status == "waiting")
    eid = app.enqueue("nosy", stranger)
    assert done(app, eid).output == ["missing", "no such child of this execution (pruned, or started by another one)"]
