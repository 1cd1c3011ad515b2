"""Durable sleeps and approval gates."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import psycopg
import pytest

from kestrel_core import ActionRefused, InvalidArgument, Kestrel, NotFound
from kestrel_core.workflow.flow_context import value_refused
from tests.waiting import wait_for


def status(app: Kestrel, eid: int, want: str, timeout: float = 15.0) -> None:
    wait_for(lambda: app.get(eid).status == want, timeout=timeout, what=f"execution {eid} to be {want}")


def register_gate(app: Kestrel, timeout: float | None = None) -> None:
    @app.workflow("gate")
    def gate(ctx, details):
        prepared = ctx.step("prepare", lambda: {"fix": details})
        d = ctx.wait_for_approval("approve-fix", timeout=timeout, details=prepared)
        return {"approved": d.approved, "by": d.by, "comment": d.comment, "timed_out": d.timed_out}


def gate_waiting_with_no_worker(app: Kestrel, start_worker) -> int:
    """An execution of ``gate`` waiting for its approval, its worker stopped; its id."""
    register_gate(app)
    worker = start_worker(app)
    eid = app.enqueue("gate", "x")
    status(app, eid, "waiting")
    worker.stop()
    return eid


def test_sleep_parks_then_resumes(app: Kestrel, db: psycopg.Connection, start_worker) -> None:
    @app.workflow
    def napper(ctx, _):
        t0 = ctx.step("t0", time.time)
        ctx.sleep("nap", 1.0)
        return ctx.step("t1", time.time) - t0

    start_worker(app)
    eid = app.enqueue("napper")
    status(app, eid, "waiting")
    wait = db.execute(
        "SELECT kind, resolved_at IS NULL, wake_at > now() FROM workflow_waits WHERE execution_id = %s", (eid,)
    ).fetchone()
    assert wait == ("sleep", True, True)
    assert db.execute(
        "SELECT owner_id IS NOT NULL, lease_expires FROM workflow_executions WHERE id = %s", (eid,)
    ).fetchone() == (True, None)  # lease released while waiting
    status(app, eid, "success")
    assert app.get(eid).output >= 1.0
    assert db.execute(
        "SELECT resolved_at IS NOT NULL FROM workflow_waits WHERE execution_id = %s", (eid,)
    ).fetchone() == (True,)


def test_approve_records_decision_audit_and_resumes(app: Kestrel, db: psycopg.Connection, start_worker) -> None:
    register_gate(app)
    start_worker(app)
    eid = app.enqueue("gate", "raise memory")
    status(app, eid, "waiting")
    details = db.execute("SELECT details FROM workflow_waits WHERE execution_id = %s", (eid,)).fetchone()[0]
    assert details == {"fix": "raise memory"}
    app.approve(eid, "approve-fix", by="alice", comment="lgtm")
    status(app, eid, "success")
    assert app.get(eid).output == {"approved": True, "by": "alice", "comment": "lgtm", "timed_out": False}
    wait = db.execute(
        "SELECT decision, decided_by, comment, decided_at IS NOT NULL FROM workflow_waits WHERE execution_id = %s",
        (eid,),
    ).fetchone()
    assert wait == ("approved", "alice", "lgtm", True)
    audit = db.execute(
        "SELECT actor, action, execution_id, step_id, comment, from_status FROM operator_actions"
    ).fetchall()
    assert audit == [("alice", "approve", eid, "approve-fix", "lgtm", "waiting")]


def test_reject_is_seen_by_the_workflow(app: Kestrel, start_worker) -> None:
    register_gate(app)
    start_worker(app)
    eid = app.enqueue("gate", "risky")
    status(app, eid, "waiting")
    app.reject(eid, "approve-fix", by="bob", comment="too risky")
    status(app, eid, "success")
    assert app.get(eid).output == {"approved": False, "by": "bob", "comment": "too risky", "timed_out": False}


def test_approval_decided_while_no_worker_runs_is_picked_up_later(app: Kestrel, start_worker) -> None:
    eid = gate_waiting_with_no_worker(app, start_worker)
    app.approve(eid, "approve-fix", by="carol")
    assert app.get(eid).status == "enqueued"
    start_worker(app)
    status(app, eid, "success")
    assert app.get(eid).output["by"] == "carol"


def test_approval_timeout_yields_timed_out_decision(app: Kestrel, db, start_worker) -> None:
    register_gate(app, timeout=0.5)
    start_worker(app)
    eid = app.enqueue("gate", "slow humans")
    status(app, eid, "success")
    assert app.get(eid).output == {"approved": False, "by": None, "comment": None, "timed_out": True}
    assert db.execute("SELECT decision FROM workflow_waits WHERE execution_id = %s", (eid,)).fetchone() == (
        "timed_out",
    )
    with pytest.raises(ActionRefused, match="already decided \\(timed_out by the timeout"):
        app.approve(eid, "approve-fix", by="late")


def test_deciding_twice_is_refused_and_changes_nothing(app: Kestrel, db, start_worker) -> None:
    eid = gate_waiting_with_no_worker(app, start_worker)
    app.approve(eid, "approve-fix", by="alice")

    def decisions() -> tuple:
        return (
            db.execute("SELECT * FROM workflow_waits").fetchall(),
            db.execute("SELECT count(*) FROM operator_actions").fetchone(),
        )

    before = decisions()
    with pytest.raises(ActionRefused, match="already decided \\(approved by alice"):
        app.reject(eid, "approve-fix", by="bob")
    assert decisions() == before


def test_deciding_unknown_or_non_waiting_is_refused(app: Kestrel, db) -> None:
    with pytest.raises(NotFound, match="no execution with id 999"):
        app.approve(999, "approve-fix", by="alice")
    eid = app.enqueue("gate", "x")
    with pytest.raises(NotFound, match='has no approval gate "approve-fix"'):
        app.approve(eid, "approve-fix", by="alice")
    assert db.execute("SELECT count(*) FROM operator_actions").fetchone() == (0,)


def test_deciding_a_sleep_is_refused(app: Kestrel, start_worker) -> None:
    @app.workflow
    def napper(ctx, _):
        ctx.sleep("nap", 60)

    start_worker(app)
    eid = app.enqueue("napper")
    status(app, eid, "waiting")
    with pytest.raises(ActionRefused, match="is a durable sleep, not an approval gate"):
        app.approve(eid, "nap", by="alice")


def test_concurrent_decisions_exactly_one_wins(app: Kestrel, dsn: str, start_worker) -> None:
    eid = gate_waiting_with_no_worker(app, start_worker)
    outcomes: list[str] = []
    barrier = threading.Barrier(6)

    def decide(i: int) -> None:
        with Kestrel(dsn) as terminal:
            barrier.wait()
            try:
                (terminal.approve if i % 2 else terminal.reject)(eid, "approve-fix", by=f"op{i}")
                outcomes.append("won")
            except ActionRefused:
                outcomes.append("refused")

    threads = [threading.Thread(target=decide, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["refused"] * 5 + ["won"]
    with app.connection() as conn:
        assert conn.execute("SELECT count(*) FROM kestrel.operator_actions").fetchone() == (1,)


def test_sleep_survives_restart_of_every_worker(app: Kestrel, db: psycopg.Connection, start_worker) -> None:
    @app.workflow
    def napper(ctx, _):
        ctx.step("before", lambda: "b")
        ctx.sleep("nap", 2.0)
        return ctx.step("after", lambda: "a")

    first = start_worker(app)
    eid = app.enqueue("napper")
    status(app, eid, "waiting")
    first.stop()
    # No worker at all while the sleep is pending: the first one has retired, the nap not due.
    assert db.execute("SELECT count(*) FROM workers WHERE stopped_at IS NULL").fetchone() == (0,)
    assert db.execute(
        "SELECT wake_at > now() FROM workflow_waits WHERE execution_id = %s AND step_id = 'nap'", (eid,)
    ).fetchone() == (True,)
    start_worker(app, worker_id="second")
    status(app, eid, "success", timeout=10)
    assert app.get(eid).owner_id == "second"


def test_deciding_a_cancelled_execution_is_refused(app: Kestrel, db, start_worker) -> None:
    eid = gate_waiting_with_no_worker(app, start_worker)
    app.cancel(eid, by="alice")
    with pytest.raises(ActionRefused, match='execution .* is cancelled, not waiting for approval "approve-fix"'):
        app.approve(eid, "approve-fix", by="bob")
    assert db.execute("SELECT decision FROM workflow_waits WHERE execution_id = %s", (eid,)).fetchone() == (None,)
    assert [r[0] for r in db.execute("SELECT action FROM operator_actions ORDER BY id")] == ["cancel"]


@pytest.mark.parametrize(
    "wait",
    ["sleep", "sleep_nan", "approval_timeout", "event_timeout", "children_timeout"],
)
def test_a_wait_beyond_the_calendar_ends_the_execution_as_error_instead_of_replaying_it_forever(
    app: Kestrel, start_worker, wait: str
) -> None:
    """``ctx.sleep("nap", timedelta(days=999_999_999))`` failed on the server (``now() +
    interval``: 22008), taken for a failed engine write: replayed every lease, forever (issue
    43 review). A duration is checked where the workflow gives it (InvalidArgument, the
    workflow's own error: catchable, else it ends the execution as error)."""
    huge = timedelta(days=999_999_999)

    @app.workflow("napper")
    def napper(ctx, _):
        try:
            if wait == "sleep":
                ctx.sleep("nap", huge)
            elif wait == "sleep_nan":
                ctx.sleep("nap", float("nan"))
            elif wait == "approval_timeout":
                ctx.wait_for_approval("gate", timeout=huge)
            elif wait == "event_timeout":
                ctx.wait_for_event("never", timeout=huge)
            else:
                ctx.wait_for(ctx.start_child("napper", None), timeout=huge)
        except InvalidArgument as exc:
            raise RuntimeError(f"caught: {exc}") from exc
        return "woke"

    start_worker(app, lease=timedelta(seconds=1))
    eid = app.enqueue("napper", None)
    wait_for(lambda: app.get(eid).done, timeout=10, what="the execution to end in an outcome")
    assert app.get(eid).status == "error"
    assert "caught: " in app.get(eid).error and "out of range" in app.get(eid).error


def test_a_workflow_timeout_beyond_the_calendar_is_refused_when_registered(app: Kestrel) -> None:
    with pytest.raises(InvalidArgument, match="at most 3650 days"):
        app.workflow("forever", timeout=timedelta(days=999_999))(lambda ctx, _: None)


def test_a_data_exception_of_an_engine_write_is_the_workflows_error(db: psycopg.Connection) -> None:
    """What the database says of a value it will never store (class 22) ends the execution as
    error (``value_refused``), not a failed engine write replayed every lease; the rest is not."""
    with pytest.raises(psycopg.errors.DataError) as refused:
        db.execute("SELECT now() + interval '999999999 days'")
    db.rollback()
    error = value_refused(refused.value)
    assert isinstance(error, InvalidArgument) and "(22008)" in str(error)
    with pytest.raises(psycopg.Error) as other:
        db.execute("SELECT pg_sleep(1) FROM no_such_table")
    db.rollback()
    assert value_refused(other.value) is None
