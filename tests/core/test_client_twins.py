"""The sync and async clients are one implementation: ``Kestrel``'s operations are generated
from ``AsyncKestrel``'s (tools/async_to_sync.py), so both offer the same operations with the same
parameters, and classify errors the same way."""

from __future__ import annotations

import inspect
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from kestrel_core import AsyncKestrel, DatabaseUnavailable, Kestrel

ROOT = Path(__file__).resolve().parents[2]

# What only one client offers, and why.
SYNC_ONLY = {
    "workflow", "workflows", "queue", "queues", "schedule", "schedules",  # the registry (AsyncKestrel takes app=)
    "worker", "run_worker",  # workers are threads and processes, not tasks of a loop
    "with_settings",  # builds another Kestrel with the same registry (the CLI's overrides)
}  # fmt: skip
ASYNC_ONLY: set[str] = set()


def public(cls: type) -> dict[str, inspect.Signature | None]:
    return {
        name: inspect.signature(member) if callable(member) else None
        for name, member in inspect.getmembers(cls)
        if not name.startswith("_")
    }


def test_both_clients_offer_the_same_operations_with_the_same_parameters() -> None:
    sync, asyn = public(Kestrel), public(AsyncKestrel)
    assert set(sync) - set(asyn) == SYNC_ONLY
    assert set(asyn) - set(sync) == ASYNC_ONLY
    for name in sorted(set(sync) & set(asyn)):
        s, a = sync[name], asyn[name]
        assert (s is None) == (a is None), name
        if s is None or a is None:
            continue
        shape = [(p.name, p.kind, p.default) for p in s.parameters.values()]
        assert shape == [(p.name, p.kind, p.default) for p in a.parameters.values()], name


def test_the_generated_sync_operations_are_current() -> None:
    """CI check: ``python tools/async_to_sync.py`` would write exactly the checked-in files."""
    result = subprocess.run(
        [sys.executable, "tools/async_to_sync.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


@pytest.fixture
async def client(app: Kestrel) -> AsyncIterator[AsyncKestrel]:
    async with AsyncKestrel(app.dsn, transaction_pooling=app.transaction_pooling, app=app) as c:
        yield c


async def test_a_statement_timeout_is_not_an_outage_through_either_client(app: Kestrel, client: AsyncKestrel) -> None:
    """A timeout (or a deadlock) is the statement's own failure, not "cannot connect": the
    connection seam asks ``is_outage`` in both clients (the async one once said outage)."""
    with pytest.raises(psycopg.errors.QueryCanceled):
        async with client.connection() as conn, conn.transaction():
            await conn.execute("SET LOCAL statement_timeout = 1")
            await conn.execute("SELECT pg_sleep(1)")
    with pytest.raises(psycopg.errors.QueryCanceled):
        with app.connection() as sync_conn, sync_conn.transaction():
            sync_conn.execute("SET LOCAL statement_timeout = 1")
            sync_conn.execute("SELECT pg_sleep(1)")
    assert not issubclass(psycopg.errors.QueryCanceled, DatabaseUnavailable)


async def test_conn_takes_a_connection_of_the_clients_kind_only(app: Kestrel, client: AsyncKestrel) -> None:
    from kestrel_core import InvalidArgument

    with pytest.raises(InvalidArgument, match=r"psycopg\.AsyncConnection, not Connection \(a Connection: use Kestrel"):
        with app.connection() as sync_conn:
            await client.get(1, conn=sync_conn)  # type: ignore[arg-type]
    async with client.connection() as async_conn:
        with pytest.raises(InvalidArgument, match=r"psycopg\.Connection, not AsyncConnection \(an AsyncConnection"):
            app.get(1, conn=async_conn)  # type: ignore[arg-type]


def test_kestrel_is_immutable_after_construction() -> None:
    app = Kestrel("host=127.0.0.1", schema="one")
    with pytest.raises(AttributeError, match="immutable"):
        app.schema = "two"  # type: ignore[misc]
    other = app.with_settings(schema="two")
    assert (app.schema, other.schema, other.dsn) == ("one", "two", app.dsn)
