"""Fixtures for engine tests: in-process workers that are always stopped, and a ledger table."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta

import psycopg
import pytest

from kestrel_core import Kestrel
from kestrel_core.worker import Worker


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
