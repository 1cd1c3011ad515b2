"""``AsyncKestrel``: the client API for asyncio servers (FastAPI, aiohttp, ...).

The same statements, checks and errors as ``Kestrel``'s (each module's ``*_async`` twin runs
its sync statement constant on an AsyncConnection); only the I/O differs. Concurrent
``enqueue`` calls of one event loop are group-committed (``enqueue_batch``), and ``conn=``
takes the caller's own ``psycopg.AsyncConnection`` to enqueue (or act) in its transaction.
One AsyncKestrel belongs to one event loop: its pool is opened in the loop of the first call.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from kestrel_core.admin import actions as _operator
from kestrel_core.admin import execution as _execution
from kestrel_core.admin.identity import default_operator
from kestrel_core.base.errors import InvalidArgument
from kestrel_core.db import migrate as _migrate
from kestrel_core.db import roles as _roles
from kestrel_core.db.connection import connect, make_async_pool, resolve_dsn, unavailable
from kestrel_core.db.outage import is_outage
from kestrel_core.db.statements import check_schema_name, render
from kestrel_core.dispatch import enqueue as _enqueue
from kestrel_core.dispatch import sweeper as _sweeper
from kestrel_core.dispatch.enqueue_batch import AsyncEnqueueBatcher
from kestrel_core.durable import events as _events

if TYPE_CHECKING:
    from kestrel_core.api.app import Kestrel


class AsyncKestrel:
    """Enqueue, read and act on executions from asyncio code.

    ``dsn``, ``schema``, ``transaction_pooling`` and ``application_name`` as for ``Kestrel``.
    ``app``: a ``Kestrel`` whose registered workflows place new executions (their bound queue
    and code version, as ``app.enqueue`` does); without it the queue is resolved in the
    database and any version may run them. Use ``async with AsyncKestrel(...)`` or ``await
    close()``.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        schema: str = "kestrel",
        transaction_pooling: bool = False,
        application_name: str = "kestrel",
        app: Kestrel | None = None,
        max_connections: int = 4,
    ) -> None:
        self.dsn = resolve_dsn(dsn)
        self.schema = check_schema_name(schema)
        self.transaction_pooling = transaction_pooling
        self.application_name = application_name
        self._app = app
        self._max_connections = max_connections
        self._pool: AsyncConnectionPool | None = None
        self._pool_lock: asyncio.Lock | None = None
        self._batcher = AsyncEnqueueBatcher(self._write_rows)

    # -- connections ------------------------------------------------------------------------

    async def _ensure_pool(self) -> AsyncConnectionPool:
        if self._pool is not None:
            return self._pool
        if self._pool_lock is None:
            self._pool_lock = asyncio.Lock()
        async with self._pool_lock:
            if self._pool is None:
                # A direct first connection fails fast with libpq's reason and checks the schema
                # with the sync code (once); the pool would retry.
                await asyncio.to_thread(self._probe)
                pool = make_async_pool(
                    self.dsn,
                    min_size=1,
                    max_size=self._max_connections,
                    application_name=self.application_name,
                    prepare=not self.transaction_pooling,
                    name="kestrel-async-api",
                )
                # Its first connection before the first caller asks: a caller waiting on an empty
                # pool makes it open a second one at once (as Kestrel's pool).
                try:
                    await pool.open(wait=True, timeout=15)
                except PoolTimeout as exc:
                    await pool.close()
                    raise unavailable(self.dsn, exc) from None
                self._pool = pool
        return self._pool

    def _probe(self) -> None:
        with connect(self.dsn, application_name=self.application_name) as probe:
            _migrate.check_current(probe, self.schema)

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection]:
        """A pooled autocommit AsyncConnection to the Kestrel database (schema checked once)."""
        pool = await self._ensure_pool()
        taken: psycopg.AsyncConnection | None = None
        try:
            async with pool.connection(timeout=15) as conn:
                taken = conn
                yield conn
        except PoolTimeout as exc:
            raise unavailable(self.dsn, exc) from None
        except psycopg.Error as exc:
            if is_outage(exc, taken):  # not a refusal of the statement itself
                raise unavailable(self.dsn, exc) from None
            raise

    async def close(self) -> None:
        """Close the connection pool."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()

    async def __aenter__(self) -> AsyncKestrel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @asynccontextmanager
    async def _on(self, conn: psycopg.AsyncConnection | None) -> AsyncIterator[psycopg.AsyncConnection]:
        """The caller's connection (in its transaction), else a pooled one."""
        if conn is None:
            async with self.connection() as pooled:
                yield pooled
        else:
            yield _caller_connection(conn)

    # -- enqueue ----------------------------------------------------------------------------

    async def enqueue(
        self,
        name: str,
        input: Any = None,
        *,
        idempotency_key: str | None = None,
        run_at: datetime | None = None,
        delay: timedelta | None = None,
        priority: int | None = None,
        queue: str | None = None,
        concurrency_key: str | None = None,
        conn: psycopg.AsyncConnection | None = None,
    ) -> int:
        """``Kestrel.enqueue``, awaited: concurrent calls of this loop share one statement and
        one commit; ``conn`` enqueues in that AsyncConnection's transaction instead."""
        (row,) = _enqueue.rows(
            self._workflows(),
            name,
            [input],
            single=True,
            idempotency_key=idempotency_key,
            run_at=run_at,
            delay=delay,
            priority=priority,
            queue=queue,
            concurrency_key=concurrency_key,
        )
        with _roles.needs_worker_role("enqueue"):
            if conn is not None:
                caller = _caller_connection(conn)
                return (await _enqueue.write_async(caller, self.schema, [row], prepare=self._caller_prepare))[0]
            return await self._batcher.submit(row)

    async def enqueue_many(
        self,
        name: str,
        inputs: Sequence[Any],
        *,
        run_at: datetime | None = None,
        delay: timedelta | None = None,
        priority: int | None = None,
        queue: str | None = None,
        concurrency_key: str | None = None,
        conn: psycopg.AsyncConnection | None = None,
    ) -> list[int]:
        """``Kestrel.enqueue_many``, awaited: one statement; ids in input order."""
        rows = _enqueue.rows(
            self._workflows(),
            name,
            inputs,
            run_at=run_at,
            delay=delay,
            priority=priority,
            queue=queue,
            concurrency_key=concurrency_key,
        )
        with _roles.needs_worker_role("enqueue"):
            if conn is not None:
                caller = _caller_connection(conn)
                return await _enqueue.write_async(caller, self.schema, rows, prepare=self._caller_prepare)
            return await self._write_rows(rows)

    def _workflows(self) -> dict[str, Any]:
        return self._app.workflows if self._app is not None else {}

    @property
    def _caller_prepare(self) -> bool | None:
        return False if self.transaction_pooling else None

    async def _write_rows(self, rows: Sequence[_enqueue.Row]) -> list[int]:
        """Insert and wake; ids past the history's ranges create them and go again, as in
        ``Kestrel._creating_ranges``."""
        if not rows:
            return []
        tries = 0
        while True:
            try:
                async with self.connection() as conn:
                    ids = await _enqueue.write_async(conn, self.schema, rows, notify=False)
                    await _enqueue.wake_async(conn, self.schema, rows)
                    return ids
            except psycopg.errors.CheckViolation as exc:
                tries += 1
                if not _enqueue.past_the_ranges(exc) or tries == _enqueue.RANGE_TRIES:
                    raise
            try:
                async with self.connection() as conn:
                    await conn.execute(render(_sweeper.ENSURE_PARTITIONS, self.schema))
            except psycopg.errors.LockNotAvailable:
                pass  # another session is attaching them: the next try may find them
            await asyncio.sleep(_enqueue.RANGE_PAUSE_S * tries)

    async def send_event(
        self, key: str, payload: Any = None, *, by: str | None = None, conn: psycopg.AsyncConnection | None = None
    ) -> int:
        """``Kestrel.send_event``, awaited; returns the event's id."""
        value = _events.check_send(key, payload)
        async with self._on(conn) as c:
            return await _events.send_async(c, self.schema, key, value, by)

    # -- reading ----------------------------------------------------------------------------

    async def get(self, execution_id: int, *, conn: psycopg.AsyncConnection | None = None) -> _execution.Execution:
        """The execution's status, input, output, error and timestamps (NotFound if none)."""
        async with self._on(conn) as c:
            return await _execution.get_async(c, self.schema, execution_id)

    # -- operator actions -------------------------------------------------------------------

    async def approve(
        self,
        execution_id: int,
        step_id: str,
        *,
        by: str | None = None,
        comment: str | None = None,
        conn: psycopg.AsyncConnection | None = None,
    ) -> dict[str, Any]:
        """Approve a pending gate and re-enqueue the execution (audited)."""
        async with self._on(conn) as c:
            return await _operator.decide_async(
                c, self.schema, execution_id, step_id, approved=True, by=by or default_operator(), comment=comment
            )

    async def reject(
        self,
        execution_id: int,
        step_id: str,
        *,
        by: str | None = None,
        comment: str | None = None,
        conn: psycopg.AsyncConnection | None = None,
    ) -> dict[str, Any]:
        """Reject a pending gate and re-enqueue the execution (audited)."""
        async with self._on(conn) as c:
            return await _operator.decide_async(
                c, self.schema, execution_id, step_id, approved=False, by=by or default_operator(), comment=comment
            )

    async def cancel(
        self,
        execution_id: int,
        *,
        by: str | None = None,
        comment: str | None = None,
        conn: psycopg.AsyncConnection | None = None,
    ) -> str:
        """Cancel an enqueued, running, waiting or paused execution; returns its previous status."""
        async with self._on(conn) as c:
            return await _operator.cancel_async(
                c, self.schema, execution_id, by=by or default_operator(), comment=comment
            )

    async def fork(
        self,
        execution_id: int,
        *,
        from_step: str,
        input: Any = _operator.UNSET,
        version: str | None = None,
        by: str | None = None,
        comment: str | None = None,
        conn: psycopg.AsyncConnection | None = None,
    ) -> int:
        """A new execution from step ``from_step`` of a finished or waiting one (see Kestrel.fork)."""
        async with self._on(conn) as c:
            return await _operator.fork_async(
                c, self.schema, execution_id, from_step=from_step, input=input, version=version,
                by=by or default_operator(), comment=comment,
            )  # fmt: skip

    async def pause(
        self,
        execution_id: int,
        *,
        by: str | None = None,
        comment: str | None = None,
        conn: psycopg.AsyncConnection | None = None,
    ) -> str:
        """Hold one execution until it is resumed (see Kestrel.pause); returns its previous status."""
        async with self._on(conn) as c:
            return await _operator.pause_async(
                c, self.schema, execution_id, by=by or default_operator(), comment=comment
            )

    async def resume(
        self,
        execution_id: int,
        *,
        by: str | None = None,
        comment: str | None = None,
        conn: psycopg.AsyncConnection | None = None,
    ) -> str:
        """Let a paused execution go on (see Kestrel.resume); returns the status it went to."""
        async with self._on(conn) as c:
            return await _operator.resume_async(
                c, self.schema, execution_id, by=by or default_operator(), comment=comment
            )

    async def requeue(
        self,
        execution_id: int,
        *,
        by: str | None = None,
        comment: str | None = None,
        conn: psycopg.AsyncConnection | None = None,
    ) -> str:
        """Re-enqueue an errored/cancelled execution or one with an expired lease."""
        async with self._on(conn) as c:
            return await _operator.requeue_async(
                c, self.schema, execution_id, by=by or default_operator(), comment=comment
            )


def _caller_connection(conn: object) -> psycopg.AsyncConnection:
    """``conn`` if it is a psycopg AsyncConnection (the caller's, in its transaction)."""
    if not isinstance(conn, psycopg.AsyncConnection):
        raise InvalidArgument(
            f"conn= must be a psycopg.AsyncConnection, not {type(conn).__name__}"
            + (": use Kestrel for a sync Connection" if isinstance(conn, psycopg.Connection) else "")
        )
    return conn
