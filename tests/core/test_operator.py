"""Cancel and requeue: allowed states, audit rows, and their effect on running executions."""

from __future__ import annotations

import threading

import psycopg
import pytest

from kestrel_core import ActionRefused, Kestrel, NotFound
from tests.waiting import wait_for


def execution_in(app: Kestrel, db: psycopg.Connection, status: str, lease: str | None = None) -> int:
    """A new execution of ``w`` put in ``status``, owned by w1 (its lease: this interval from now)."""
    eid = app.enqueue("w")
    db.execute(
        "UPDATE workflow_executions SET status = %s, owner_id = 'w1', lease_expires = now() + %s::interval"
        " WHERE id = %s",
        (status, lease, eid),
    )
    return eid


@pytest.mark.parametrize("status", ["enqueued", "running", "waiting"])
def test_cancel_allowed_from_live_states(app: Kestrel, db, status: str) -> None:
    eid = execution_in(app, db, status, "30 seconds" if status == "running" else None)
    assert app.cancel(eid, by="alice", comment="wrong target") == status
    row = db.execute(
        "SELECT status, lease_expires, finished_at IS NOT NULL, error FROM workflow_executions WHERE id = %s", (eid,)
    ).fetchone()
    assert row == ("cancelled", None, True, "wrong target")
    assert db.execute("SELECT actor, action, from_status, comment FROM operator_actions").fetchall() == [
        ("alice", "cancel", status, "wrong target")
    ]


@pytest.mark.parametrize("status", ["success", "error", "cancelled"])
def test_cancel_of_finished_is_refused(app: Kestrel, db, status: str) -> None:
    eid = execution_in(app, db, status)
    with pytest.raises(ActionRefused, match=f"already finished \\({status}\\)"):
        app.cancel(eid, by="alice")
    assert db.execute("SELECT status FROM workflow_executions WHERE id = %s", (eid,)).fetchone() == (status,)
    assert db.execute("SELECT count(*) FROM operator_actions").fetchone() == (0,)


@pytest.mark.parametrize("status", ["error", "cancelled"])
def test_requeue_allowed_after_error_or_cancel(app: Kestrel, db, status: str) -> None:
    eid = execution_in(app, db, status)
    assert app.requeue(eid, by="bob") == status
    assert db.execute(
        "SELECT status, error, finished_at FROM workflow_executions WHERE id = %s", (eid,)
    ).fetchone() == ("enqueued", None, None)
    assert db.execute("SELECT actor, action, from_status FROM operator_actions").fetchall() == [
        ("bob", "requeue", status)
    ]


def test_requeue_of_expired_lease_is_allowed_of_live_lease_refused(app: Kestrel, db) -> None:
    live = execution_in(app, db, "running", "30 seconds")
    stuck = execution_in(app, db, "running", "-5 seconds")
    with pytest.raises(ActionRefused, match="is running on w1 \\(lease live until"):
        app.requeue(live, by="bob")
    assert app.requeue(stuck, by="bob") == "running"
    assert app.get(stuck).status == "enqueued"
    assert app.get(live).status == "running"


@pytest.mark.parametrize("status", ["enqueued", "waiting", "success"])
def test_requeue_refused_states(app: Kestrel, db, status: str) -> None:
    eid = execution_in(app, db, status)
    with pytest.raises(ActionRefused, match=f"is {status}"):
        app.requeue(eid, by="bob")
    assert db.execute("SELECT count(*) FROM operator_actions").fetchone() == (0,)


def test_unknown_id_is_not_found(app: Kestrel) -> None:
    with pytest.raises(NotFound, match="no execution with id 404"):
        app.cancel(404, by="x")
    with pytest.raises(NotFound, match="no execution with id 404"):
        app.requeue(404, by="x")
    with pytest.raises(NotFound, match="no execution with id 404"):
        app.get(404)


def test_cancel_reaches_a_running_execution_at_its_next_step(app: Kestrel, ledger, start_worker) -> None:
    in_step = threading.Event()
    release = threading.Event()

    def slow_first():
        in_step.set()
        release.wait(10)
        return "first"

    @app.workflow
    def long(ctx, _):
        ctx.step("first", slow_first)
        ctx.step(
            "second",
            lambda: ledger.execute(
                "INSERT INTO public.ledger (execution_id, step_id) VALUES (%s, 'second') RETURNING id",
                (ctx.execution_id,),
            ).fetchone()[0],
        )
        return "finished"

    worker = start_worker(app)
    eid = app.enqueue("long")
    assert in_step.wait(10)
    assert app.cancel(eid, by="alice") == "running"
    release.set()
    wait_for(lambda: worker.stats["refused_writes"] >= 1, what="the worker to notice the cancel")
    wait_for(lambda: eid not in worker._inflight, what="the worker to drop the execution")
    assert app.get(eid).status == "cancelled"
    assert ledger.execute("SELECT count(*) FROM public.ledger").fetchone() == (0,)
    assert ledger.execute("SELECT count(*) FROM operation_outputs WHERE execution_id = %s", (eid,)).fetchone() == (0,)


def test_requeue_of_cancelled_waiting_execution_reopens_its_gate(app: Kestrel, start_worker) -> None:
    @app.workflow
    def gate(ctx, _):
        return ctx.wait_for_approval("ok").approved

    start_worker(app)
    eid = app.enqueue("gate")
    wait_for(lambda: app.get(eid).status == "waiting")
    app.cancel(eid, by="a")
    app.requeue(eid, by="a")
    wait_for(lambda: app.get(eid).status == "waiting")
    app.approve(eid, "ok", by="b")
    wait_for(lambda: app.get(eid).status == "success")
    assert app.get(eid).output is True
