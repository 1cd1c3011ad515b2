"""What the pieces of a running worker need of each other, as small Protocols.

A workflow context needs a handful of the worker's services (``WorkerRuntime``), and the
worker needs only the app's registrations and connection settings (``Deployment``). Naming
them here lets ``context.py`` and ``worker.py`` depend on these contracts instead of on each
other (and ``worker.py`` not on ``app.py``), so the import graph has no circles.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import psycopg

from kestrel_core.base.latch import Latch
from kestrel_core.dispatch.claim import Claim
from kestrel_core.durable.boundary import Boundary, Outcome

T = TypeVar("T")


class Unwind(BaseException):
    """Stops a workflow function without finishing it (parked, claim lost, or shutting down),
    or, with ``error``, ends the execution as error (a non-deterministic change).

    A BaseException so that a workflow's ``except Exception`` cannot swallow it.
    """

    def __init__(self, reason: str, error: Exception | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.error = error


class Claimed:
    """This worker's hold on one execution; ``lost`` is set when the heartbeat finds it gone.

    ``fenced_at``: the monotonic time just before the worker sent the claim (None: unknown,
    never fresh). Taken before sending, so a freeze anywhere after it (SIGSTOP, a pause) counts
    as time in which the claim may have ended (context.py, ``FIRST_STEP_FRESH_S``).
    """

    def __init__(self, claim: Claim, fenced_at: float | None = None) -> None:
        self.claim = claim
        self.lost = Latch()
        self.fenced_at = float("-inf") if fenced_at is None else fenced_at


class Flag(Protocol):
    """A condition that, once true, stays true (``threading.Event``'s reading side): the
    worker's "draining" (engine/worker_state.py)."""

    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


class WorkerRuntime(Protocol):
    """What a workflow context uses of the worker running it."""

    schema: str
    worker_id: str
    log: logging.Logger
    registry: Registry  # the workflows it runs (a child's queue and version come from there)

    @property
    def draining(self) -> Flag:
        """Set once the worker stops claiming: executions stop at their next boundary."""

    def db(self, fn: Callable[[psycopg.Connection], T], *, window: float | None = None) -> T: ...

    def commit(self, boundary: Boundary, *, after: Any = None) -> Outcome:
        """Write one step boundary with the worker's next group commit (``after``: the handle
        of the lazy start of the attempt it ends)."""

    def open_lazily(self, boundary: Boundary) -> Any:
        """Queue a first attempt's start without waiting; returns the handle for ``after``."""

    def refused(self, execution_id: int, what: str) -> None: ...

    def await_on_loop(self, awaitable: Any) -> Any: ...


class Deployment(Protocol):
    """What a worker reads of the app (``Kestrel``): where to connect, and what is registered."""

    dsn: str
    schema: str
    transaction_pooling: bool

    @property
    def workflows(self) -> Mapping[str, Any]: ...
    @property
    def queues(self) -> Mapping[str, Any]: ...
    @property
    def schedules(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class Registry:
    """The app's registrations a worker runs (the app's own mappings, not copies)."""

    workflows: Mapping[str, Any]
    queues: Mapping[str, Any]
    schedules: Mapping[str, Any]


@dataclass(frozen=True)
class EngineSettings:
    """Where a worker connects and how."""

    dsn: str
    schema: str
    transaction_pooling: bool
