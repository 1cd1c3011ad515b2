"""Transactional enqueue: ``conn=`` writes the execution in the caller's own transaction, so
it exists if and only if that transaction commits, and workers wake at its commit (issue 21).
Each test runs directly and through PgBouncer (the ``app`` fixture), sync and async."""

from __future__ import annotations

import psycopg
import pytest

from kestrel_core import AsyncKestrel, InvalidArgument, Kestrel
from tests.waiting import wait_for


class Rollback(Exception):
    """Raised to roll the caller's transaction back."""


def count(db: psycopg.Connection, name: str) -> int:
    return db.execute("SELECT count(*) FROM workflow_executions WHERE workflow_name = %s", (name,)).fetchone()[0]


def user_connection(app: Kestrel) -> psycopg.Connection:
    """The application's own connection, on the same route as the app (direct or PgBouncer)."""
    conn = psycopg.connect(app.dsn)
    if app.transaction_pooling:
        conn.prepare_threshold = None
    return conn


def test_committed_with_the_callers_transaction(app: Kestrel, db: psycopg.Connection) -> None:
    with user_connection(app) as conn:
        with conn.transaction():
            conn.execute("CREATE TEMP TABLE orders (id int)")
            conn.execute("INSERT INTO orders VALUES (1)")
            eid = app.enqueue("ship", {"order": 1}, conn=conn)
            many = app.enqueue_many("ship", [{"order": 2}, {"order": 3}], conn=conn)
            assert count(db, "ship") == 0  # not visible before the commit
        assert count(db, "ship") == 3
    assert app.get(eid).input == {"order": 1}
    assert [app.get(i).input for i in many] == [{"order": 2}, {"order": 3}]


def test_rolled_back_with_the_callers_transaction(app: Kestrel, db: psycopg.Connection) -> None:
    with user_connection(app) as conn:
        with pytest.raises(Rollback):
            with conn.transaction():
                app.enqueue("ship", {"order": 1}, conn=conn, idempotency_key="order-1")
                app.enqueue_many("ship", [1, 2], conn=conn)
                raise Rollback
        assert count(db, "ship") == 0
        # The key was never taken: a later enqueue with it inserts.
        with conn.transaction():
            eid = app.enqueue("ship", {"order": 1}, conn=conn, idempotency_key="order-1")
    assert app.get(eid).status == "enqueued" and count(db, "ship") == 1


def test_idempotency_key_inside_a_transaction(app: Kestrel, db: psycopg.Connection) -> None:
    first = app.enqueue("ship", 1, idempotency_key="k")
    with user_connection(app) as conn, conn.transaction():
        assert app.enqueue("ship", 2, idempotency_key="k", conn=conn) == first
        again = app.enqueue("ship", 3, idempotency_key="new", conn=conn)
        assert app.enqueue("ship", 4, idempotency_key="new", conn=conn) == again  # its own row, unseen outside
    assert count(db, "ship") == 2


def test_workers_wake_at_commit(app: Kestrel, db: psycopg.Connection, start_worker) -> None:
    @app.workflow("ship")
    def ship(ctx, order):
        return {"shipped": order}

    start_worker(app)
    with user_connection(app) as conn:
        with conn.transaction():
            eid = app.enqueue("ship", 7, conn=conn)
        wait_for(lambda: app.get(eid).status == "success", timeout=20, what="the committed execution to run")
    assert app.get(eid).output == {"shipped": 7}


def test_conn_must_be_a_sync_connection(app: Kestrel, db: psycopg.Connection) -> None:
    with pytest.raises(InvalidArgument, match="psycopg.Connection"):
        app.enqueue("ship", 1, conn="dbname=x")  # type: ignore[arg-type]
    assert count(db, "ship") == 0


async def test_async_committed_and_rolled_back(app: Kestrel, db: psycopg.Connection) -> None:
    async with AsyncKestrel(app.dsn, transaction_pooling=app.transaction_pooling) as client:
        conn = await psycopg.AsyncConnection.connect(app.dsn, prepare_threshold=None if app.transaction_pooling else 5)
        async with conn:
            async with conn.transaction():
                eid = await client.enqueue("ship", {"order": 1}, conn=conn)
                many = await client.enqueue_many("ship", [2, 3], conn=conn)
                assert count(db, "ship") == 0
            assert count(db, "ship") == 3
            with pytest.raises(Rollback):
                async with conn.transaction():
                    await client.enqueue("ship", {"order": 4}, conn=conn)
                    raise Rollback
            assert count(db, "ship") == 3
            with pytest.raises(InvalidArgument, match="AsyncConnection"):
                with user_connection(app) as sync_conn:
                    await client.enqueue("ship", 5, conn=sync_conn)  # type: ignore[arg-type]
        assert (await client.get(eid)).input == {"order": 1}
        assert [(await client.get(i)).input for i in many] == [2, 3]
