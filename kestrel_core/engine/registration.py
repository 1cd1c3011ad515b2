"""Announcing a worker at its start: check the schema is current, write its `workers` row and
declare its queues and schedules, waiting up to its ``startup_timeout`` for a database that is
not up yet (a worker started during an outage must not die: nothing would replace it); and
marking the row stopped when it retires."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Sequence
from typing import Protocol

import psycopg

from kestrel_core.admin import schedules as schedules_mod
from kestrel_core.base.backoff import Backoff
from kestrel_core.base.errors import DatabaseUnavailable
from kestrel_core.base.masking import first_line
from kestrel_core.db.connection import connect, unavailable
from kestrel_core.db.migrate import check_current
from kestrel_core.db.outage import is_outage
from kestrel_core.db.sql_files import statements_beside
from kestrel_core.db.statements import render
from kestrel_core.dispatch import queues as queues_mod
from kestrel_core.dispatch.lease import run_bounded
from kestrel_core.workflow.contracts import EngineSettings, Flag, Registry

SQL = statements_beside(__file__)

_RECONNECT = Backoff(0.1, cap=2.0)


class Registrant(Protocol):
    """What registering reads of the worker."""

    schema: str
    worker_id: str
    names: list[str]
    versions: list[str | None]
    concurrency: int
    queues: list[str] | None
    registry: Registry
    settings: EngineSettings
    log: logging.Logger
    draining: Flag
    startup_timeout: float


def register(w: Registrant) -> bool:
    """Check the schema and register this worker's names, waiting up to ``startup_timeout``
    while the database is unreachable. False if stopped meanwhile."""
    deadline = time.monotonic() + w.startup_timeout
    retry = 0
    while True:
        conn: psycopg.Connection | None = None
        try:
            with connect(w.settings.dsn, application_name="kestrel-worker") as conn:
                check_current(conn, w.schema)
                # One transaction: a start that fails (or is stopped) half way leaves no
                # live workers row behind for a process that never served.
                with conn.transaction():
                    upsert_worker(conn, w.schema, w.worker_id, w.names, w.concurrency, w.versions, w.queues)
                    queues_mod.declare(
                        conn,
                        w.schema,
                        list(w.registry.queues.values()),
                        queues_mod.bindings(w.registry.workflows.values()),
                    )
                    schedules_mod.declare(
                        conn, w.schema, list(w.registry.schedules.values()), by=f"worker:{w.worker_id}"
                    )
                unknown = queues_mod.undeclared(conn, w.schema, w.queues) if w.queues else []
            if unknown:
                w.log.warning(
                    "event=undeclared_queues worker=%s queues=%s (no code declares them or "
                    "binds a workflow to them: this worker claims only executions enqueued "
                    "there with queue=...; check --queues for a typo)",
                    w.worker_id,
                    ",".join(unknown),
                )
            return True
        except (DatabaseUnavailable, psycopg.Error) as exc:
            if not isinstance(exc, (DatabaseUnavailable, psycopg.OperationalError)) and not is_outage(exc, conn):
                raise
            failure = exc if isinstance(exc, DatabaseUnavailable) else unavailable(w.settings.dsn, exc)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise failure from None
            pause = min(_RECONNECT.delay(retry), remaining)
            w.log.warning(
                "event=waiting_for_database worker=%s error=%r retry_in_s=%.1f gives_up_in_s=%.0f",
                w.worker_id,
                first_line(failure, w.settings.dsn),
                pause,
                remaining,
            )
        if w.draining.wait(pause):
            return False
        retry += 1


def default_worker_id() -> str:
    """host:pid:random, unique per process and readable in the console."""
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"


def upsert_worker(
    conn: psycopg.Connection,
    schema: str,
    worker_id: str,
    workflows: Sequence[str],
    concurrency: int,
    versions: Sequence[str | None] | None = None,
    queues: Sequence[str] | None = None,
) -> None:
    """Announce this worker, the workflow names it runs and their versions (parallel lists),
    and the queues it serves (None: all); read by the console."""
    conn.execute(
        render(SQL.register, schema),
        {
            "worker_id": worker_id,
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            "workflows": list(workflows),
            "concurrency": concurrency,
            "versions": [v or "" for v in versions] if versions is not None else [""] * len(workflows),
            "queues": list(queues) if queues is not None else None,
        },
    )


def retire(conn: psycopg.Connection, schema: str, worker_id: str, *, lock_timeout_ms: int | None = None) -> None:
    """Mark this worker stopped. ``lock_timeout_ms``: give up (psycopg.errors.LockNotAvailable)
    on a lock held that long (its row locked by another session)."""
    run_bounded(conn, render(SQL.retire, schema), {"worker_id": worker_id}, lock_timeout_ms)
