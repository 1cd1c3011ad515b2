"""AsyncKestrel: the client API for asyncio, on the same statements as Kestrel's (issue 21)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import psycopg
import pytest

from kestrel_core import ActionRefused, AsyncKestrel, InvalidArgument, Kestrel, NotFound, NotSerializable
from tests.waiting import wait_for


@pytest.fixture
async def client(app: Kestrel) -> AsyncIterator[AsyncKestrel]:
    async with AsyncKestrel(app.dsn, transaction_pooling=app.transaction_pooling, app=app) as c:
        yield c


async def test_enqueue_get_and_idempotency(client: AsyncKestrel, db: psycopg.Connection) -> None:
    eid = await client.enqueue("w", {"pod": "api-1"})
    got = await client.get(eid)
    assert (got.status, got.input, got.workflow_name) == ("enqueued", {"pod": "api-1"}, "w")
    assert await client.enqueue("w", 1, idempotency_key="k") == await client.enqueue("w", 2, idempotency_key="k")
    ids = await client.enqueue_many("w", [{"i": i} for i in range(50)])
    assert ids == sorted(ids) and [(await client.get(i)).input for i in ids] == [{"i": i} for i in range(50)]
    assert await client.enqueue_many("w", []) == []
    with pytest.raises(NotFound):
        await client.get(10**12)


async def test_concurrent_tasks_share_batches_with_an_id_each(client: AsyncKestrel, db: psycopg.Connection) -> None:
    ids = await asyncio.gather(*(client.enqueue("w", {"task": i}) for i in range(200)))
    assert len(set(ids)) == 200
    stored = dict(db.execute("SELECT id, input FROM workflow_executions WHERE id = ANY(%s)", (ids,)).fetchall())
    assert all(stored[ids[i]] == {"task": i} for i in range(200))
    assert client._batcher.stats["batches"] < 200  # written together, not one statement each
    dup = await asyncio.gather(*(client.enqueue("w", i, idempotency_key="same") for i in range(5)))
    assert len(set(dup)) == 1
    assert db.execute("SELECT count(*) FROM workflow_executions WHERE idempotency_key = 'same'").fetchone()[0] == 1


async def test_same_checks_and_errors_as_the_sync_api(client: AsyncKestrel, db: psycopg.Connection) -> None:
    with pytest.raises(NotSerializable, match="input of workflow 'w' is not JSON-serializable"):
        await client.enqueue("w", {1, 2})
    with pytest.raises(InvalidArgument, match="workflow name"):
        await client.enqueue("", 1)
    with pytest.raises(InvalidArgument, match="priority"):
        await client.enqueue("w", 1, priority=2**40)
    with pytest.raises(InvalidArgument, match="no execution can have id"):
        await client.cancel(0)
    with pytest.raises(ValueError, match="event key"):
        await client.send_event("")
    assert db.execute("SELECT count(*) FROM workflow_executions").fetchone()[0] == 0


async def test_an_operator_login_is_told_enqueuing_needs_the_worker_role(
    operator_dsn: str, db: psycopg.Connection
) -> None:
    # As Kestrel.enqueue says it (tests/core/test_schedule_roles.py), not a bare
    # 'permission denied for table queues'.
    async with AsyncKestrel(operator_dsn) as operator:
        for attempt in (operator.enqueue("w", 1), operator.enqueue_many("w", [1, 2])):
            with pytest.raises(ActionRefused, match="cannot enqueue: .*needs the worker role"):
                await attempt
    assert db.execute("SELECT count(*) FROM workflow_executions").fetchone()[0] == 0


async def test_operator_actions(app: Kestrel, client: AsyncKestrel, db: psycopg.Connection, start_worker) -> None:
    @app.workflow("gate")
    def gate(ctx, _):
        d = ctx.wait_for_approval("ok")
        e = ctx.wait_for_event("go")
        return {"approved": d.approved, "by": d.by, "event": e.payload}

    @app.workflow("fails")
    def fails(ctx, _):
        raise RuntimeError("boom")

    start_worker(app)
    eid = await client.enqueue("gate", None)
    wait_for(lambda: app.get(eid).status == "waiting", what="the gate")
    decision = await client.approve(eid, "ok", by="alice", comment="lgtm")
    assert (decision["approved"], decision["by"], decision["comment"]) == (True, "alice", "lgtm")
    with pytest.raises(ActionRefused):
        await client.reject(eid, "ok", by="bob")  # decided already
    wait_for(
        lambda: db.execute(
            "SELECT count(*) FROM workflow_waits WHERE execution_id = %s AND kind = 'event' AND resolved_at IS NULL",
            (eid,),
        ).fetchone()[0],
        what="the event wait",
    )
    assert isinstance(await client.send_event("go", {"n": 1}, by="ci"), int)
    wait_for(lambda: app.get(eid).status == "success", what="the gate to finish")
    assert app.get(eid).output == {"approved": True, "by": "alice", "event": {"n": 1}}

    other = await client.enqueue("gate", None)
    wait_for(lambda: app.get(other).status == "waiting", what="the second gate")
    await client.reject(other, "ok", by="bob")
    assert db.execute(
        "SELECT decision, decided_by FROM workflow_waits WHERE execution_id = %s AND step_id = 'ok'", (other,)
    ).fetchone() == ("rejected", "bob")
    assert await client.cancel(other, by="carol") in ("enqueued", "running", "waiting")
    with pytest.raises(ActionRefused):
        await client.cancel(other, by="carol")

    failed = await client.enqueue("fails", None)
    wait_for(lambda: app.get(failed).status == "error", what="the failing workflow")
    assert await client.requeue(failed, by="dave", comment="retry") == "error"
    audit = db.execute("SELECT action, actor FROM operator_actions ORDER BY id").fetchall()
    # an event is audited too, with its sender (issue 44)
    assert [a for a, _ in audit][:3] == ["approve", "send_event", "reject"] and ("requeue", "dave") in audit
    assert ("send_event", "ci") in audit


async def test_actions_inside_the_callers_transaction(
    client: AsyncKestrel, app: Kestrel, db: psycopg.Connection
) -> None:
    eid = await client.enqueue("w", None)
    async with await psycopg.AsyncConnection.connect(
        app.dsn, prepare_threshold=None if app.transaction_pooling else 5
    ) as conn:
        async with conn.transaction():
            await client.cancel(eid, by="alice", conn=conn)
            assert (await client.get(eid, conn=conn)).status == "cancelled"  # its own transaction sees it
            assert app.get(eid).status == "enqueued"
        assert app.get(eid).status == "cancelled"


async def test_a_refused_row_fails_only_its_task(
    client: AsyncKestrel, db: psycopg.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    db.execute(
        "ALTER TABLE workflow_executions ADD CONSTRAINT no_poison"
        " CHECK (input IS DISTINCT FROM '\"poison\"'::jsonb) NOT VALID"
    )
    try:
        inputs = [{"i": i} for i in range(19)] + ["poison"]
        results = await asyncio.gather(*(client.enqueue("w", v) for v in inputs), return_exceptions=True)
    finally:
        db.execute("ALTER TABLE workflow_executions DROP CONSTRAINT no_poison")
    assert isinstance(results[-1], psycopg.errors.CheckViolation)
    assert all(isinstance(r, int) for r in results[:-1]), results
    stored = dict(db.execute("SELECT id, input FROM workflow_executions").fetchall())
    assert stored == {results[i]: {"i": i} for i in range(19)}
    assert "event=enqueue_batch_refused rows=20" in caplog.text  # one batch, then row by row


async def test_a_cancelled_caller_does_not_strand_the_others(client: AsyncKestrel, db: psycopg.Connection) -> None:
    tasks = [asyncio.create_task(client.enqueue("w", i)) for i in range(10)]
    await asyncio.sleep(0)  # every task has queued its row
    tasks[3].cancel()
    done = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(done[3], asyncio.CancelledError)
    assert all(isinstance(r, int) for i, r in enumerate(done) if i != 3)
    assert isinstance(await client.enqueue("w", "after"), int)


async def test_a_first_enqueue_opens_the_probe_and_one_pooled_connection(dsn: str, sessions_opened: list[str]) -> None:
    """The schema check's probe, then the pool's first connection, ready before the first
    batch asks for it. The pool was opened without waiting: the first batch found it empty,
    and the pool opened a second connection for it at once (three sessions, ~5 ms of server
    CPU each, for one enqueue)."""
    async with AsyncKestrel(dsn, application_name="kt-first-async") as client:
        first = await client.enqueue("w", 1)
        second = await client.enqueue("w", 2)
        assert (await client.get(second)).input == 2 and second > first
        assert sessions_opened == ["kt-first-async"] * 2


@pytest.mark.parametrize("error", ["statement timeout", "deadlock"])
async def test_a_refused_statement_is_not_reported_as_an_outage(
    client: AsyncKestrel, app: Kestrel, db: psycopg.Connection, error: str
) -> None:
    """Issue 45 (1): AsyncKestrel.connection() turned every OperationalError into
    DatabaseUnavailable ("cannot connect ... check --dsn"); the sync client asked is_outage().
    Both clients now answer alike: the statement's own error, the connection kept usable."""
    expected = psycopg.errors.QueryCanceled if error == "statement timeout" else psycopg.errors.DeadlockDetected
    setting = "SET LOCAL statement_timeout = '10ms'"
    statement = (
        "SELECT pg_sleep(2)"
        if error == "statement timeout"
        else "DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = 'deadlock_detected', MESSAGE = 'deadlock detected'; END $$"
    )
    with pytest.raises(expected), app.connection() as conn, conn.transaction():
        conn.execute(setting)
        conn.execute(statement)
    with pytest.raises(expected):
        async with client.connection() as aconn, aconn.transaction():
            await aconn.execute(setting)
            await aconn.execute(statement)
    async with client.connection() as aconn:  # the pool still serves
        assert await (await aconn.execute("SELECT 1")).fetchone() == (1,)
