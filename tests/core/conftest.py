"""Fixtures for engine tests: the app (direct, and through PgBouncer when one is up),
in-process workers that are always stopped, a ledger table, and the sessions a test opened."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from kestrel_core import Kestrel
from kestrel_core.engine.worker import Worker

# .ci/run starts PgBouncer (transaction pooling) and exports its DSN: then every engine test
# that uses `app` runs twice, directly and through the bouncer (no LISTEN, no prepared
# statements). Checks through `db` always go straight to Postgres.
BOUNCER_DSN = os.environ.get("KESTREL_PGBOUNCER_DSN")
APP_ROUTES = ["direct"] + (["pgbouncer"] if BOUNCER_DSN else [])


@pytest.fixture(params=APP_ROUTES)
def app(request: pytest.FixtureRequest, dsn: str) -> Iterator[Kestrel]:
    """A Kestrel app on an empty, migrated database, directly or through PgBouncer."""
    if request.param == "pgbouncer":
        through = make_conninfo(BOUNCER_DSN, dbname=conninfo_to_dict(dsn)["dbname"])
        kestrel = Kestrel(through, transaction_pooling=True)
    else:
        kestrel = Kestrel(dsn)
    with kestrel:
        yield kestrel


@pytest.fixture
def start_worker() -> Iterator[Callable[..., Worker]]:
    """Start a worker on an app with fast test timings; every one is stopped at teardown."""
    started: list[Worker] = []

    def start(app: Kestrel, **options) -> Worker:
        options.setdefault("concurrency", 4)
        options.setdefault("lease", timedelta(seconds=2))
        options.setdefault("poll_interval", 0.2)
        options.setdefault("sweep_interval", 0.2)
        options.setdefault("grace", timedelta(seconds=2))
        worker = app.worker(**options)
        worker.start()
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop(grace=timedelta(0))


@pytest.fixture
def ledger(db: psycopg.Connection) -> psycopg.Connection:
    """A side-effect ledger (public.ledger): steps insert a row every time they really run."""
    db.execute("DROP TABLE IF EXISTS public.ledger")
    db.execute(
        "CREATE TABLE public.ledger (id bigserial PRIMARY KEY, execution_id bigint, step_id text,"
        " worker text, at timestamptz DEFAULT clock_timestamp())"
    )
    return db


def ledger_rows(db: psycopg.Connection, execution_id: int | None = None) -> list[tuple[int, str]]:
    if execution_id is None:
        return db.execute("SELECT execution_id, step_id FROM public.ledger ORDER BY id").fetchall()
    return db.execute(
        "SELECT execution_id, step_id FROM public.ledger WHERE execution_id = %s ORDER BY id",
        (execution_id,),
    ).fetchall()


@contextmanager
def feeding(app: Kestrel, name: str, batch: int = 5) -> Iterator[list[int]]:
    """A producer thread enqueueing ``name`` in small batches (inputs 0, 1, 2, ...) until the
    block ends; yields the ids enqueued so far, a list that grows."""
    enqueued: list[int] = []
    stop = threading.Event()

    def produce() -> None:
        i = 0
        while not stop.is_set():
            enqueued.extend(app.enqueue_many(name, list(range(i, i + batch))))
            i += batch
            time.sleep(0.01)  # a steady trickle, not a flood: the workers keep up

    producer = threading.Thread(target=produce, name=f"feed-{name}")
    producer.start()
    try:
        yield enqueued
    finally:
        stop.set()
        producer.join()


@pytest.fixture
def sessions_opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The application name of every connection opened during the test, in order: direct ones
    (``psycopg.connect``, what ``kestrel_core.db.connection`` calls) and the pools' own
    (``Connection.connect`` and ``AsyncConnection.connect``, what psycopg_pool calls)."""
    opened: list[str] = []
    sync_connect, async_connect = psycopg.Connection.connect, psycopg.AsyncConnection.connect

    def counted(conninfo: str = "", **kwargs: Any) -> psycopg.Connection:
        conn = sync_connect(conninfo, **kwargs)
        opened.append(conn.info.parameter_status("application_name") or "")
        return conn

    async def counted_async(conninfo: str = "", **kwargs: Any) -> psycopg.AsyncConnection:
        conn = await async_connect(conninfo, **kwargs)
        opened.append(conn.info.parameter_status("application_name") or "")
        return conn

    monkeypatch.setattr(psycopg, "connect", counted)
    monkeypatch.setattr(psycopg.Connection, "connect", counted)
    monkeypatch.setattr(psycopg.AsyncConnection, "connect", counted_async)
    return opened
