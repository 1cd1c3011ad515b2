"""The ``Kestrel`` object: workflow registry plus the public API users call."""

from __future__ import annotations

import getpass
import inspect
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from . import enqueue as _enqueue
from . import events as _events
from . import execution as _execution
from . import migrate as _migrate
from . import operator as _operator
from . import prune as _prune
from . import roles as _roles
from .connection import connect, make_pool, unavailable
from .roles import RoleNames
from .serialization import to_json
from .statements import check_schema_name

if TYPE_CHECKING:
    from .worker import Worker

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Workflow:
    """A registered workflow function."""

    name: str
    fn: Callable[..., Any]
    is_async: bool
    timeout: timedelta | None = None  # deadline from the execution's start (deadlines.py)


def default_operator() -> str:
    """Who is acting when no name is given: ``$USER``, else the OS login name."""
    try:
        return os.environ.get("USER") or getpass.getuser()
    except Exception:  # no passwd entry (containers)
        return "unknown"


class Kestrel:
    """A Kestrel application: register workflows, enqueue them, run workers, act as operator.

    ``dsn`` None means ``$KESTREL_DSN``, then libpq defaults. ``transaction_pooling=True`` is for
    PgBouncer in transaction mode: no LISTEN (workers poll) and no server-side prepared statements.
    """

    def __init__(
        self, dsn: str | None = None, *, schema: str = "kestrel",
        transaction_pooling: bool = False, application_name: str = "kestrel",
    ) -> None:
        from .connection import resolve_dsn

        self.dsn = resolve_dsn(dsn)
        self.schema = check_schema_name(schema)
        self.transaction_pooling = transaction_pooling
        self.application_name = application_name
        self._workflows: dict[str, Workflow] = {}
        self._pool: ConnectionPool | None = None
        self._pool_lock = threading.Lock()

    # -- registry ---------------------------------------------------------------------------

    def workflow(self, name: str | Callable[..., Any] | None = None, *,
                 timeout: timedelta | float | None = None) -> Any:
        """Register a workflow: ``@app.workflow``, ``@app.workflow()`` or ``@app.workflow("n")``.

        The function is called as ``fn(ctx, input)`` and may be ``async def``. ``timeout`` is a
        deadline from the execution's start: past it the execution ends as error, even while
        it waits.
        """
        if callable(name):
            return self.workflow(timeout=timeout)(name)
        if isinstance(timeout, (int, float)):
            timeout = timedelta(seconds=timeout)
        if timeout is not None and timeout <= timedelta(0):
            raise ValueError("a workflow timeout must be positive")

        def register(fn: F) -> F:
            wf_name = name or fn.__name__
            if wf_name in self._workflows and self._workflows[wf_name].fn is not fn:
                raise ValueError(f"workflow {wf_name!r} is registered twice")
            self._workflows[wf_name] = Workflow(wf_name, fn, inspect.iscoroutinefunction(fn),
                                                timeout=timeout)
            return fn

        return register

    @property
    def workflows(self) -> dict[str, Workflow]:
        """The registered workflows by name."""
        return dict(self._workflows)

    # -- connections ------------------------------------------------------------------------

    def _ensure_pool(self) -> ConnectionPool:
        with self._pool_lock:
            if self._pool is None:
                # A direct first connection fails fast with libpq's reason; the pool would retry.
                with connect(self.dsn, application_name=self.application_name) as probe:
                    _migrate.check_current(probe, self.schema)
                pool = make_pool(
                    self.dsn, min_size=1, max_size=4, application_name=self.application_name,
                    prepare=not self.transaction_pooling, name="kestrel-api",
                )
                pool.open(wait=False)
                self._pool = pool
            return self._pool

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """A pooled autocommit connection to the Kestrel database (schema checked once)."""
        pool = self._ensure_pool()
        try:
            with pool.connection(timeout=15) as conn:
                yield conn
        except PoolTimeout as exc:
            raise unavailable(self.dsn, exc) from None
        except psycopg.OperationalError as exc:
            raise unavailable(self.dsn, exc) from None

    def close(self) -> None:
        """Close the connection pool (workers have their own)."""
        with self._pool_lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None

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

    def prune(self, older_than: timedelta, *, by: str | None = None,
              batch_size: int = 1000) -> _prune.PruneResult:
        """Delete executions that finished more than ``older_than`` ago, in short batches (audited)."""
        return _prune.prune(_prune.connection_runner(self.connection), self.schema,
                            older_than=older_than, by=by or default_operator(), batch_size=batch_size)

    # -- enqueue ----------------------------------------------------------------------------

    def enqueue(
        self, name: str, input: Any = None, *, idempotency_key: str | None = None,
        run_at: datetime | None = None, delay: timedelta | None = None, priority: int = 0,
    ) -> int:
        """Enqueue workflow ``name`` with a JSON ``input``; returns the execution id.

        A repeated ``idempotency_key`` returns the first id and inserts nothing. ``delay`` or
        ``run_at`` postpone the first claim. Non-JSON input raises NotSerializable, nothing written.
        """
        run_at = _resolve_run_at(run_at, delay)
        with self.connection() as conn:
            return _enqueue.enqueue(
                conn, self.schema, name, input, idempotency_key=idempotency_key,
                run_at=run_at, priority=priority,
            )

    def enqueue_many(
        self, name: str, inputs: Sequence[Any], *, run_at: datetime | None = None,
        delay: timedelta | None = None, priority: int = 0,
    ) -> list[int]:
        """Enqueue one execution per input in one round trip; ids in input order."""
        run_at = _resolve_run_at(run_at, delay)
        with self.connection() as conn:
            return _enqueue.enqueue_many(conn, self.schema, name, inputs, run_at=run_at, priority=priority)

    def send_event(self, key: str, payload: Any = None, *, by: str | None = None) -> int:
        """Send a machine signal: every execution waiting in ``ctx.wait_for_event(key)`` resumes
        with ``payload`` (any JSON value), and later waits for ``key`` find it. Returns its id."""
        if not isinstance(key, str) or not key:
            raise ValueError(f"an event key must be a non-empty string, got {key!r}")
        value = to_json(payload, f"the payload of event {key!r}")
        with self.connection() as conn:
            return _events.send(conn, self.schema, key, value, by)

    # -- reading ----------------------------------------------------------------------------

    def get(self, execution_id: int) -> _execution.Execution:
        """The execution's status, input, output, error and timestamps (NotFound if none)."""
        with self.connection() as conn:
            return _execution.get(conn, self.schema, execution_id)

    # -- operator actions -------------------------------------------------------------------

    def approve(self, execution_id: int, step_id: str, *, by: str | None = None,
                comment: str | None = None) -> dict[str, Any]:
        """Approve a pending gate and re-enqueue the execution (audited)."""
        with self.connection() as conn:
            return _operator.decide(conn, self.schema, execution_id, step_id, approved=True,
                                    by=by or default_operator(), comment=comment)

    def reject(self, execution_id: int, step_id: str, *, by: str | None = None,
               comment: str | None = None) -> dict[str, Any]:
        """Reject a pending gate and re-enqueue the execution (audited)."""
        with self.connection() as conn:
            return _operator.decide(conn, self.schema, execution_id, step_id, approved=False,
                                    by=by or default_operator(), comment=comment)

    def cancel(self, execution_id: int, *, by: str | None = None, comment: str | None = None) -> str:
        """Cancel an enqueued, running or waiting execution; returns its previous status."""
        with self.connection() as conn:
            return _operator.cancel(conn, self.schema, execution_id,
                                    by=by or default_operator(), comment=comment)

    def requeue(self, execution_id: int, *, by: str | None = None, comment: str | None = None) -> str:
        """Re-enqueue an errored/cancelled execution or one with an expired lease."""
        with self.connection() as conn:
            return _operator.requeue(conn, self.schema, execution_id,
                                     by=by or default_operator(), comment=comment)

    # -- workers ----------------------------------------------------------------------------

    def worker(self, *, concurrency: int = 8, lease: timedelta = timedelta(seconds=30),
               worker_id: str | None = None, **options: Any) -> Worker:
        """A Worker for this app's workflows (not started). See ``kestrel_core.worker.Worker``."""
        from .worker import Worker

        return Worker(self, concurrency=concurrency, lease=lease, worker_id=worker_id, **options)

    def run_worker(self, *, concurrency: int = 8, lease: timedelta = timedelta(seconds=30),
                   worker_id: str | None = None, **options: Any) -> None:
        """Run a worker in this thread until SIGINT/SIGTERM, then shut down gracefully."""
        self.worker(concurrency=concurrency, lease=lease, worker_id=worker_id, **options).run()


def _resolve_run_at(run_at: datetime | None, delay: timedelta | None) -> datetime | None:
    if run_at is not None and delay is not None:
        raise ValueError("give run_at or delay, not both")
    if delay is not None:
        from datetime import timezone

        return datetime.now(timezone.utc) + delay
    return run_at
