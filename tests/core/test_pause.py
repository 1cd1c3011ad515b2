"""Pause / resume one execution (issue 47): a running one stops at its next step boundary (the
step in flight is checkpointed, no step starts after the pause commits) and holds no worker, a
paused one is never claimed, its waits keep their deadlines, and resume goes on from the
checkpoints. Audited; refused, changing nothing, where the state does not allow it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import psycopg
import pytest

from kestrel_core import ActionRefused, AsyncKestrel, Kestrel, NotFound
from kestrel_core.engine.worker import Worker
from tests.core.conftest import ledger_rows
from tests.core.test_roles import Logins, as_user, logins, refused  # noqa: F401 (fixture)
from tests.waiting import wait_finished_row as finished
from tests.waiting import wait_for, wait_waiting_child

STATUS = "SELECT status FROM workflow_executions WHERE id = %s"


def status(db: psycopg.Connection, eid: int) -> str:
    return str(db.execute(STATUS, (eid,)).fetchone()[0])


def steps_run(db: psycopg.Connection, eid: int) -> list[str]:
    return [s for _, s in ledger_rows(db, eid)]


def record(app: Kestrel, execution_id: int, step_id: str) -> str:
    with psycopg.connect(app.dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO public.ledger (execution_id, step_id) VALUES (%s, %s)", (execution_id, step_id))
    return step_id


def chain_held_in_s2(app: Kestrel, steps: list[str]) -> tuple[threading.Event, threading.Event]:
    """Register ``chain``: these steps in order, each recorded in the ledger when it runs; s2,
    once recorded, sets the first event and waits for the second (30 s at most)."""
    in_s2, go_on = threading.Event(), threading.Event()

    def s2(app: Kestrel, execution_id: int, step_id: str) -> str:
        record(app, execution_id, step_id)
        in_s2.set()
        go_on.wait(30)
        return step_id

    @app.workflow("chain")
    def chain(ctx, _):
        return [ctx.step(step, s2 if step == "s2" else record, app, ctx.execution_id, step) for step in steps]

    return in_s2, go_on


@pytest.mark.parametrize("seen_by", ["boundary", "heartbeat"])
def test_a_running_execution_stops_at_its_next_step_boundary_and_resumes_from_its_checkpoints(
    app: Kestrel,
    ledger: psycopg.Connection,
    db: psycopg.Connection,
    start_worker: Callable[..., Worker],
    seen_by: str,
) -> None:
    """``seen_by``: the pause is met by s2's boundary write, or first by the heartbeat (the
    claim found no longer running while s2 runs): either way s2 is kept."""
    in_s2, go_on = chain_held_in_s2(app, ["s1", "s2", "s3", "s4"])

    worker = start_worker(app)
    eid = app.enqueue("chain", None)
    assert in_s2.wait(30)
    assert app.pause(eid, by="alice", comment="looks wrong") == "running"
    assert status(db, eid) == "paused"
    if seen_by == "heartbeat":
        wait_for(
            lambda: any(h.lost.is_set() for h in list(worker._inflight.values())),
            what="the heartbeat to find the claim paused",
        )
    go_on.set()  # s2 ends after the pause committed: it is checkpointed, s3 never starts
    wait_for(lambda: worker.stats["lost"] == 1, what="the worker to let the paused execution go")
    assert steps_run(db, eid) == ["s1", "s2"]
    checkpointed = "SELECT step_id FROM operation_outputs WHERE execution_id = %s ORDER BY seq"
    assert [r[0] for r in db.execute(checkpointed, (eid,))] == ["s1", "s2"]
    assert status(db, eid) == "paused"
    # The let-go (its lease cleared) is written just after the worker counts the execution lost.
    wait_for(
        lambda: (
            db.execute(
                "SELECT owner_id IS NOT NULL, lease_expires FROM workflow_executions WHERE id = %s", (eid,)
            ).fetchone()
            == (True, None)
        ),
        what="the worker's let-go (lease cleared, owner kept)",
    )
    assert worker.stats["failed"] == 0
    # Nothing claims it while paused: another execution runs through meanwhile.
    other = app.enqueue("chain", None)
    assert finished(db, other) == ("success", ["s1", "s2", "s3", "s4"])
    assert steps_run(db, eid) == ["s1", "s2"] and status(db, eid) == "paused"

    assert app.resume(eid, by="bob", comment="fixed upstream") == "enqueued"
    assert finished(db, eid) == ("success", ["s1", "s2", "s3", "s4"])
    # s1 and s2 (in flight when the pause committed) were checkpointed: neither ran again;
    # s3 and s4 ran once, after the resume (issue 43 review: s2 ran twice before).
    assert steps_run(db, eid) == ["s1", "s2", "s3", "s4"]
    audit = db.execute(
        "SELECT actor, action, comment, from_status, details FROM operator_actions WHERE execution_id = %s ORDER BY id",
        (eid,),
    ).fetchall()
    assert audit == [
        ("alice", "pause", "looks wrong", "running", None),
        ("bob", "resume", "fixed upstream", "paused", {"to": "enqueued"}),
    ]


@pytest.mark.parametrize("heartbeat_saw_it", [False, True])
def test_a_resume_before_the_step_in_flight_returns_gives_it_back_to_its_claim_and_runs_it_once(
    app: Kestrel,
    ledger: psycopg.Connection,
    db: psycopg.Connection,
    start_worker: Callable[..., Worker],
    heartbeat_saw_it: bool,
) -> None:
    """An operator's quick pause then resume while s2 runs (issue 43 review): the claim still
    runs it, so the resume gives it back to that claim ('running'): s2's end is checkpointed,
    and no new claim runs s2 again (before: 'enqueued', s2's checkpoint refused, s1 s2 s2 s3)."""
    in_s2, go_on = chain_held_in_s2(app, ["s1", "s2", "s3"])

    worker = start_worker(app)
    eid = app.enqueue("chain", None)
    assert in_s2.wait(30)
    assert app.pause(eid, by="alice") == "running"
    if heartbeat_saw_it:  # the claim is no longer held, its lease only renewed
        wait_for(lambda: any(h.lost.is_set() for h in list(worker._inflight.values())), what="the heartbeat")
    assert app.resume(eid, by="alice") == "running"
    go_on.set()
    assert finished(db, eid) == ("success", ["s1", "s2", "s3"])
    assert steps_run(db, eid) == ["s1", "s2", "s3"]
    assert db.execute("SELECT claims FROM workflow_executions WHERE id = %s", (eid,)).fetchone() == (1,)


def test_an_enqueued_execution_paused_is_never_claimed(
    app: Kestrel, ledger: psycopg.Connection, db: psycopg.Connection, start_worker: Callable[..., Worker]
) -> None:
    @app.workflow("one")
    def one(ctx, n):
        return ctx.step("s1", record, app, ctx.execution_id, "s1")

    held = app.enqueue("one", 1)
    assert app.pause(held, by="alice") == "enqueued"
    assert db.execute("SELECT count(*) FROM executions_ready WHERE id = %s", (held,)).fetchone() == (0,)
    start_worker(app)
    others = [app.enqueue("one", n) for n in range(3)]
    for other in others:
        assert finished(db, other)[0] == "success"
    assert status(db, held) == "paused" and steps_run(db, held) == []
    assert app.resume(held, by="alice") == "enqueued"
    assert finished(db, held) == ("success", "s1")


def test_a_sleep_that_comes_due_while_paused_is_kept_and_resume_runs_at_once(
    app: Kestrel, ledger: psycopg.Connection, db: psycopg.Connection, start_worker: Callable[..., Worker]
) -> None:
    @app.workflow("napper")
    def napper(ctx, _):
        ctx.step("before", record, app, ctx.execution_id, "before")
        ctx.sleep("nap", timedelta(seconds=0.5))
        return ctx.step("after", record, app, ctx.execution_id, "after")

    start_worker(app)
    eid = app.enqueue("napper", None)
    wait_for(lambda: status(db, eid) == "waiting", what="the sleep")
    assert app.pause(eid, by="alice") == "waiting"
    # The sleep comes due while paused: resolved and checkpointed by the sweep, the execution
    # stays paused (its deadline held), and nothing runs.
    wait_for(
        lambda: db.execute(
            "SELECT resolved_at IS NOT NULL FROM workflow_waits WHERE execution_id = %s AND step_id = 'nap'", (eid,)
        ).fetchone()[0],
        what="the sleep to come due",
    )
    assert status(db, eid) == "paused" and steps_run(db, eid) == ["before"]
    assert app.resume(eid, by="alice") == "enqueued"
    assert finished(db, eid) == ("success", "after")
    assert steps_run(db, eid) == ["before", "after"]


def test_a_gate_decided_while_paused_keeps_it_paused_and_an_open_one_resumes_to_waiting(
    app: Kestrel, db: psycopg.Connection, start_worker: Callable[..., Worker]
) -> None:
    @app.workflow("gated")
    def gated(ctx, _):
        first = ctx.wait_for_approval("first", timeout=timedelta(hours=1))
        second = ctx.wait_for_approval("second", timeout=timedelta(hours=1))
        return [first.by, second.by]

    start_worker(app)
    eid = app.enqueue("gated", None)
    wait_for(lambda: status(db, eid) == "waiting", what="the first gate")
    deadline = db.execute("SELECT wake_at FROM workflow_waits WHERE execution_id = %s", (eid,)).fetchone()
    assert app.pause(eid, by="alice") == "waiting"
    assert app.resume(eid, by="alice") == "waiting"  # its gate still open: parked again, same deadline
    assert db.execute("SELECT wake_at FROM workflow_waits WHERE execution_id = %s", (eid,)).fetchone() == deadline
    app.pause(eid, by="alice")
    app.approve(eid, "first", by="bob")  # a gate of a paused execution is still decided
    assert status(db, eid) == "paused"
    assert app.resume(eid, by="alice") == "enqueued"
    wait_for(
        lambda: db.execute(
            "SELECT 1 FROM workflow_waits WHERE execution_id = %s AND step_id = 'second' AND resolved_at IS NULL",
            (eid,),
        ).fetchone(),
        what="the second gate",
    )
    app.approve(eid, "second", by="carol")
    assert finished(db, eid) == ("success", ["bob", "carol"])


def test_refusals_change_nothing_and_a_paused_execution_can_be_cancelled(app: Kestrel, db: psycopg.Connection) -> None:
    eid = app.enqueue("anything", 1)
    with pytest.raises(ActionRefused, match=f"execution {eid} is not paused \\(it is enqueued\\)"):
        app.resume(eid, by="alice")
    app.pause(eid, by="alice")
    with pytest.raises(ActionRefused, match=f"execution {eid} is already paused"):
        app.pause(eid, by="alice")
    with pytest.raises(ActionRefused, match=f"cannot requeue: execution {eid} is paused"):
        app.requeue(eid, by="alice")
    with pytest.raises(NotFound, match="no execution with id"):
        app.pause(10**12, by="alice")
    with pytest.raises(NotFound, match="no execution with id"):
        app.resume(10**12, by="alice")
    assert status(db, eid) == "paused"
    assert app.cancel(eid, by="bob") == "paused"
    assert status(db, eid) == "cancelled"
    with pytest.raises(ActionRefused, match=f"execution {eid} already finished \\(cancelled\\)"):
        app.pause(eid, by="alice")
    actions = db.execute("SELECT action FROM operator_actions WHERE execution_id = %s ORDER BY id", (eid,)).fetchall()
    assert actions == [("pause",), ("cancel",)]


def test_a_paused_child_keeps_its_parent_waiting_and_is_cancelled_with_it(
    app: Kestrel, db: psycopg.Connection, start_worker: Callable[..., Worker]
) -> None:
    @app.workflow("parent")
    def parent(ctx, n):
        return ctx.wait_for(ctx.start_child("leaf", n))

    start_worker(app)  # runs parents only: the children wait for the leaf worker below
    kept, dropped = app.enqueue("parent", 1), app.enqueue("parent", 2)
    child_of = {}
    for eid in (kept, dropped):
        wait_for(lambda eid=eid: status(db, eid) == "waiting", what=f"parent {eid} to park")
        (child_of[eid],) = db.execute("SELECT id FROM workflow_executions WHERE parent_id = %s", (eid,)).fetchone()
        assert app.pause(child_of[eid], by="alice") == "enqueued"
    app.cancel(dropped, by="bob")  # a paused child is cancelled with its parent
    assert status(db, child_of[dropped]) == "cancelled"

    leaves = Kestrel(app.dsn, transaction_pooling=app.transaction_pooling)

    @leaves.workflow("leaf")
    def leaf(ctx, n):
        return n

    leaf_worker = start_worker(leaves)
    assert finished(db, leaves.enqueue("leaf", 3)) == ("success", 3)
    assert status(db, child_of[kept]) == "paused" and status(db, kept) == "waiting"
    app.resume(child_of[kept], by="alice")
    assert finished(db, kept) == ("success", 1)
    leaf_worker.stop(grace=timedelta(0))
    leaves.close()


async def test_the_async_client_pauses_and_resumes_the_same(app: Kestrel, db: psycopg.Connection) -> None:
    eid = app.enqueue("anything", 1)
    async with AsyncKestrel(app.dsn, transaction_pooling=app.transaction_pooling) as client:
        assert await client.pause(eid, by="carol", comment="hold") == "enqueued"
        assert status(db, eid) == "paused"
        assert await client.resume(eid, by="carol") == "enqueued"
    assert status(db, eid) == "enqueued"
    assert db.execute("SELECT count(*) FROM executions_ready WHERE id = %s", (eid,)).fetchone() == (1,)
    assert db.execute(
        "SELECT array_agg(action ORDER BY id) FROM operator_actions WHERE actor = 'carol'"
    ).fetchone() == (["pause", "resume"],)


def test_only_the_audited_functions_move_an_execution_into_or_out_of_paused(
    logins: Logins, db: psycopg.Connection
) -> None:
    live, held = (
        db.execute("INSERT INTO workflow_executions (workflow_name) VALUES ('w') RETURNING id").fetchone()[0]
        for _ in range(2)
    )
    db.execute("SELECT kestrel.pause_execution(%s, 'alice', NULL)", (held,))
    with as_user(logins.worker_dsn) as conn:
        assert refused(conn, "UPDATE workflow_executions SET status = 'paused' WHERE id = %s", (live,))
        for to in ("enqueued", "running", "waiting"):
            assert refused(conn, "UPDATE workflow_executions SET status = %s WHERE id = %s", (to, held))
        assert refused(conn, "SELECT pause_execution(%s, 'mallory', NULL)", (live,))
        assert refused(conn, "SELECT resume_execution(%s, 'mallory', NULL)", (held,))
    with as_user(logins.operator_dsn) as conn:
        assert conn.execute("SELECT resume_execution(%s, 'bob', NULL)", (held,)).fetchone() == ("enqueued",)
        assert conn.execute("SELECT pause_execution(%s, 'bob', NULL)", (live,)).fetchone() == ("enqueued",)
    assert [status(db, live), status(db, held)] == ["paused", "enqueued"]
    assert db.execute(
        "SELECT actor, action, db_user = %s FROM operator_actions ORDER BY id", (logins.operator_user,)
    ).fetchall() == [
        ("alice", "pause", False),
        ("bob", "resume", True),
        ("bob", "pause", True),
    ]


def test_a_paused_waiting_child_cancelled_with_its_parent_has_its_waits_closed(
    app: Kestrel, db: psycopg.Connection, start_worker: Callable[..., Worker]
) -> None:
    """The cascade cancels a paused child, and closed its waits only when it was 'waiting':
    a paused, waiting child kept its gate open after it was cancelled (issue 43 review)."""

    @app.workflow("parent")
    def parent(ctx, _):
        return ctx.wait_for(ctx.start_child("gated", None))

    @app.workflow("gated")
    def gated(ctx, _):
        return ctx.wait_for_approval("ok").approved

    start_worker(app)
    eid = app.enqueue("parent", None)
    child = wait_waiting_child(db, eid, what="the child to wait at its gate")
    assert app.pause(child, by="alice") == "waiting"
    app.cancel(eid, by="bob")
    assert status(db, child) == "cancelled"
    open_waits = "SELECT count(*) FROM workflow_waits WHERE execution_id = %s AND resolved_at IS NULL"
    assert db.execute(open_waits, (child,)).fetchone() == (0,)
