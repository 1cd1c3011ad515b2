"""Group commit for enqueues: the concurrent ``enqueue`` calls of one process, one statement
and one commit.

No timer and no writer thread (sync): the first caller that finds no batch in flight writes
at once (a lone call adds no wait); calls that arrive meanwhile queue up, and when a batch is
done its writer releases its callers, yields the GIL while they come back with their next
calls, and hands the queue to the oldest waiting caller, who writes all of it (up to
``max_batch``) as the next batch. So the batch grows with the load, one round trip and one
commit serve all of it (on the sync batcher's own connection, ``WriterConnection``; the async
one checks a connection out of its pool), and no caller writes other callers' rows for long.
The async batcher does the same on its event loop, with one writing task instead of a
handed-on caller.

Each caller gets its own id or its own error: rows keep their order and their idempotency
keys (``enqueue.write``); a batch the database refuses for a reason other than a lost
connection is written again row by row, so one bad row fails only its own caller.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager

import psycopg
from psycopg.pq import TransactionStatus

from kestrel_core.base.latch import Latch
from kestrel_core.base.masking import first_line
from kestrel_core.db.connection import close_quietly
from kestrel_core.db.pipeline import readable
from kestrel_core.db.retry import RETRY
from kestrel_core.db.sql_files import statements_beside
from kestrel_core.dispatch.enqueue import EnqueueFailed, Row

SQL = statements_beside(__file__)

log = logging.getLogger("kestrel.enqueue")

MAX_BATCH = 1000


Write = Callable[[Sequence[Row]], list[int]]
AsyncWrite = Callable[[Sequence[Row]], Awaitable[list[int]]]


class _Call:
    """One caller's row until its outcome is known (or it is handed the next batch)."""

    __slots__ = ("lead", "outcome", "ready", "row")

    def __init__(self, row: Row) -> None:
        self.row = row
        self.ready = Latch()
        self.outcome: int | BaseException | None = None
        self.lead = False


class WriterConnection:
    """The sync batcher's own connection: one batch in flight needs one, and none is pinged.

    A pool pings the connection it lends (a round trip per batch); this one is checked without
    one: an idle autocommit connection has nothing to read unless the server ended the session
    (a restart or a terminated backend sends an error and closes the socket), so a readable
    socket means a new connection. Used by one batch writer at a time."""

    def __init__(self, connect: Callable[[], psycopg.Connection]) -> None:
        self._connect = connect
        self._conn: psycopg.Connection | None = None
        self._lock = threading.Lock()

    @contextmanager
    def use(self) -> Iterator[psycopg.Connection]:
        """The connection, opened again if the server ended it; dropped after a lost connection."""
        with self._lock:
            conn = self._conn
            if conn is None or not _quiet(conn):
                close_quietly(conn)
                conn = self._conn = self._connect()
                conn.execute(SQL.generic_plans)
            try:
                yield conn
            except BaseException:
                if not _idle(conn):
                    close_quietly(conn)
                    self._conn = None
                raise

    def close(self) -> None:
        with self._lock:
            close_quietly(self._conn)
            self._conn = None


def _idle(conn: psycopg.Connection) -> bool:
    """True if ``conn`` is open and outside any transaction."""
    return not conn.closed and conn.info.transaction_status == TransactionStatus.IDLE


def _quiet(conn: psycopg.Connection) -> bool:
    """True if ``conn`` is open, idle and has nothing waiting to be read."""
    return _idle(conn) and not readable(conn.fileno())


def _outcomes(write: Write, batch: Sequence[Row]) -> list[int | BaseException]:
    """Each row's id or error: the batch in one statement, else row by row."""
    try:
        return list(write(batch))
    except Exception as exc:
        if not RETRY.splits(exc):  # says nothing about the rows (db/retry.py): the whole batch fails
            return [exc] * len(batch)
        if len(batch) == 1:
            return [exc]
        log.warning(
            "event=enqueue_batch_refused rows=%s error=%r (writing them one by one)", len(batch), first_line(exc)
        )
        return [outcome for row in batch for outcome in _outcomes(write, [row])]


def _result(outcome: int | BaseException | None) -> int:
    if isinstance(outcome, BaseException):
        raise outcome
    if outcome is None:
        raise EnqueueFailed("the enqueue batch ended without this row's outcome")
    return outcome


class EnqueueBatcher:
    """Group commit of enqueue calls made from many threads; ``write(rows)`` inserts rows
    with one statement on a pooled connection and returns their ids."""

    def __init__(self, write: Write, *, max_batch: int = MAX_BATCH) -> None:
        self._write = write
        self.max_batch = max_batch
        self._lock = threading.Lock()
        self._waiting: list[_Call] = []
        # One batch in flight, as in the worker's group commit: two or four gained nothing at
        # 8 or 64 callers (bench/README.md, "Ingestion").
        self._busy = False
        self.stats = {"batches": 0, "rows": 0, "largest": 0}

    def waiting(self) -> int:
        """Calls queued behind the batch in flight."""
        with self._lock:
            return len(self._waiting)

    def submit(self, row: Row) -> int:
        """Write ``row`` with the next batch; its id, or raise its own error."""
        call = _Call(row)
        with self._lock:
            self._waiting.append(call)
            if not self._busy:
                self._busy = call.lead = True
        if not call.lead:
            try:
                call.ready.wait()
            except BaseException:  # KeyboardInterrupt while queued: leave the queue, lead or not
                self._withdraw(call)
                raise
        if call.lead:
            self._lead(call)
        return _result(call.outcome)

    def _withdraw(self, call: _Call) -> None:
        """Take a call whose caller stopped waiting out of the queue; if it had been handed
        the next batch, hand that on (a batch already taken writes its row regardless)."""
        with self._lock:
            if call not in self._waiting:
                return
            self._waiting.remove(call)
            if not call.lead:
                return
            following = self._hand_on()
        if following is not None:
            following.ready.set()

    def _lead(self, call: _Call) -> None:
        """Write the waiting calls (``call`` is the oldest), then hand on to the oldest left."""
        with self._lock:
            batch = self._waiting[: self.max_batch]
            del self._waiting[: self.max_batch]
        outcomes: list[int | BaseException] = []
        try:
            outcomes = _outcomes(self._write, [c.row for c in batch])
        except BaseException as exc:  # KeyboardInterrupt in the writing thread: fail the batch
            outcomes = [exc] * len(batch)
            raise
        finally:
            for c, outcome in zip(batch, outcomes):
                c.outcome = outcome
            with self._lock:
                self.stats["batches"] += 1
                self.stats["rows"] += len(batch)
                self.stats["largest"] = max(self.stats["largest"], len(batch))
            for c in batch:
                c.ready.set()
            self._let_callers_return(len(batch))
            with self._lock:
                following = self._hand_on()
            if following is not None:
                following.ready.set()

    def _hand_on(self) -> _Call | None:
        """Under the lock: make the oldest waiting call the next batch's writer (the caller
        wakes it once the lock is released), or mark the batcher idle."""
        following = self._waiting[0] if self._waiting else None
        if following is None:
            self._busy = False
        else:
            following.lead = True
        return following

    def _let_callers_return(self, released: int) -> None:
        """Yield the GIL while the queue still grows (at most ``released`` times) before the
        next batch leaves: the callers just released are mostly about to call again, and
        without this the batches alternated between two halves of them (8 threads: 4.5 rows a
        batch instead of 7.5; bench/README.md, "Ingestion"). Not a timer: with no other thread
        runnable it costs one yield."""
        seen = -1
        for _ in range(released):
            queued = len(self._waiting)
            if queued == seen or queued >= self.max_batch:
                return
            seen = queued
            time.sleep(0)


class AsyncEnqueueBatcher:
    """Group commit of enqueue calls made from many tasks of one event loop; ``write(rows)``
    is awaited on a pooled AsyncConnection. One task writes batch after batch while calls
    are waiting, so a cancelled caller never strands the others."""

    def __init__(self, write: AsyncWrite, *, max_batch: int = MAX_BATCH) -> None:
        self._write = write
        self.max_batch = max_batch
        self._waiting: list[tuple[Row, asyncio.Future[int]]] = []
        self._writer: asyncio.Task[None] | None = None
        self.stats = {"batches": 0, "rows": 0, "largest": 0}

    def waiting(self) -> int:
        """Calls queued and not yet taken by the writer."""
        return len(self._waiting)

    async def submit(self, row: Row) -> int:
        """Write ``row`` with the next batch; its id, or raise its own error."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        self._waiting.append((row, future))
        if self._writer is None:
            self._writer = loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        batch: list[tuple[Row, asyncio.Future[int]]] = []
        try:
            while self._waiting:
                batch = self._waiting[: self.max_batch]
                del self._waiting[: self.max_batch]
                outcomes = await self._outcomes([row for row, _ in batch])
                self.stats["batches"] += 1
                self.stats["rows"] += len(batch)
                self.stats["largest"] = max(self.stats["largest"], len(batch))
                for (_, future), outcome in zip(batch, outcomes):
                    _settle(future, outcome)
                batch = []
        except BaseException as exc:  # the writer task itself was cancelled (loop shutdown)
            error = exc if isinstance(exc, Exception) else EnqueueFailed("the enqueue writer was cancelled")
            for _, future in batch + self._waiting:
                _settle(future, error)
            self._waiting.clear()
            raise
        finally:
            self._writer = None

    async def _outcomes(self, batch: Sequence[Row]) -> list[int | BaseException]:
        try:
            return list(await self._write(batch))
        except Exception as exc:
            if not RETRY.splits(exc):
                return [exc] * len(batch)
            if len(batch) == 1:
                return [exc]
            log.warning(
                "event=enqueue_batch_refused rows=%s error=%r (writing them one by one)", len(batch), first_line(exc)
            )
            return [outcome for row in batch for outcome in await self._outcomes([row])]


def _settle(future: asyncio.Future[int], outcome: int | BaseException) -> None:
    if future.done():  # its caller was cancelled
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
