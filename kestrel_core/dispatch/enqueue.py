"""Enqueue: insert ``enqueued`` rows and wake idle workers with NOTIFY.

Every enqueue, one call or many, sync or async, batched by ``enqueue_batch`` or run on the
caller's own connection, is rows of ONE statement (``ENQUEUE``): arrays, one element per row.

Wake-ups: Postgres commits the transactions that NOTIFY one at a time (a lock per database,
held through the commit's WAL flush), so a NOTIFY in every enqueue transaction also
serialised their flushes (bench/README.md, "Ingestion"). A batch of the group commit writes
its rows without NOTIFY and then sends one WAKE, a transaction of its own that does not wait
for a flush; an enqueue in the caller's transaction notifies in it, so workers wake at its
commit, and never before.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, TypedDict

import psycopg
from psycopg.pq import ExecStatus, TransactionStatus
from psycopg.types.json import Jsonb

from kestrel_core.base import tracing
from kestrel_core.base.describe import unstorable
from kestrel_core.base.errors import InvalidArgument, KestrelError
from kestrel_core.base.masking import first_line
from kestrel_core.base.serialization import to_json
from kestrel_core.db.pipeline import Prepared, Step, failure, round_trip, rows_of
from kestrel_core.db.sql_files import paste, statements_beside
from kestrel_core.db.statements import notify_channel, render
from kestrel_core.dispatch.keys import check_idempotency_key, check_name

SQL = statements_beside(__file__)

log = logging.getLogger("kestrel.enqueue")

PLACE_ONE = paste(SQL.place_one, place_rows=SQL.place_rows)
ENQUEUE = paste(SQL.enqueue, place_rows=SQL.place_rows)


# A workflow name is NOTIFY's payload (at most 8000 bytes) and is shown in every list: bounded.
MAX_NAME_LENGTH = 200
PRIORITY_RANGE = (-(2**31), 2**31 - 1)  # the column is an integer
MAX_DELAY = timedelta(days=3650)  # ten years: a later start is a mistake, not a schedule


@dataclass(frozen=True, slots=True)
class Row:
    """One execution to insert, checked: what every enqueue path hands to ``write``."""

    name: str
    input: Jsonb
    key: str | None = None
    run_at: datetime | None = None
    priority: int | None = None
    queue: str | None = None
    ckey: str | None = None
    version: str | None = None
    trace: str | None = None  # W3C traceparent of the enqueue's span (tracing on), else None


class EnqueueFailed(KestrelError):
    """The database answered an enqueue without the execution's id (see ``ids``)."""


def check_workflow_name(name: object) -> str:
    """``name`` if it can name a workflow: a non-empty string of at most MAX_NAME_LENGTH
    characters, no NUL; else InvalidArgument (a ValueError)."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgument(f"a workflow name must be a non-empty string, not {name!r}")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidArgument(f"workflow name too long ({len(name)} characters; the limit is {MAX_NAME_LENGTH})")
    if (why := unstorable(name)) is not None:
        raise InvalidArgument(f"a workflow name cannot contain {why}")
    return name


def check_priority(priority: object) -> int | None:
    """``priority`` if it fits the column (a 32-bit integer) or is None (the queue's default),
    else InvalidArgument."""
    if priority is None:
        return None
    low, high = PRIORITY_RANGE
    if not isinstance(priority, int) or isinstance(priority, bool) or not low <= priority <= high:
        raise InvalidArgument(f"priority must be an integer from {low} to {high}, not {priority!r}")
    return priority


def check_text(value: object, what: str) -> str | None:
    """``value`` if it is None or a string Postgres can store (no NUL), else InvalidArgument:
    in a batch, a value psycopg cannot send would fail the statement of every row in it."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be a string, not {type(value).__name__} ({value!r})")
    if (why := unstorable(value)) is not None:
        raise InvalidArgument(f"{what} cannot contain {why}")
    return value


def check_run_at(run_at: object) -> datetime | None:
    """``run_at`` if it is None or a datetime, else InvalidArgument."""
    if run_at is not None and not isinstance(run_at, datetime):
        raise InvalidArgument(f"run_at must be a datetime.datetime, not {type(run_at).__name__} ({run_at!r})")
    return run_at


def check_delay(delay: object) -> timedelta | None:
    """``delay`` if it is None or a timedelta within ``MAX_DELAY`` either way, else InvalidArgument."""
    if delay is None:
        return None
    if not isinstance(delay, timedelta):  # a bare number: seconds? minutes? say which type
        raise InvalidArgument(
            f"delay must be a datetime.timedelta, not {type(delay).__name__} "
            f"({delay!r}): e.g. delay=timedelta(seconds=30)"
        )
    if delay > MAX_DELAY:
        raise InvalidArgument(
            f"delay too long ({delay.total_seconds():g} s; the limit is "
            f"{MAX_DELAY.days} days = {MAX_DELAY.total_seconds():g} s)"
        )
    if delay < -MAX_DELAY:  # now + delay would leave the datetime range (OverflowError)
        raise InvalidArgument(
            f"delay too far in the past ({delay.total_seconds():g} s; at most {MAX_DELAY.days} days back)"
        )
    return delay


class ChildKeywords(TypedDict, total=False):
    """The enqueue options as ``ctx.start_child`` and ``enqueue_many`` take them, keyword
    arguments (``**options: Unpack[ChildKeywords]``): each field of ``EnqueueOptions`` but the
    idempotency key, named once so that a type checker sees a misspelt or mistyped option."""

    run_at: datetime | None
    delay: timedelta | None
    priority: int | None
    queue: str | None
    concurrency_key: str | None


class EnqueueKeywords(ChildKeywords, total=False):
    """The enqueue options as ``enqueue`` takes them: every field of ``EnqueueOptions``."""

    idempotency_key: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class EnqueueOptions:
    """Where and when a new execution runs: the options of ``enqueue``, ``enqueue_many`` and
    ``ctx.start_child``, which take them as keyword arguments or as ``options=EnqueueOptions(...)``.
    Checked once, when built: a bad value is one InvalidArgument naming it. A ``delay`` counts
    from each enqueue the value is used for, so one value can serve many calls.
    """

    idempotency_key: str | None = None
    """A repeated key returns the first execution's id and inserts nothing (``enqueue`` only)."""
    run_at: datetime | None = None
    """The first claim's earliest time (or ``delay``, not both)."""
    delay: timedelta | None = None
    """The first claim waits this long after the enqueue (at most ``MAX_DELAY``)."""
    priority: int | None = None
    """Higher runs first (a 32-bit integer); None: the queue's default priority."""
    queue: str | None = None
    """None: the workflow's own queue, else ``default``."""
    concurrency_key: str | None = None
    """Executions with the same key run at most the queue's ``per_key`` at once (default 1)."""

    def __post_init__(self) -> None:
        if self.run_at is not None and self.delay is not None:
            raise InvalidArgument("give run_at or delay, not both")
        check_delay(self.delay)
        check_run_at(self.run_at)
        check_priority(self.priority)
        check_idempotency_key(self.idempotency_key)
        check_name(self.queue, "a queue name")
        check_name(self.concurrency_key, "a concurrency key")

    @classmethod
    def of(cls, options: object, keywords: type[ChildKeywords] = EnqueueKeywords, /, **given: Any) -> EnqueueOptions:
        """The options of a call that takes ``options=`` or the same as keyword arguments
        (``given``: what the caller passed; None counts as not given): one or the other, not
        both. A keyword that is not one of the call's ``keywords`` is a TypeError naming them
        (as Python's own for a misspelt argument; an async call's when it is awaited, as its
        other argument errors)."""
        takes = keywords.__annotations__.keys()
        unknown = sorted(set(given) - takes)
        if unknown:
            raise TypeError(
                f"unexpected keyword argument {unknown[0]!r}: the options are "
                f"{', '.join(sorted(takes))} (or options=EnqueueOptions(...))"
            )
        if options is None:
            return cls(**given)
        if not isinstance(options, EnqueueOptions):
            raise InvalidArgument(f"options must be an EnqueueOptions, not {type(options).__name__} ({options!r})")
        named = sorted(name for name, value in given.items() if value is not None)
        if named:
            raise InvalidArgument(f"give options= or {', '.join(named)}, not both")
        return options

    def start_at(self) -> datetime | None:
        """The first claim's earliest time for an enqueue now (None: at once)."""
        return datetime.now(UTC) + self.delay if self.delay is not None else self.run_at

    def placed(self, workflows: Mapping[str, Any], name: str) -> tuple[EnqueueOptions, str | None]:
        """These options with the queue of this process's code of ``name`` when none is given,
        and that code's version; else the queue is resolved in the database (the workflow's
        bound queue) and the version left open (any version)."""
        wf = workflows.get(name)
        if wf is None:
            return self, None
        return (self if self.queue or not wf.queue else replace(self, queue=wf.queue)), wf.version


def rows(
    workflows: Mapping[str, Any],
    name: str,
    inputs: Sequence[Any],
    options: EnqueueOptions | None = None,
    *,
    single: bool = False,
    version: str | None = None,
) -> list[Row]:
    """The checked rows of an enqueue of ``inputs`` (one row when ``single``): every argument
    is refused here, before the database is asked, so a batch never meets a bad one.
    ``version`` None: this process's code of ``name`` (``EnqueueOptions.placed``)."""
    options = options or EnqueueOptions()
    run_at = options.start_at()
    check_workflow_name(name)
    placed, code_version = options.placed(workflows, name)
    version = code_version if version is None else check_text(version, "a version")
    if single:
        values = [to_json(inputs[0], f"the input of workflow {name!r}")]
    else:
        if isinstance(inputs, (str, bytes, Mapping)):  # iterable, but surely not meant as rows
            raise InvalidArgument(f"inputs must be a list of JSON values, not {type(inputs).__name__}")
        values = [to_json(v, f"input #{i} of workflow {name!r}") for i, v in enumerate(inputs)]
    trace = tracing.enqueued(name, len(values)) if tracing.state.on else None
    return [
        Row(
            name,
            value,
            placed.idempotency_key,
            run_at,
            placed.priority,
            placed.queue,
            placed.concurrency_key,
            version,
            trace,
        )
        for value in values
    ]


def params(schema: str, batch: Sequence[Row], *, notify: bool = True) -> dict[str, Any]:
    """ENQUEUE's parameters for ``batch``: one array per column, NULL for an optional column
    no row sets (``column``)."""
    keys = column([r.key for r in batch])
    return {
        "names": [r.name for r in batch],
        "inputs": [r.input for r in batch],
        "keys": keys,
        "keyed": keys is not None,
        "run_ats": column([r.run_at for r in batch]),
        "priorities": column([r.priority for r in batch]),
        "queues": column([r.queue for r in batch]),
        "ckeys": column([r.ckey for r in batch]),
        "versions": column([r.version for r in batch]),
        "traces": column([r.trace for r in batch]),
        "channel": notify_channel(schema),
        "notify": notify,
    }


def column(values: list[Any]) -> list[Any] | None:
    """An optional column's array, or None (a NULL array) when no row sets it: ``unnest``
    pads a NULL array with NULLs, and psycopg dumps no list. Most batches set no key, time,
    priority, queue, concurrency key or version: at 8 rows, converting the parameters took
    77 us instead of 120, and the batcher's write (``write_and_wake``) 674 us of client CPU
    and 1.65 ms instead of 733 us and 1.77 ms (bench/README.md, "Ingestion")."""
    return values if any(v is not None for v in values) else None


def wake_params(schema: str, batch: Sequence[Row]) -> dict[str, Any]:
    """WAKE's parameters: the workflow names of ``batch``, once each."""
    return {"channel": notify_channel(schema), "names": sorted({r.name for r in batch})}


def ids(batch: Sequence[Row], result: Sequence[tuple[int, str | None]]) -> tuple[list[int | None], list[str]]:
    """Each row's id from ENQUEUE's result, in row order; and the keys it did not answer for
    (taken by a commit the statement's snapshot missed: read them with by_keys)."""
    by_key: dict[str, int] = {}
    fresh: list[int] = []
    for eid, key in result:
        if key is None:
            fresh.append(eid)
        else:
            by_key[key] = eid
    fresh.sort()
    if len(fresh) != sum(1 for r in batch if r.key is None):
        raise EnqueueFailed(
            f"the enqueue of {len(batch)} rows returned {len(fresh)} new ids for its rows without an idempotency key"
        )
    unkeyed = iter(fresh)
    out = [next(unkeyed) if r.key is None else by_key.get(r.key) for r in batch]
    missing = sorted({r.key for r, eid in zip(batch, out) if eid is None and r.key is not None})
    return out, missing


def complete(batch: Sequence[Row], out: list[int | None], found: Mapping[str, int]) -> list[int]:
    """``out`` with the ids by_keys found; EnqueueFailed if a key is still unanswered (its
    holder is invisible to this transaction: REPEATABLE READ or above, started before it)."""
    done: list[int] = []
    for row, eid in zip(batch, out):
        if eid is None:
            eid = found.get(row.key or "")
            if eid is None:
                raise EnqueueFailed(
                    f"idempotency key {row.key!r} is taken by an execution this transaction cannot "
                    "see (committed after its snapshot): enqueue in a READ COMMITTED transaction"
                )
        done.append(eid)
    return done


def write(
    conn: psycopg.Connection, schema: str, batch: Sequence[Row], *, prepare: bool | None = None, notify: bool = True
) -> list[int]:
    """Insert ``batch`` with one statement on ``conn`` (in its transaction, if one is open);
    each row's id, the holder's id for a key already taken. ``notify``: wake workers with the
    transaction's commit (else send WAKE after it); ``prepare=False``: no server-side prepared
    statement (PgBouncer in transaction mode)."""
    if not batch:
        return []
    result = conn.execute(render(ENQUEUE, schema), params(schema, batch, notify=notify), prepare=prepare).fetchall()
    out, missing = ids(batch, result)
    found: dict[str, int] = {}
    if missing:
        found = dict(conn.execute(render(SQL.by_keys, schema), (missing,), prepare=prepare).fetchall())
    return complete(batch, out, found)


def wake(conn: psycopg.Connection, schema: str, batch: Sequence[Row]) -> None:
    """Wake the workers of ``batch``'s workflows (autocommit ``conn``: a transaction of its own).
    The rows are committed already: a failure here is logged, never raised (that would tell
    their callers the enqueue failed, and a retry would insert them twice); workers' polling
    covers a lost wake-up."""
    try:
        conn.execute(render(SQL.wake, schema), wake_params(schema, batch))
    except psycopg.Error as exc:
        wake_failed(batch, exc)


def write_and_wake(conn: psycopg.Connection, schema: str, batch: Sequence[Row]) -> list[int]:
    """``write`` (``notify=False``) and then ``wake`` in one round trip on the autocommit
    ``conn`` (BEGIN, ENQUEUE, COMMIT, WAKE through ``db.pipeline``, prepared once per
    connection). The rows are committed when COMMIT answered, whatever WAKE did (its failure is
    logged, as in ``wake``); a failure before is raised and leaves ``conn`` out of any
    transaction."""
    if not batch:
        return []
    enqueue, woken = _prepared(schema)
    begun, inserted, committed, waked = round_trip(
        conn,
        [
            Step(literal=SQL.begin.encode()),
            Step(prepared=enqueue, params=params(schema, batch, notify=False)),
            Step(literal=SQL.commit.encode()),
            Step(prepared=woken, params=wake_params(schema, batch)),
        ],
    )
    failed = (
        failure(conn, begun, ExecStatus.COMMAND_OK)
        or failure(conn, inserted, ExecStatus.TUPLES_OK)
        or failure(conn, committed, ExecStatus.COMMAND_OK)
    )
    if failed is not None:
        _end_failed_transaction(conn)
        raise failed
    lost_wake = failure(conn, waked, ExecStatus.TUPLES_OK)
    if lost_wake is not None:
        wake_failed(batch, lost_wake)
    out, missing = ids(batch, rows_of(conn, inserted))
    found: dict[str, int] = {}
    if missing:
        found = dict(conn.execute(render(SQL.by_keys, schema), (missing,)).fetchall())
    return complete(batch, out, found)


@lru_cache(maxsize=16)
def _prepared(schema: str) -> tuple[Prepared, Prepared]:
    """ENQUEUE and WAKE for ``schema``, as the batch's round trip prepares them."""
    return Prepared.of(render(ENQUEUE, schema)), Prepared.of(render(SQL.wake, schema))


def _end_failed_transaction(conn: psycopg.Connection) -> None:
    """Roll back what a failed pipeline left open (its BEGIN), unless the connection is lost."""
    if conn.info.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
        try:
            conn.rollback()
        except psycopg.Error:
            conn.close()  # its owner opens a new one


def wake_failed(batch: Sequence[Row], exc: BaseException) -> None:
    """Log a lost wake-up (every wake path: the rows are committed, workers' polling finds them)."""
    log.warning(
        "event=wake_failed workflows=%s error=%r (workers find the rows at their next poll)",
        ",".join(sorted({r.name for r in batch})),
        first_line(exc),
    )


def trace_context(conn: psycopg.Connection, schema: str, execution_id: int) -> str | None:
    """The W3C traceparent recorded at the enqueue of ``execution_id``, None if none."""
    row = conn.execute(render(SQL.trace_context, schema), (execution_id,)).fetchone()
    return None if row is None else row[0]


def enqueue_many(
    conn: psycopg.Connection,
    schema: str,
    name: str,
    inputs: Sequence[Any],
    options: EnqueueOptions | None = None,
    *,
    version: str | None = None,
) -> list[int]:
    """Insert one execution per input on ``conn`` in a single round trip; ids in input order."""
    return write(conn, schema, rows({}, name, inputs, options, version=version))
