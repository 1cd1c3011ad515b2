"""The ``Kestrel`` object: workflow registry plus the public API users call."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from kestrel_core.admin import prune as _prune
from kestrel_core.admin import schedules as _schedules
from kestrel_core.api.operations import Operations
from kestrel_core.base.errors import InvalidArgument
from kestrel_core.db import migrate as _migrate
from kestrel_core.db.connection import ConnectionRunner, connect, make_pool, unavailable
from kestrel_core.db.outage import is_outage
from kestrel_core.db.statements import check_schema_name
from kestrel_core.dispatch import deadlines as _deadlines
from kestrel_core.dispatch import enqueue as _enqueue
from kestrel_core.dispatch import queues as _queues
from kestrel_core.dispatch.enqueue_batch import EnqueueBatcher, WriterConnection
from kestrel_core.workflow.versions import fingerprint

if TYPE_CHECKING:
    from kestrel_core.engine.settings import WorkerOptions, WorkerSettings
    from kestrel_core.engine.worker import Worker

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Workflow:
    """A registered workflow function."""

    name: str
    fn: Callable[..., Any]
    is_async: bool
    queue: str = _queues.DEFAULT_QUEUE
    version: str | None = None  # explicit, else the fingerprint of the source (versions.py)
    timeout: timedelta | None = None  # deadline from the execution's start (deadlines.py)


class Kestrel(Operations):
    """A Kestrel application: register workflows, enqueue them, run workers, act as operator.

    ``dsn`` None means ``$KESTREL_DSN``, then libpq defaults. ``transaction_pooling=True`` is for
    PgBouncer in transaction mode: no LISTEN (workers poll) and no server-side prepared statements.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        schema: str = "kestrel",
        transaction_pooling: bool = False,
        application_name: str = "kestrel",
    ) -> None:
        from kestrel_core.db.connection import resolve_dsn

        self.dsn = resolve_dsn(dsn)
        self.schema = check_schema_name(schema)
        self.transaction_pooling = transaction_pooling
        self.application_name = application_name
        self._workflows: dict[str, Workflow] = {}
        self._queues: dict[str, _queues.Queue] = {}
        self._schedules: dict[str, _schedules.Schedule] = {}
        self._pool: ConnectionPool | None = None
        self._pool_lock = threading.Lock()
        self._batcher: EnqueueBatcher | None = None
        self._writer = WriterConnection(self._checked_connection)
        self._frozen = True

    def __setattr__(self, name: str, value: Any) -> None:
        """Settings are fixed once built (a worker, its pool and its batcher read them): build
        another ``Kestrel`` for other ones (``with_settings``)."""
        if getattr(self, "_frozen", False) and not name.startswith("_"):
            raise AttributeError(f"Kestrel is immutable after construction: cannot set {name!r}")
        object.__setattr__(self, name, value)

    def with_settings(
        self,
        *,
        dsn: str | None = None,
        schema: str | None = None,
        transaction_pooling: bool | None = None,
        application_name: str | None = None,
    ) -> Kestrel:
        """A new ``Kestrel`` with the same workflows, queues and schedules, and these settings
        where given (the others as this one's): how a command line overrides a loaded app."""
        other = Kestrel(
            self.dsn if dsn is None else dsn,
            schema=self.schema if schema is None else schema,
            transaction_pooling=self.transaction_pooling if transaction_pooling is None else transaction_pooling,
            application_name=self.application_name if application_name is None else application_name,
        )
        other._workflows.update(self._workflows)
        other._queues.update(self._queues)
        other._schedules.update(self._schedules)
        return other

    # -- registry ---------------------------------------------------------------------------

    def workflow(
        self,
        name: str | Callable[..., Any] | None = None,
        *,
        queue: str | None = None,
        version: str | None = None,
        timeout: timedelta | float | None = None,
    ) -> Any:
        """Register a workflow: ``@app.workflow``, ``@app.workflow()`` or ``@app.workflow("n")``.

        The function is called as ``fn(ctx, input)`` and may be ``async def``. ``queue`` binds
        it to a queue (default ``"default"``); ``version`` names its code version (default: a
        fingerprint of its source), recorded on every execution it starts; ``timeout`` is a
        deadline from the execution's start: past it the execution ends as error, even while
        it waits.
        """
        if callable(name):
            return self.workflow(queue=queue, version=version, timeout=timeout)(name)
        timeout = _deadlines.checked_timeout(timeout)

        def register(fn: F) -> F:
            wf_name = name or fn.__name__
            if wf_name in self._workflows and self._workflows[wf_name].fn is not fn:
                raise InvalidArgument(f"workflow {wf_name!r} is registered twice")
            self._workflows[wf_name] = Workflow(
                wf_name,
                fn,
                inspect.iscoroutinefunction(fn),
                queue or _queues.DEFAULT_QUEUE,
                str(version) if version is not None else fingerprint(fn),
                timeout=timeout,
            )
            return fn

        return register

    @property
    def workflows(self) -> dict[str, Workflow]:
        """The registered workflows by name."""
        return dict(self._workflows)

    def queue(
        self,
        name: str,
        *,
        concurrency: int | None = None,
        per_worker: int | None = None,
        rate: tuple[int, timedelta] | None = None,
        priority: int | None = None,
        per_key: int = 1,
    ) -> _queues.Queue:
        """Declare a queue and its limits, which hold across all workers (workers write the
        declaration to the ``queues`` table when they start).

        ``concurrency``: running at once in all; ``per_worker``: on one worker; ``rate=(N,
        timedelta)``: at most N claims started per sliding window; ``priority``: default
        priority of its executions; ``per_key``: running at once per ``concurrency_key``.
        """
        declared = _queues.Queue(name, concurrency, per_worker, rate, priority or 0, per_key)
        self._queues[name] = declared
        return declared

    @property
    def queues(self) -> dict[str, _queues.Queue]:
        """The declared queues by name."""
        return dict(self._queues)

    def schedule(
        self,
        cron: str,
        *,
        name: str | None = None,
        timezone: str = "UTC",
        catch_up: bool = False,
        input: dict[str, Any] | None = None,
    ) -> Callable[[F], F]:
        """Enqueue the decorated workflow at every tick of ``cron`` (see kestrel_core.engine.scheduler
        for ``catch_up``); registers it as a workflow unless ``@app.workflow`` did (put
        ``@app.schedule`` above it). Each run's input is ``input`` plus ``schedule`` and
        ``scheduled_at`` (the tick, ISO 8601 UTC). Workers write it to the schedules table.
        """

        def register(fn: F) -> F:
            known = next((w.name for w in self._workflows.values() if w.fn is fn), None)
            wf_name = known or fn.__name__
            schedule_name = name or wf_name
            expression, _ = _schedules.check(schedule_name, cron, wf_name, timezone, input)
            if schedule_name in self._schedules:
                raise InvalidArgument(f"schedule {schedule_name!r} is declared twice: give each a name=")
            if known is None:
                self.workflow()(fn)
            self._schedules[schedule_name] = _schedules.Schedule(
                schedule_name, expression, wf_name, timezone, catch_up, input
            )
            return fn

        return register

    @property
    def schedules(self) -> dict[str, _schedules.Schedule]:
        """The schedules declared in code, by name."""
        return dict(self._schedules)

    # -- connections ------------------------------------------------------------------------

    def _checked_connection(self) -> psycopg.Connection:
        """A new connection to a schema at this code's version (else SchemaOutdated); a failure
        to connect is DatabaseUnavailable with libpq's reason, at once (a pool would retry)."""
        conn = connect(self.dsn, application_name=self.application_name)
        try:
            _migrate.check_current(conn, self.schema)
        except BaseException:
            conn.close()
            raise
        return conn

    def _ensure_pool(self) -> ConnectionPool:
        with self._pool_lock:
            if self._pool is None:
                # The schema check, and a clear first failure: on the batches' own connection
                # (opened now, or checked when it opened), except through PgBouncer, where that
                # connection's session setting must not reach other clients' server sessions.
                if self.transaction_pooling:
                    self._checked_connection().close()
                else:
                    with self._writer.use():
                        pass
                pool = make_pool(
                    self.dsn,
                    min_size=1,
                    max_size=4,
                    application_name=self.application_name,
                    prepare=not self.transaction_pooling,
                    name="kestrel-api",
                )
                # Its first connection before the first caller asks: a caller waiting on an empty
                # pool makes it open a second one at once.
                try:
                    pool.open(wait=True, timeout=15)
                except PoolTimeout as exc:
                    pool.close()
                    raise unavailable(self.dsn, exc) from None
                self._pool = pool
            return self._pool

    def close(self) -> None:
        """Close the connection pool and the enqueue batches' connection (workers have their own)."""
        with self._pool_lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None
        self._writer.close()

    def __enter__(self) -> Kestrel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- enqueue: the group commit (the operations are Operations') ------------------------

    def _write_batch(self, rows: Sequence[_enqueue.Row]) -> list[int]:
        """A batch of the group commit: on the batcher's own connection (its schema checked as it
        opens: a lone enqueue opens no other), insert and wake in one round trip (through
        PgBouncer, whose transaction mode does not take a pipeline of two transactions, as
        ``enqueue_many`` does)."""
        if self.transaction_pooling:
            return self._write_rows(rows)
        return self._creating_ranges(self._insert_and_wake, rows)

    def _submit(self, row: _enqueue.Row) -> int:
        return self._enqueue_batcher().submit(row)

    def _registry(self) -> dict[str, Any]:
        return self._workflows

    def _prune_runner(self) -> ConnectionRunner:
        return _prune.connection_runner(self.connection)

    def _insert_and_wake(self, rows: Sequence[_enqueue.Row]) -> list[int]:
        try:
            with self._writer.use() as conn:
                return _enqueue.write_and_wake(conn, self.schema, rows)
        except psycopg.OperationalError as exc:
            if is_outage(exc):
                raise unavailable(self.dsn, exc) from None
            raise

    def _enqueue_batcher(self) -> EnqueueBatcher:
        batcher = self._batcher
        if batcher is None:
            with self._pool_lock:
                if self._batcher is None:
                    self._batcher = EnqueueBatcher(self._write_batch)
                batcher = self._batcher
        return batcher

    # -- workers ----------------------------------------------------------------------------

    def worker(self, settings: WorkerSettings | None = None, /, **options: Unpack[WorkerOptions]) -> Worker:
        """A Worker for this app's workflows (not started): ``settings`` and/or its fields as
        keywords (``concurrency=4``; see ``WorkerSettings``)."""
        from kestrel_core.engine.worker import Worker

        return Worker(self, settings, **options)

    def run_worker(self, settings: WorkerSettings | None = None, /, **options: Unpack[WorkerOptions]) -> None:
        """Run a worker in this thread until SIGINT/SIGTERM, then shut down gracefully."""
        self.worker(settings, **options).run()
