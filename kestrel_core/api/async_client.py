"""``AsyncKestrel``: the client API for asyncio servers (FastAPI, aiohttp, ...).

The operations are ``AsyncOperations`` (``async_operations.py``), of which ``Kestrel``'s are the
generated sync twin: the same statements, checks and errors; only the I/O differs. Concurrent
``enqueue`` calls of one event loop are group-committed (``enqueue_batch``), and ``conn=``
takes the caller's own ``psycopg.AsyncConnection`` to enqueue (or act) in its transaction.
One AsyncKestrel belongs to one event loop: its pool is opened in the loop of the first call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from kestrel_core.admin import prune as _prune
from kestrel_core.api.async_operations import AsyncOperations
from kestrel_core.db import migrate as _migrate
from kestrel_core.db.connection import ConnectionRunner, connect, make_async_pool, resolve_dsn, unavailable
from kestrel_core.db.statements import check_schema_name
from kestrel_core.dispatch import enqueue as _enqueue
from kestrel_core.dispatch.enqueue_batch import AsyncEnqueueBatcher

if TYPE_CHECKING:
    from kestrel_core.api.app import Kestrel


class AsyncKestrel(AsyncOperations):
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
        with self._sync_connection():
            pass

    async def close(self) -> None:
        """Close the connection pool."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()

    async def __aenter__(self) -> AsyncKestrel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- what this shell gives the operations ------------------------------------------------

    async def _submit(self, row: _enqueue.Row) -> int:
        return await self._batcher.submit(row)

    def _registry(self) -> dict[str, Any]:
        return self._app.workflows if self._app is not None else {}

    def _prune_runner(self) -> ConnectionRunner:
        """Prune runs in a thread, on connections of its own (the pool's are this loop's)."""
        return _prune.connection_runner(self._sync_connection)

    @contextmanager
    def _sync_connection(self) -> Iterator[psycopg.Connection]:
        with connect(self.dsn, application_name=self.application_name) as conn:
            _migrate.check_current(conn, self.schema)
            yield conn
