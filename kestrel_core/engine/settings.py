"""A worker's settings: one frozen value, checked once, here.

``Worker(app, settings)`` takes a ``WorkerSettings``; ``Worker(app, concurrency=..., ...)``,
``app.worker(...)`` and ``app.run_worker(...)`` take the same names as keyword arguments
(``WorkerOptions``, so a type checker sees a misspelt or mistyped option in the caller's code)
and build one. Every bad value is one ``InvalidArgument`` naming the option, raised before
anything is started or connected.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypedDict

from kestrel_core.base.errors import InvalidArgument
from kestrel_core.dispatch.buckets import BUCKETS


class WorkerOptions(TypedDict, total=False):
    """The keyword arguments of ``Worker``, ``Kestrel.worker`` and ``Kestrel.run_worker``: the
    fields of ``WorkerSettings``, each optional."""

    concurrency: int
    lease: timedelta
    worker_id: str | None
    listen: bool | None
    poll_interval: float
    sweep_interval: float
    grace: timedelta | None
    db_retry_window: float | None
    startup_timeout: float | None
    prune_older_than: timedelta | None
    prune_every: float
    prune_max_batches: int
    queues: Sequence[str] | None
    transaction_pooling: bool | None
    buckets: int | None


@dataclass(frozen=True, kw_only=True)
class WorkerSettings:
    """How a worker runs. ``None`` means "derived": see each field."""

    concurrency: int = 8
    """Executions run at once (runner threads; async workflows share one event loop)."""
    lease: timedelta = timedelta(seconds=30)
    """How long a claim holds without a heartbeat (at least 1 s)."""
    worker_id: str | None = None
    """Owner id written on claimed rows; None: host:pid:random."""
    listen: bool | None = None
    """Wake on NOTIFY; None: unless transaction pooling (PgBouncer), where only polling works."""
    poll_interval: float = 1.0
    """Seconds between claims when nothing wakes the worker."""
    sweep_interval: float = 1.0
    """Seconds between sweeps of expired leases, due waits and deadlines."""
    grace: timedelta | None = None
    """How long a stop lets running steps finish; None: the lease."""
    db_retry_window: float | None = None
    """How long an engine write retries while the database is unreachable; None: 2 leases, at
    least 60 s."""
    startup_timeout: float | None = None
    """How long ``start()`` waits for an unreachable database; None: ``db_retry_window``."""
    prune_older_than: timedelta | None = None
    """Retention: delete executions finished longer ago than this; None: keep them."""
    prune_every: float = 600.0
    """Seconds between prunes (with ``prune_older_than``)."""
    prune_max_batches: int = 10
    """Batches one prune deletes at most."""
    queues: Sequence[str] | None = None
    """Claim only from these queues (kept sorted, without repeats); None: every queue."""
    transaction_pooling: bool | None = None
    """The DSN goes through PgBouncer in transaction mode; None: as the app says."""
    buckets: int | None = None
    """Serve a share of the buckets: the fleet's workers started with the same number N (1 to
    64) share N groups of buckets out among themselves (kestrel_core.dispatch.buckets); None:
    claim from every bucket, as without buckets."""

    def __post_init__(self) -> None:
        _check_int("concurrency", self.concurrency, least=1)
        _check_timedelta("lease", self.lease, least=timedelta(seconds=1), what="at least 1 second")
        if self.worker_id is not None and (not isinstance(self.worker_id, str) or not self.worker_id.strip()):
            raise InvalidArgument(f"worker_id must be a non-empty string or None, not {self.worker_id!r}")
        _check_flag("listen", self.listen)
        _check_flag("transaction_pooling", self.transaction_pooling)
        if self.buckets is not None:
            _check_int("buckets", self.buckets, least=1)
            if self.buckets > BUCKETS:
                raise InvalidArgument(f"buckets must be at most {BUCKETS}, the number of buckets, not {self.buckets}")
        _check_seconds("poll_interval", self.poll_interval, positive=True)
        _check_seconds("sweep_interval", self.sweep_interval, positive=True)
        if self.grace is not None:
            _check_timedelta("grace", self.grace, least=timedelta(0), what="zero or more")
        if self.db_retry_window is not None:
            _check_seconds("db_retry_window", self.db_retry_window)
        if self.startup_timeout is not None:
            _check_seconds("startup_timeout", self.startup_timeout)
        if self.prune_older_than is not None:
            _check_timedelta("prune_older_than", self.prune_older_than, least=timedelta.resolution, what="positive")
        _check_seconds("prune_every", self.prune_every, positive=True)
        _check_int("prune_max_batches", self.prune_max_batches, least=1)
        if self.queues is not None:
            if isinstance(self.queues, (str, bytes)) or not all(isinstance(q, str) and q for q in self.queues):
                raise InvalidArgument(f"queues must be a list of queue names or None, not {self.queues!r}")
            object.__setattr__(self, "queues", tuple(sorted(set(self.queues))))

    @classmethod
    def of(cls, settings: WorkerSettings | None = None, /, **options: Any) -> WorkerSettings:
        """``settings`` with ``options`` replaced (the defaults if None); an unknown option is an
        InvalidArgument naming it, not a TypeError from deep inside."""
        known = {f.name for f in dataclasses.fields(cls)}
        if unknown := sorted(set(options) - known):
            raise InvalidArgument(f"unknown worker option(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        return dataclasses.replace(settings, **options) if settings is not None else cls(**options)

    def resolved(self, *, transaction_pooling: bool, worker_id: str) -> WorkerSettings:
        """Every derived field (None) filled in for an app with ``transaction_pooling``, with
        ``worker_id`` as the generated id."""
        pooling = transaction_pooling if self.transaction_pooling is None else self.transaction_pooling
        window = self.db_retry_window
        if window is None:
            window = max(60.0, 2 * self.lease.total_seconds())
        return dataclasses.replace(
            self,
            worker_id=self.worker_id or worker_id,
            listen=(not pooling) if self.listen is None else self.listen,
            grace=self.lease if self.grace is None else self.grace,
            db_retry_window=window,
            startup_timeout=window if self.startup_timeout is None else self.startup_timeout,
            transaction_pooling=pooling,
        )


def _check_int(name: str, value: object, *, least: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise InvalidArgument(f"{name} must be an integer of at least {least}, not {value!r}")


def _check_seconds(name: str, value: object, *, positive: bool = False) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value == value  # not NaN
    if not ok or (value <= 0 if positive else value < 0):  # type: ignore[operator]
        raise InvalidArgument(
            f"{name} must be a number of seconds {'above' if positive else 'of at least'} 0, not {value!r}"
        )


def _check_timedelta(name: str, value: object, *, least: timedelta, what: str) -> None:
    if not isinstance(value, timedelta):
        raise InvalidArgument(f"{name} must be a datetime.timedelta, not {type(value).__name__}")
    if value < least:
        raise InvalidArgument(f"the {name} must be {what}, not {value!r}")


def _check_flag(name: str, value: object) -> None:
    if value is not None and not isinstance(value, bool):
        raise InvalidArgument(f"{name} must be True, False or None, not {value!r}")
