"""Fork (issue 47): a new execution from a chosen step of a finished or waiting one runs exactly
that step and every step after it again, keeps the checkpoints before it, is linked to its origin
and audited, and is refused, changing nothing, where it cannot be honoured."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest

from kestrel_core import ActionRefused, AsyncKestrel, InvalidArgument, Kestrel, NotFound, NotSerializable
from kestrel_core.engine.worker import Worker
from tests.core.conftest import ledger_rows
from tests.waiting import wait_finished_row as finished
from tests.waiting import wait_for

STEPS = ["s1", "s2", "s3", "s4"]


def register_chain(app: Kestrel, version: str | None = None) -> None:
    """Four steps, each recording in the ledger that it ran; the output says what input it saw."""

    def record(execution_id: int, step_id: str, seen: object) -> str:
        with psycopg.connect(app.dsn, autocommit=True) as conn:
            conn.execute("INSERT INTO public.ledger (execution_id, step_id) VALUES (%s, %s)", (execution_id, step_id))
        return f"{step_id}:{seen}"

    @app.workflow("chain", version=version)
    def chain(ctx, data):
        return [ctx.step(step, record, ctx.execution_id, step, data) for step in STEPS]


@pytest.fixture
def chain_app(app: Kestrel, ledger: psycopg.Connection, start_worker: Callable[..., Worker]) -> Kestrel:
    register_chain(app)
    start_worker(app)
    return app


@pytest.mark.parametrize("k", range(1, len(STEPS) + 1))
def test_a_fork_from_step_k_runs_exactly_steps_k_to_n_again(chain_app: Kestrel, db: psycopg.Connection, k: int) -> None:
    origin = chain_app.enqueue("chain", "first")
    assert finished(db, origin)[0] == "success"
    from_step = STEPS[k - 1]
    fork = chain_app.fork(origin, from_step=from_step, by="alice", comment="after the fix")
    assert fork != origin
    status, output = finished(db, fork)
    assert status == "success"
    assert output == [f"{s}:first" for s in STEPS]  # the kept steps' outputs and the new ones alike
    assert [s for e, s in ledger_rows(db, fork)] == STEPS[k - 1 :]  # k..n ran, 1..k-1 did not
    assert [s for e, s in ledger_rows(db, origin)] == STEPS  # the origin untouched
    kept = db.execute(
        "SELECT step_id FROM operation_outputs WHERE execution_id = %s AND created_at < "
        "(SELECT created_at FROM workflow_executions WHERE id = %s) ORDER BY seq",
        (fork, fork),
    ).fetchall()
    assert [s for (s,) in kept] == STEPS[: k - 1]
    assert db.execute("SELECT origin_id, from_step FROM execution_forks WHERE fork_id = %s", (fork,)).fetchone() == (
        origin,
        from_step,
    )
    audit = db.execute(
        "SELECT actor, action, execution_id, step_id, comment, from_status, details->>'fork_id'"
        " FROM operator_actions WHERE action = 'fork'"
    ).fetchall()
    assert audit == [("alice", "fork", origin, from_step, "after the fix", "success", str(fork))]


def test_a_fork_with_new_input_runs_on_it_from_the_step(chain_app: Kestrel, db: psycopg.Connection) -> None:
    origin = chain_app.enqueue("chain", "first")
    finished(db, origin)
    fork = chain_app.fork(origin, from_step="s3", input="fixed", by="alice")
    assert finished(db, fork) == ("success", ["s1:first", "s2:first", "s3:fixed", "s4:fixed"])
    assert db.execute("SELECT input FROM workflow_executions WHERE id = %s", (fork,)).fetchone() == ("fixed",)
    null_fork = chain_app.fork(origin, from_step="s4", input=None, by="alice")  # null is an input too
    assert finished(db, null_fork) == ("success", ["s1:first", "s2:first", "s3:first", "s4:None"])


def test_a_failed_execution_is_forked_from_its_failed_step(
    app: Kestrel, ledger: psycopg.Connection, db: psycopg.Connection, start_worker: Callable[..., Worker]
) -> None:
    attempts: list[str] = []

    def flaky(data: str) -> str:
        attempts.append(data)
        if data == "bad":
            raise RuntimeError("bad input")
        return data

    @app.workflow("two")
    def two(ctx, data):
        ctx.step("prepare", lambda: "ready")
        return ctx.step("apply", flaky, data)

    start_worker(app)
    origin = app.enqueue("two", "bad")
    assert finished(db, origin)[0] == "error"
    fork = app.fork(origin, from_step="apply", input="good", by="bob")
    assert finished(db, fork) == ("success", "good")
    assert attempts == ["bad", "good"]


@pytest.mark.parametrize("status", ["enqueued", "running"])
def test_a_live_execution_is_not_forked(app: Kestrel, db: psycopg.Connection, status: str) -> None:
    eid = app.enqueue("chain", 1)
    db.execute("UPDATE workflow_executions SET status = %s WHERE id = %s", (status, eid))
    with pytest.raises(ActionRefused, match=f"execution {eid} is {status}"):
        app.fork(eid, from_step="s1", by="alice")
    assert db.execute("SELECT count(*) FROM workflow_executions").fetchone() == (1,)
    assert db.execute("SELECT count(*) FROM operator_actions").fetchone() == (0,)


def test_refusals_change_nothing(chain_app: Kestrel, db: psycopg.Connection) -> None:
    origin = chain_app.enqueue("chain", "first")
    finished(db, origin)
    before = db.execute("SELECT count(*) FROM workflow_executions").fetchone()
    with pytest.raises(NotFound, match="has no step 'nope'"):
        chain_app.fork(origin, from_step="nope", by="alice")
    with pytest.raises(NotFound, match="no execution with id"):
        chain_app.fork(10**12, from_step="s1", by="alice")
    with pytest.raises(ActionRefused, match="no live worker runs workflow 'chain' at version 'v9'"):
        chain_app.fork(origin, from_step="s1", version="v9", by="alice")
    with pytest.raises(InvalidArgument, match="from_step"):
        chain_app.fork(origin, from_step="", by="alice")
    with pytest.raises(NotSerializable, match="input of the fork"):
        chain_app.fork(origin, from_step="s1", input={1, 2}, by="alice")
    assert db.execute("SELECT count(*) FROM workflow_executions").fetchone() == before
    assert db.execute("SELECT count(*) FROM operator_actions WHERE action = 'fork'").fetchone() == (0,)


def test_a_fork_on_a_version_runs_only_on_its_workers(
    app: Kestrel, ledger: psycopg.Connection, db: psycopg.Connection, start_worker: Callable[..., Worker]
) -> None:
    register_chain(app, version="v1")
    worker = start_worker(app)
    origin = app.enqueue("chain", "first")
    finished(db, origin)
    worker.stop()
    fixed = Kestrel(app.dsn, transaction_pooling=app.transaction_pooling)
    register_chain(fixed, version="v2")
    start_worker(fixed)
    with pytest.raises(ActionRefused, match="at version 'v1'"):  # its own version: no worker left
        app.fork(origin, from_step="s2", by="alice")
    fork = app.fork(origin, from_step="s2", version="v2", by="alice")
    assert finished(db, fork)[0] == "success"
    assert db.execute("SELECT version FROM workflow_executions WHERE id = %s", (fork,)).fetchone() == ("v2",)
    fixed.close()


async def test_the_async_client_forks_the_same(chain_app: Kestrel, db: psycopg.Connection) -> None:
    origin = chain_app.enqueue("chain", "first")
    finished(db, origin)
    async with AsyncKestrel(chain_app.dsn, transaction_pooling=chain_app.transaction_pooling) as client:
        fork = await client.fork(origin, from_step="s2", input="again", by="carol")
    assert finished(db, fork) == ("success", ["s1:first", "s2:again", "s3:again", "s4:again"])
    assert db.execute("SELECT actor FROM operator_actions WHERE action = 'fork'").fetchone() == ("carol",)


def test_a_fork_past_an_approval_gate_is_refused_and_from_the_gate_asks_again(
    app: Kestrel, db: psycopg.Connection, start_worker: Callable[..., Worker]
) -> None:
    """A decision belongs to the execution it was made on (and its audit row): a fork that kept
    the gate's checkpoint would replay a decision nobody made on it (found by the review: the
    fork ended as error, UnauditedDecision). Forking from the gate asks it again."""

    @app.workflow("gated")
    def gated(ctx, data):
        a = ctx.step("s1", lambda: "one")
        decision = ctx.wait_for_approval("ship", details={"what": data})
        return [a, decision.approved, ctx.step("s2", lambda: "two")]

    start_worker(app)
    origin = app.enqueue("gated", "x")
    waiting = "SELECT 1 FROM workflow_executions WHERE id = %s AND status = 'waiting'"
    wait_for(lambda: db.execute(waiting, (origin,)).fetchone(), what="the gate")
    app.approve(origin, "ship", by="bob")
    assert finished(db, origin) == ("success", ["one", True, "two"])
    with pytest.raises(ActionRefused, match="passed an approval gate before step 's2'"):
        app.fork(origin, from_step="s2", by="alice")
    fork = app.fork(origin, from_step="ship", by="alice")
    wait_for(lambda: db.execute(waiting, (fork,)).fetchone(), what="the fork at the gate, asked again")
    app.approve(fork, "ship", by="carol")
    assert finished(db, fork) == ("success", ["one", True, "two"])


def test_a_fork_past_a_child_start_is_refused(
    app: Kestrel, db: psycopg.Connection, start_worker: Callable[..., Worker]
) -> None:
    """A child belongs to the execution that started it: a fork that kept the start would wait
    for a child that is not its own (found by the review: ChildFailed ... missing)."""

    @app.workflow("leaf")
    def leaf(ctx, n):
        return n

    @app.workflow("parent")
    def parent(ctx, n):
        child = ctx.start_child("leaf", n)
        return [ctx.wait_for(child), ctx.step("after", lambda: "done")]

    start_worker(app)
    origin = app.enqueue("parent", 7)
    assert finished(db, origin) == ("success", [7, "done"])
    with pytest.raises(ActionRefused, match="started a child before step 'after'"):
        app.fork(origin, from_step="after", by="alice")
