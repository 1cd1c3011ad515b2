"""The ``Kestrel`` object: workflow registry plus the public API users call."""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from kestrel_core.admin import actions as _operator
from kestrel_core.admin import execution as _execution
from kestrel_core.admin import prune as _prune
from kestrel_core.admin import schedules as _schedules
from kestrel_core.admin.identity import default_operator
from kestrel_core.base.errors import InvalidArgument
from kestrel_core.db import migrate as _migrate
from kestrel_core.db import roles as _roles
from kestrel_core.db.connection import connect, make_pool, unavailable
from kestrel_core.db.outage import is_outage
from kestrel_core.db.roles import RoleNames
from kestrel_core.db.statements import check_schema_name
from kestrel_core.dispatch import deadlines as _deadlines
from kestrel_core.dispatch import enqueue as _enqueue
from kestrel_core.dispatch import queues as _queues
from kestrel_core.dispatch import sweeper as _sweeper
from kestrel_core.dispatch.enqueue_batch import EnqueueBatcher, WriterConnection
from kestrel_core.durable import events as _events
from kestrel_core.workflow.versions import fingerprint

if TYPE_CHECKING:
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


class Kestrel:
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
                raise ValueError(f"workflow {wf_name!r} is registered twice")
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
                raise ValueError(f"schedule {schedule_name!r} is declared twice: give each a name=")
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

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """A pooled autocommit connection to the Kestrel database (schema checked once)."""
        pool = self._ensure_pool()
        taken: psycopg.Connection | None = None
        try:
            with pool.connection(timeout=15) as conn:
                taken = conn
                yield conn
        except PoolTimeout as exc:
            raise unavailable(self.dsn, exc) from None
        except psycopg.Error as exc:
            if is_outage(exc, taken):  # not a refusal of the statement itself
                raise unavailable(self.dsn, exc) from None
            raise

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

    # -- schema -----------------------------------------------------------------------------

    def migrate(self, *, roles: RoleNames | bool | None = None) -> list[int]:
        """Create or upgrade the schema; returns the versions applied now. Safe to run concurrently.

        Also creates (or re-grants) the least-privilege roles ``kestrel_worker`` and
        ``kestrel_operator``: by default when the connected user may create roles; ``roles=False``
        skips them; ``roles=RoleNames(...)`` names them (and fails if they cannot be created).
        """
        with connect(self.dsn, application_name=self.application_name) as conn:
            applied = _migrate.migrate(conn, self.schema)
            if roles is not False and (roles or _roles.can_create_roles(conn)):
                _roles.ensure_roles(conn, self.schema, roles if isinstance(roles, RoleNames) else None)
            return applied

    def prune(self, older_than: timedelta, *, by: str | None = None, batch_size: int = 1000) -> _prune.PruneResult:
        """Delete executions that finished more than ``older_than`` ago, in short batches (audited)."""
        return _prune.prune(
            _prune.connection_runner(self.connection),
            self.schema,
            older_than=older_than,
            by=by or default_operator(),
            batch_size=batch_size,
        )

    # -- enqueue ----------------------------------------------------------------------------

    def enqueue(
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
        conn: psycopg.Connection | None = None,
    ) -> int:
        """Enqueue workflow ``name`` with a JSON ``input``; returns the execution id.

        A repeated ``idempotency_key`` returns the first id and inserts nothing. ``delay`` or
        ``run_at`` postpone the first claim. ``queue`` overrides the workflow's queue;
        ``concurrency_key`` limits how many executions with that key run at once (the
        queue's ``per_key``, default 1). ``priority`` defaults to the queue's. Non-JSON input
        raises NotSerializable, nothing written.

        Concurrent calls from this process's threads are written together, one statement and
        one commit per batch (``enqueue_batch``); each gets its own id or its own error.
        ``conn``: enqueue inside that psycopg connection's transaction instead: the execution
        exists if and only if it commits, and workers are woken at its commit.
        """
        (row,) = _enqueue.rows(
            self._workflows,
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
                return _enqueue.write(_caller_connection(conn), self.schema, [row], prepare=self._caller_prepare)[0]
            return self._enqueue_batcher().submit(row)

    def enqueue_many(
        self,
        name: str,
        inputs: Sequence[Any],
        *,
        run_at: datetime | None = None,
        delay: timedelta | None = None,
        priority: int | None = None,
        queue: str | None = None,
        concurrency_key: str | None = None,
        conn: psycopg.Connection | None = None,
    ) -> list[int]:
        """Enqueue one execution per input in one statement; ids in input order. ``conn``: in
        that connection's transaction, as for ``enqueue``."""
        rows = _enqueue.rows(
            self._workflows,
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
                return _enqueue.write(_caller_connection(conn), self.schema, rows, prepare=self._caller_prepare)
            return self._write_rows(rows)

    @property
    def _caller_prepare(self) -> bool | None:
        """No server-side prepared statement on a caller's connection through PgBouncer."""
        return False if self.transaction_pooling else None

    def _write_rows(self, rows: Sequence[_enqueue.Row]) -> list[int]:
        if not rows:
            return []
        return self._creating_ranges(self._insert_rows, rows)

    def _insert_rows(self, rows: Sequence[_enqueue.Row]) -> list[int]:
        with self.connection() as conn:
            ids = _enqueue.write(conn, self.schema, rows, notify=False)
            _enqueue.wake(conn, self.schema, rows)
            return ids

    def _write_batch(self, rows: Sequence[_enqueue.Row]) -> list[int]:
        """A batch of the group commit: on the batcher's own connection (its schema checked as it
        opens: a lone enqueue opens no other), insert and wake in one round trip (through
        PgBouncer, whose transaction mode does not take a pipeline of two transactions, as
        ``enqueue_many`` does)."""
        if self.transaction_pooling:
            return self._write_rows(rows)
        return self._creating_ranges(self._insert_and_wake, rows)

    def _insert_and_wake(self, rows: Sequence[_enqueue.Row]) -> list[int]:
        try:
            with self._writer.use() as conn:
                return _enqueue.write_and_wake(conn, self.schema, rows)
        except psycopg.OperationalError as exc:
            if is_outage(exc):
                raise unavailable(self.dsn, exc) from None
            raise

    def _creating_ranges(
        self, write: Callable[[Sequence[_enqueue.Row]], list[int]], rows: Sequence[_enqueue.Row]
    ) -> list[int]:
        """``write(rows)``; if their ids ran past the history's ranges, create the ranges (as
        the workers' upkeep does) and write again. Not for a caller's own transaction: the
        failed insert aborted it."""
        tries = 0
        while True:
            try:
                return write(rows)
            except psycopg.errors.CheckViolation as exc:
                tries += 1
                if not _enqueue.past_the_ranges(exc) or tries == _enqueue.RANGE_TRIES:
                    raise
            try:
                with self.connection() as conn:
                    _sweeper.ensure_partitions(conn, self.schema)
            except psycopg.errors.LockNotAvailable:
                pass  # another session is attaching them: the next try may find them
            time.sleep(_enqueue.RANGE_PAUSE_S * tries)

    def _enqueue_batcher(self) -> EnqueueBatcher:
        batcher = self._batcher
        if batcher is None:
            with self._pool_lock:
                if self._batcher is None:
                    self._batcher = EnqueueBatcher(self._write_batch)
                batcher = self._batcher
        return batcher

    def send_event(self, key: str, payload: Any = None, *, by: str | None = None) -> int:
        """Send a machine signal: every execution waiting in ``ctx.wait_for_event(key)`` resumes
        with ``payload`` (any JSON value), and later waits for ``key`` find it. Returns its id."""
        value = _events.check_send(key, payload)
        with self.connection() as conn:
            return _events.send(conn, self.schema, key, value, by)

    # -- reading ----------------------------------------------------------------------------

    def get(self, execution_id: int) -> _execution.Execution:
        """The execution's status, input, output, error and timestamps (NotFound if none)."""
        with self.connection() as conn:
            return _execution.get(conn, self.schema, execution_id)

    # -- operator actions -------------------------------------------------------------------

    def approve(
        self, execution_id: int, step_id: str, *, by: str | None = None, comment: str | None = None
    ) -> dict[str, Any]:
        """Approve a pending gate and re-enqueue the execution (audited)."""
        with self.connection() as conn:
            return _operator.decide(
                conn, self.schema, execution_id, step_id, approved=True, by=by or default_operator(), comment=comment
            )

    def reject(
        self, execution_id: int, step_id: str, *, by: str | None = None, comment: str | None = None
    ) -> dict[str, Any]:
        """Reject a pending gate and re-enqueue the execution (audited)."""
        with self.connection() as conn:
            return _operator.decide(
                conn, self.schema, execution_id, step_id, approved=False, by=by or default_operator(), comment=comment
            )

    def cancel(self, execution_id: int, *, by: str | None = None, comment: str | None = None) -> str:
        """Cancel an enqueued, running, waiting or paused execution; returns its previous status."""
        with self.connection() as conn:
            return _operator.cancel(conn, self.schema, execution_id, by=by or default_operator(), comment=comment)

    def requeue(self, execution_id: int, *, by: str | None = None, comment: str | None = None) -> str:
        """Re-enqueue an errored/cancelled execution or one with an expired lease."""
        with self.connection() as conn:
            return _operator.requeue(conn, self.schema, execution_id, by=by or default_operator(), comment=comment)

    def fork(
        self,
        execution_id: int,
        *,
        from_step: str,
        input: Any = _operator.UNSET,
        version: str | None = None,
        by: str | None = None,
        comment: str | None = None,
    ) -> int:
        """A new execution from step ``from_step`` of a finished or waiting one: the checkpoints
        before it are kept, it and every step after it run again (``input`` replaces the
        origin's; ``version``: only workers of that code version run it). Audited, linked to its
        origin; returns the new id."""
        with self.connection() as conn:
            return _operator.fork(
                conn, self.schema, execution_id, from_step=from_step, input=input, version=version,
                by=by or default_operator(), comment=comment,
            )  # fmt: skip

    def pause(self, execution_id: int, *, by: str | None = None, comment: str | None = None) -> str:
        """Hold one enqueued, running or waiting execution (audited): nothing runs it until it
        is resumed; a running one stops at its next step boundary, its waits keep their
        deadlines. Returns its previous status."""
        with self.connection() as conn:
            return _operator.pause(conn, self.schema, execution_id, by=by or default_operator(), comment=comment)

    def resume(self, execution_id: int, *, by: str | None = None, comment: str | None = None) -> str:
        """Let a paused execution go on from its checkpoints (audited); returns the status it
        went to: 'waiting' while one of its waits is still open, 'running' when the claim it
        was paused under still runs it (a step in flight: that claim goes on), else 'enqueued'."""
        with self.connection() as conn:
            return _operator.resume(conn, self.schema, execution_id, by=by or default_operator(), comment=comment)

    def pause_queue(self, name: str, *, by: str | None = None, comment: str | None = None) -> None:
        """Stop claiming from queue ``name`` (running executions finish); audited."""
        with self.connection() as conn:
            _queues.set_paused(conn, self.schema, name, True, by=by or default_operator(), comment=comment)

    def resume_queue(self, name: str, *, by: str | None = None, comment: str | None = None) -> None:
        """Claim from a paused queue again; audited."""
        with self.connection() as conn:
            _queues.set_paused(conn, self.schema, name, False, by=by or default_operator(), comment=comment)

    def add_schedule(
        self,
        name: str,
        cron: str,
        workflow: str,
        *,
        input: dict[str, Any] | None = None,
        timezone: str = "UTC",
        catch_up: bool = False,
        by: str | None = None,
        comment: str | None = None,
    ) -> datetime:
        """Add a schedule (audited; any worker ticks it); returns its first tick. ValueError for
        a bad cron, timezone or input; ActionRefused if the name is taken, or if this login may
        not enqueue: a schedule enqueues its workflow at every tick, so adding one needs the
        worker role (the operator role pauses, resumes and removes schedules)."""
        with self.connection() as conn, _roles.needs_worker_role("add a schedule"):
            return _schedules.add(
                conn,
                self.schema,
                name,
                cron,
                workflow,
                input=input,
                timezone=timezone,
                catch_up=catch_up,
                by=by or default_operator(),
                comment=comment,
            )

    def pause_schedule(self, name: str, *, by: str | None = None, comment: str | None = None) -> None:
        """Stop a schedule's ticks until it is resumed (audited)."""
        with self.connection() as conn:
            _schedules.set_paused(conn, self.schema, name, True, by=by or default_operator(), comment=comment)

    def resume_schedule(self, name: str, *, by: str | None = None, comment: str | None = None) -> datetime:
        """Tick again from the first tick after now (none of the paused ticks); returns it (audited)."""
        with self.connection() as conn:
            return _schedules.set_paused(conn, self.schema, name, False, by=by or default_operator(), comment=comment)

    def trigger_schedule(self, name: str, *, by: str | None = None, comment: str | None = None) -> int:
        """Run a schedule once, now: its workflow enqueued with the input a tick gives (audited);
        its ticks are left alone and a paused one stays paused. Returns the new execution's id."""
        with self.connection() as conn:
            return _schedules.trigger(conn, self.schema, name, by=by or default_operator(), comment=comment)

    def remove_schedule(self, name: str, *, by: str | None = None, comment: str | None = None) -> str:
        """Delete a schedule (audited); returns its source: 'code' ones come back when a worker
        that declares them starts (pause those instead)."""
        with self.connection() as conn:
            return _schedules.remove(conn, self.schema, name, by=by or default_operator(), comment=comment)

    # -- workers ----------------------------------------------------------------------------

    def worker(
        self,
        *,
        concurrency: int = 8,
        lease: timedelta = timedelta(seconds=30),
        worker_id: str | None = None,
        **options: Any,
    ) -> Worker:
        """A Worker for this app's workflows (not started). See ``kestrel_core.engine.worker.Worker``."""
        from kestrel_core.engine.worker import Worker

        return Worker(self, concurrency=concurrency, lease=lease, worker_id=worker_id, **options)

    def run_worker(
        self,
        *,
        concurrency: int = 8,
        lease: timedelta = timedelta(seconds=30),
        worker_id: str | None = None,
        **options: Any,
    ) -> None:
        """Run a worker in this thread until SIGINT/SIGTERM, then shut down gracefully."""
        self.worker(concurrency=concurrency, lease=lease, worker_id=worker_id, **options).run()


def _caller_connection(conn: object) -> psycopg.Connection:
    """``conn`` if it is a sync psycopg connection (the caller's, in its transaction)."""
    if isinstance(conn, psycopg.AsyncConnection):
        raise InvalidArgument("conn= is an AsyncConnection: enqueue through AsyncKestrel to use it")
    if not isinstance(conn, psycopg.Connection):
        raise InvalidArgument(f"conn= must be a psycopg.Connection, not {type(conn).__name__}")
    return conn
