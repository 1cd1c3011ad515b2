"""Retention: drop whole id ranges of finished history, then delete the rest in small batches.

The history is partitioned by id range (migration 0022; ids grow with time, so a range is a
period). A range whose executions all finished before the cutoff, past which the id sequence
moved over a minute ago, is dropped whole: ``{schema}.drop_history_range`` drops its partitions
of the step tables, then of ``workflow_executions``, and its keys, under a short lock_timeout
(its ACCESS EXCLUSIVE locks on the parents are held for the DROPs and the commit only; a range
it cannot lock now is left to the next run), and audits it. The newest range is never dropped.
The range the id sequence is in, and ranges that still hold a live execution (a long approval),
have their finished rows deleted in batches, below (``{schema}.batch_ranges`` names them); the
other ranges wait until all of them may go whole: deleting their rows first would only leave
dead tuples behind.

Each batch is one call to ``{schema}.prune_finished`` (migration 0004): one short transaction
that locks at most ``batch_size`` finished rows (SKIP LOCKED: it never waits for a lock held by
a worker or an operator), deletes them with their checkpoints, waits and attempts (a trigger,
``execution_deleted``), and writes a ``prune`` row to ``operator_actions``. Live executions (enqueued,
running, waiting) are never deleted, however old, nor the finished children of a parent whose
row is still there (a live parent's ``wait_for`` reads them, and so does a finished one's once
requeued: they go after the parent itself was pruned; a range holding one is not dropped until
then). The audit table itself is kept.

Age is measured from ``finished_at``: an execution that ran for a month and finished an hour
ago is one hour old. Nothing is archived: export what you want to keep first (e.g. with a saved
report or ``COPY``), or run ``--dry-run`` to see what would go.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeVar

import psycopg

from kestrel_core.base.errors import InvalidArgument, from_database
from kestrel_core.db.connection import ConnectionRunner
from kestrel_core.db.sql_files import statements_beside
from kestrel_core.db.statements import one_row, render

SQL = statements_beside(__file__)

T = TypeVar("T")

DEFAULT_BATCH_SIZE = 1000
# A range whose locks were not had within drop_history_range's lock_timeout (500 ms: a commit
# can take 100 ms on a busy disk) is tried again this many times, then left to the next run.
DROP_TRIES = 3
DROP_PAUSE_S = 0.2


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
        raise InvalidArgument(
            f"cannot read the age {text!r}: write a whole number and a unit, "
            "e.g. 30d (days), 12h (hours), 90m (minutes), 45s (seconds) or 2w (weeks)"
        )
    amount, unit = int(match[1]), match[2].lower()
    if amount <= 0:
        raise InvalidArgument(f"the age must be more than zero, got {text!r}")
    if amount * _UNIT_SECONDS[unit] > MAX_AGE.total_seconds():
        raise InvalidArgument(f"the age {text.strip()!r} is too long: at most {MAX_AGE.days} days (100 years)")
    return timedelta(**{_UNITS[unit]: amount})


@dataclass(frozen=True)
class PrunableGroup:
    """Finished executions of one workflow and status that a prune would delete."""

    workflow_name: str
    status: str
    count: int
    oldest: datetime
    newest: datetime


@dataclass(frozen=True)
class HistoryRange:
    """One id range of the history: its partitions are ``<table>_p<lo>``."""

    lo: int
    hi: int
    executions: int = 0

    @property
    def partition(self) -> str:
        """The range's partition of ``workflow_executions`` (the step tables' are named alike)."""
        return f"workflow_executions_p{self.lo}"


@dataclass
class PruneResult:
    """What a prune run did: rows deleted, batches run, and the cutoff it used."""

    cutoff: datetime
    deleted: int = 0
    batches: int = 0
    complete: bool = True  # False when max_batches stopped it with more left
    seconds: float = 0.0
    history: list[int] = field(default_factory=list)  # rows deleted per batch
    dropped: list[HistoryRange] = field(default_factory=list)  # ranges dropped whole
    busy_ranges: int = 0  # ranges not dropped because a lock was not had in time


def cutoff_for(conn: psycopg.Connection, older_than: timedelta) -> datetime:
    """The database's ``now() - older_than``: fixed once per run, so a run always ends."""
    if older_than <= timedelta(0):
        raise InvalidArgument("older_than must be more than zero")
    row = conn.execute(SQL.cutoff, (older_than,)).fetchone()
    row = one_row(row, "CUTOFF")
    cutoff: datetime = row[0]
    return cutoff


def history_ranges(conn: psycopg.Connection, schema: str) -> list[HistoryRange]:
    """The history's id ranges, oldest first."""
    return [HistoryRange(lo, hi) for lo, hi in conn.execute(render(SQL.ranges, schema)).fetchall()]


def droppable_ranges(conn: psycopg.Connection, schema: str, cutoff: datetime) -> list[HistoryRange]:
    """The ranges a prune with this cutoff would drop whole now (the dry run), with their
    execution counts: no live execution, none finished at or after the cutoff, and the id
    sequence past them over a minute ago (so never the newest)."""
    found = []
    for r in history_ranges(conn, schema):
        row = conn.execute(render(SQL.range_state, schema), {"lo": r.lo, "hi": r.hi}).fetchone()
        total, live, newest, passed = one_row(row, "range_state")
        if passed and not live and (newest is None or newest < cutoff):
            found.append(HistoryRange(r.lo, r.hi, int(total)))
    return found


def prunable(conn: psycopg.Connection, schema: str, cutoff: datetime) -> list[PrunableGroup]:
    """What the batches of a prune with this cutoff would delete now, by workflow and status
    (the dry run): the finished rows of the ranges not dropped whole (``batch_ranges``)."""
    rows = conn.execute(render(SQL.prunable, schema), (cutoff,)).fetchall()
    return [PrunableGroup(*row) for row in rows]


def drop_range(conn: psycopg.Connection, schema: str, lo: int, cutoff: datetime, *, by: str) -> int | None:
    """Drop the history range starting at ``lo`` if all of it finished before ``cutoff``;
    returns the executions dropped, or None when the range stays. Raises LockNotAvailable
    when its locks were not had within the function's lock_timeout."""
    row = conn.execute(render(SQL.drop_range, schema), (lo, cutoff, by)).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def prune_batch(
    conn: psycopg.Connection, schema: str, cutoff: datetime, *, by: str, batch_size: int = DEFAULT_BATCH_SIZE
) -> int:
    """Delete one batch of finished executions that finished before ``cutoff``; returns how many."""
    try:
        row = conn.execute(render(SQL.prune_batch, schema), (cutoff, batch_size, by)).fetchone()
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
        raise InvalidArgument("batch_size must be at least 1")
    started = time.monotonic()
    result = PruneResult(cutoff=run(lambda conn: cutoff_for(conn, older_than)))
    for r in run(lambda conn: history_ranges(conn, schema))[:-1]:  # never the newest
        n = _drop_with_retries(run, functools.partial(drop_range, schema=schema, lo=r.lo, cutoff=result.cutoff, by=by))
        if n is False:
            result.busy_ranges += 1
        elif n is not None:
            result.dropped.append(HistoryRange(r.lo, r.hi, n))
            result.deleted += n
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


def _drop_with_retries(run: ConnectionRunner, drop: Callable[[psycopg.Connection], int | None]) -> int | bool | None:
    """``drop`` (one range), tried again while its locks are busy; False if they stayed busy."""
    for attempt in range(DROP_TRIES):
        try:
            return run(drop)
        except psycopg.errors.LockNotAvailable:
            if attempt + 1 < DROP_TRIES:
                time.sleep(DROP_PAUSE_S)
        except psycopg.Error as exc:
            raise from_database(exc) from None
    return False


def connection_runner(connect: Callable[[], AbstractContextManager[psycopg.Connection]]) -> ConnectionRunner:
    """Adapt a context-manager factory such as ``Kestrel.connection`` to ``prune``'s ``run``."""

    def run(fn: Callable[[psycopg.Connection], T]) -> T:
        with connect() as conn:
            return fn(conn)

    return run
