"""The ``ctx`` a workflow function receives: durable steps, sleeps and approval gates.

Replay is deterministic by construction: a step whose checkpoint exists returns the stored
output without running; a sleep or gate whose checkpoint exists returns at once. Anything else
runs (or parks) and is checkpointed under the claim.
"""

from __future__ import annotations

import asyncio
import inspect
import random
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg

from . import checkpoint, waits
from .checkpoint import Checkpoint
from .claim import Claim
from .errors import DuplicateStepId, NotSerializable, StepFailed
from .serialization import to_json

if TYPE_CHECKING:
    from .worker import Worker

T = TypeVar("T")


class Unwind(BaseException):
    """Stops a workflow function without finishing it (parked, claim lost, or shutting down).

    A BaseException so that a workflow's ``except Exception`` cannot swallow it.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Decision:
    """The outcome of an approval gate."""

    approved: bool
    by: str | None
    comment: str | None
    timed_out: bool
    decided_at: str | None = None

    @classmethod
    def from_checkpoint(cls, output: dict[str, Any]) -> Decision:
        return cls(
            approved=bool(output.get("approved")), by=output.get("by"),
            comment=output.get("comment"), timed_out=bool(output.get("timed_out")),
            decided_at=output.get("decided_at"),
        )


class Claimed:
    """This worker's hold on one execution; ``lost`` is set when the heartbeat finds it gone."""

    def __init__(self, claim: Claim) -> None:
        self.claim = claim
        self.lost = threading.Event()


def describe_exception(exc: BaseException, limit: int = 8000) -> str:
    """``Type: message`` then the traceback, cut to ``limit`` characters (the end is kept)."""
    text = "".join(traceback.format_exception(exc)).rstrip()
    head = f"{type(exc).__name__}: {exc}"
    if len(text) > limit:
        text = "...\n" + text[-limit:]
    return f"{head}\n\n{text}"


class WorkflowContext:
    """Durable operations for one execution of a synchronous workflow."""

    def __init__(self, worker: Worker, held: Claimed, checkpoints: dict[str, Checkpoint]) -> None:
        self._worker = worker
        self._held = held
        self._checkpoints = checkpoints
        self._used: set[str] = set()

    @property
    def execution_id(self) -> int:
        return self._held.claim.execution_id

    @property
    def workflow_name(self) -> str:
        return self._held.claim.workflow_name

    @property
    def input(self) -> Any:
        return self._held.claim.input

    @property
    def worker_id(self) -> str:
        """The worker running this execution now (its ``owner_id``)."""
        return self._worker.worker_id

    @property
    def claim_epoch(self) -> int:
        """Which claim of the execution this is: (worker_id, claim_epoch) fences every write."""
        return self._held.claim.epoch

    # -- the durable operations -------------------------------------------------------------

    def step(self, step_id: str, fn: Callable[..., T], *args: Any, retries: int = 0,
             backoff: float = 1.0, max_backoff: float = 60.0, **kwargs: Any) -> T:
        """Run ``fn(*args, **kwargs)`` once for this execution and checkpoint its JSON result.

        On replay the stored result is returned and ``fn`` is not called. An exception is
        retried ``retries`` times, waiting ``backoff * 2**n`` seconds (with jitter, capped at
        ``max_backoff``); after the last attempt StepFailed is raised here (and stored, so a
        replay raises it again without running ``fn``).
        """
        self._use(step_id)
        stored = self._checkpoints.get(step_id)
        if stored is not None:
            return self._result(step_id, stored)
        total = retries + 1
        for number in range(1, total + 1):
            self._boundary()
            attempt = self._write(lambda c: checkpoint.start_attempt(
                c, self._worker.schema, execution_id=self.execution_id, step_id=step_id,
                owner=self._worker.worker_id, epoch=self._held.claim.epoch))
            if attempt is None:
                self._lost(f"step {step_id!r} not started")
            error, final = self._attempt(step_id, fn, args, kwargs)
            if isinstance(error, _Output):
                return self._result(step_id, self._checkpoint(step_id, attempt, error.value, None))
            if final or number == total:
                return self._result(step_id, self._checkpoint(step_id, attempt, None, error))
            self._write(lambda c: checkpoint.fail_attempt(c, self._worker.schema, attempt.id, error))
            delay = min(max_backoff, backoff * 2 ** (number - 1)) * random.uniform(0.5, 1.0)
            self._worker.log.info("event=step_retry execution_id=%s step=%s attempt=%s delay_s=%.2f",
                                  self.execution_id, step_id, attempt.number, delay)
            if self._worker.draining.wait(delay):
                raise Unwind("shutdown")
        raise AssertionError("unreachable")

    def sleep(self, step_id: str, duration: timedelta | float) -> None:
        """Sleep durably: the execution parks (no thread waits) and resumes when due."""
        self._use(step_id)
        if step_id in self._checkpoints:
            return
        after = duration if isinstance(duration, timedelta) else timedelta(seconds=duration)
        self._park(step_id, "sleep", after, None)

    def wait_for_approval(self, step_id: str, *, timeout: timedelta | float | None = None,
                          details: Any = None) -> Decision:
        """Park until an operator approves or rejects gate ``step_id`` (or ``timeout`` passes).

        ``details`` (any JSON value) is shown to the approver. A timeout yields
        ``Decision(approved=False, timed_out=True)``.
        """
        self._use(step_id)
        stored = self._checkpoints.get(step_id)
        if stored is not None:
            return Decision.from_checkpoint(stored.output or {})
        payload = to_json(details, f"the details of approval gate {step_id!r}")
        after = timedelta(seconds=timeout) if isinstance(timeout, (int, float)) else timeout
        self._park(step_id, "approval", after, payload)
        raise AssertionError("unreachable")

    # -- internals ---------------------------------------------------------------------------

    def _use(self, step_id: str) -> None:
        if not isinstance(step_id, str) or not step_id:
            raise ValueError(f"a step id must be a non-empty string, got {step_id!r}")
        if step_id in self._used:
            raise DuplicateStepId(
                f"step id {step_id!r} is used twice in execution {self.execution_id} of "
                f"{self.workflow_name!r}: give every step, sleep and approval gate a unique id "
                "(e.g. add the loop index: f'fetch-{i}')"
            )
        self._used.add(step_id)

    def _boundary(self) -> None:
        """Stop here if the claim was lost or the worker is shutting down."""
        if self._held.lost.is_set():
            self._lost("claim lost (detected by heartbeat)")
        if self._worker.draining.is_set():
            raise Unwind("shutdown")

    def _lost(self, what: str) -> None:
        self._worker.refused(self.execution_id, what)
        raise Unwind("lost")

    def _write(self, fn: Callable[[Any], T]) -> T:
        """Run one of the engine's statements. Its failure is not the workflow's: it unwinds
        (past any ``except Exception`` in the workflow) and the lease lapses, so the execution
        is retried later instead of being marked failed."""
        try:
            return self._worker.db(fn)
        except psycopg.Error as exc:
            self._worker.log.error("event=engine_write_failed execution_id=%s error=%r", self.execution_id,
                                   str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
            raise Unwind("engine_error") from exc

    def _attempt(self, step_id: str, fn: Callable[..., Any], args: tuple, kwargs: dict) -> tuple[Any, bool]:
        """Run one attempt: (_Output, _) on success, else (error text, is_final)."""
        try:
            result = fn(*args, **kwargs)
            if inspect.isawaitable(result):
                result = self._worker.await_on_loop(result)
            return _Output(to_json(result, f"the output of step {step_id!r} (execution {self.execution_id})")), True
        except NotSerializable as exc:
            return str(exc), True  # the same code would return the same type: no retry
        except Exception as exc:
            return describe_exception(exc), False

    def _checkpoint(self, step_id: str, attempt: checkpoint.Attempt, output: Any, error: str | None) -> Checkpoint:
        stored = self._write(lambda c: checkpoint.finish_step(
            c, self._worker.schema, execution_id=self.execution_id, step_id=step_id,
            owner=self._worker.worker_id, epoch=self._held.claim.epoch, attempt=attempt,
            output=output, error=error))
        if stored is None:
            self._lost(f"checkpoint of step {step_id!r} refused")
        self._checkpoints[step_id] = stored
        return stored

    def _result(self, step_id: str, stored: Checkpoint) -> Any:
        if stored.error is not None:
            raise StepFailed(step_id, stored.attempts, stored.error.split("\n", 1)[0])
        return stored.output

    def _park(self, step_id: str, kind: str, after: timedelta | None, details: Any) -> None:
        self._boundary()
        parked = self._write(lambda c: waits.park(
            c, self._worker.schema, execution_id=self.execution_id, owner=self._worker.worker_id,
            epoch=self._held.claim.epoch, step_id=step_id, kind=kind, after=after, details=details))
        if not parked:
            self._lost(f"{kind} {step_id!r} not parked")
        raise Unwind("parked")


@dataclass(frozen=True)
class _Output:
    value: Any


class AsyncWorkflowContext:
    """The ``ctx`` of an ``async def`` workflow: the same operations, awaitable.

    Database work and blocking steps run in threads; coroutine steps run on the worker's loop.
    """

    def __init__(self, sync: WorkflowContext) -> None:
        self._sync = sync

    @property
    def execution_id(self) -> int:
        return self._sync.execution_id

    @property
    def workflow_name(self) -> str:
        return self._sync.workflow_name

    @property
    def input(self) -> Any:
        return self._sync.input

    @property
    def worker_id(self) -> str:
        return self._sync.worker_id

    @property
    def claim_epoch(self) -> int:
        return self._sync.claim_epoch

    async def step(self, step_id: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """See WorkflowContext.step; ``fn`` may be a coroutine function."""
        return await asyncio.to_thread(self._sync.step, step_id, fn, *args, **kwargs)

    async def sleep(self, step_id: str, duration: timedelta | float) -> None:
        """See WorkflowContext.sleep."""
        await asyncio.to_thread(self._sync.sleep, step_id, duration)

    async def wait_for_approval(self, step_id: str, *, timeout: timedelta | float | None = None,
                                details: Any = None) -> Decision:
        """See WorkflowContext.wait_for_approval."""
        return await asyncio.to_thread(self._sync.wait_for_approval, step_id, timeout=timeout, details=details)
