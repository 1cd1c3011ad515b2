"""Retention: delete finished executions older than a cutoff, in small batches.

Each batch is one call to ``{schema}.prune_finished`` (migration 0004): one short transaction
that locks at most ``batch_size`` finished rows (SKIP LOCKED: it never waits for a lock held by
a worker or an operator), deletes them with their checkpoints, waits and attempts (ON DELETE
CASCADE), and writes a ``prune`` row to ``operator_actions``. Live executions (enqueued,
running, waiting) are never deleted, however old. The audit table itself is kept.

Age is measured from ``finished_at``: an execution that ran for a month and finished an hour
ago is one hour old. Nothing is archived: export what you want to keep first (e.g. with a saved
report or ``COPY``), or run ``--dry-run`` to see what would go.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeVar

import psycopg

from kestrel_core.base.errors import from_database
from kestrel_core.db.connection import ConnectionRunner
from kestrel_core.db.statements import one_row, render

T = TypeVar("T")

DEFAULT_BATCH_SIZE = 1000

CUTOFF = "SELECT now() - %s::interval"
PRUNE_BATCH = "SELECT {schema}.prune_finished(%s, %s, %s)"
# What a prune with this cutoff would delete now (the dry run), by workflow and status.
PRUNABLE = """
SELECT workflow_name, status, count(*), min(finished_at), max(finished_at)
  FROM {schema}.workflow_executions
 WHERE finished_at < %s AND status IN ('success', 'error', 'cancelled')
 GROUP BY workflow_name, status
 ORDER BY workflow_name, status
"""

_AGE = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$", re.IGNORECASE)
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
# A hundred years: older than that nothing finished; beyond it timedelta overflows.
MAX_AGE = timedelta(days=36500)


def parse_age(text: str) -> timedelta:
    """``30d``, ``12h``, ``90m``, ``45s`` or ``2w`` as a timedelta; ValueError if malformed,
    zero or over ``MAX_AGE``."""
    match = _AGE.match(text or "")
    if match is None:
        raise ValueError(
            f"cannot read the age {text!r}: write a whole number and a unit, "
            "e.g. 30d (days), 12h (hours), 90m (minutes), 45s (seconds) or 2w (weeks)"
        )
    amount, unit = int(match[1]), match[2].lower()
    if amount <= 0:
        raise ValueError(f"the age must be more than zero, got {text!r}")
    if amount * _UNIT_SECONDS[unit] > MAX_AGE.total_seconds():
        raise ValueError(f"the age {text.strip()!r} is too long: at most {MAX_AGE.days} days (100 years)")
    return timedelta(**{_UNITS[unit]: amount})


@dataclass(frozen=True)
class PrunableGroup:
    """Finished executions of one workflow and status that a prune would delete."""

    workflow_name: str
    status: str
    count: int
    oldest: datetime
    newest: datetime


@dataclass
class PruneResult:
    """What a prune run did: rows deleted, batches run, and the cutoff it used."""

    cutoff: datetime
    deleted: int = 0
    batches: int = 0
    complete: bool = True  # False when max_batches stopped it with more left
    seconds: float = 0.0
    history: list[int] = field(default_factory=list)  # rows deleted per batch


def cutoff_for(conn: psycopg.Connection, older_than: timedelta) -> datetime:
    """The database's ``now() - older_than``: fixed once per run, so a run always ends."""
    if older_than <= timedelta(0):
        raise ValueError("older_than must be more than zero")
    row = conn.execute(CUTOFF, (older_than,)).fetchone()
    row = one_row(row, "CUTOFF")
    cutoff: datetime = row[0]
    return cutoff


def prunable(conn: psycopg.Connection, schema: str, cutoff: datetime) -> list[PrunableGroup]:
    """What a prune with this cutoff would delete now, by workflow and status (the dry run)."""
    rows = conn.execute(render(PRUNABLE, schema), (cutoff,)).fetchall()
    return [PrunableGroup(*row) for row in rows]


def prune_batch(
    conn: psycopg.Connection, schema: str, cutoff: datetime, *, by: str, batch_size: int = DEFAULT_BATCH_SIZE
) -> int:
    """Delete one batch of finished executions that finished before ``cutoff``; returns how many."""
    try:
        row = conn.execute(render(PRUNE_BATCH, schema), (cutoff, batch_size, by)).fetchone()
    except psycopg.Error as exc:
        raise from_database(exc) from None
    return int(row[0]) if row and row[0] is not None else 0


def prune(
    run: ConnectionRunner,
    schema: str,
    *,
    older_than: timedelta,
    by: str,
    batch_size: int = DEFAULT_BATCH_SIZE,
    pause: float = 0.0,
    max_batches: int | None = None,
    progress: Callable[[PruneResult], None] | None = None,
) -> PruneResult:
    """Prune in batches until none is left (or ``max_batches`` ran).

    ``run(fn)`` calls ``fn`` with a connection: ``Kestrel.connection`` wrapped, or a worker's
    ``db`` (which retries while the database restarts). Each batch commits on its own, so an
    interrupted run keeps what it did and the next one carries on. ``pause`` seconds between
    batches leave room for other work on a busy server. ``progress`` is called after each batch.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    started = time.monotonic()
    result = PruneResult(cutoff=run(lambda conn: cutoff_for(conn, older_than)))
    while max_batches is None or result.batches < max_batches:
        n = run(lambda conn: prune_batch(conn, schema, result.cutoff, by=by, batch_size=batch_size))
        result.batches += 1
        result.deleted += n
        result.history.append(n)
        result.seconds = time.monotonic() - started
        if progress is not None:
            progress(result)
        if n == 0:
            break
        if pause > 0:
            time.sleep(pause)
    else:
        result.complete = False
    result.seconds = time.monotonic() - started
    return result


def connection_runner(connect: Callable[[], AbstractContextManager[psycopg.Connection]]) -> ConnectionRunner:
    """Adapt a context-manager factory such as ``Kestrel.connection`` to ``prune``'s ``run``."""

    def run(fn: Callable[[psycopg.Connection], T]) -> T:
        with connect() as conn:
            return fn(conn)

    return run
