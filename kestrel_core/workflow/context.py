"""The ``ctx`` a workflow function receives: durable steps, sleeps and approval gates
(child workflows and events are in flow_context.py; the ``ctx`` of an ``async def`` workflow
is async_context.py).

Replay is deterministic by construction: a step whose checkpoint exists returns the stored
output without running; a sleep or gate whose checkpoint exists returns at once. Anything else
runs (or parks) and is checkpointed under the claim.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, NoReturn, TypeVar

import psycopg

from kestrel_core.base import tracing
from kestrel_core.base.backoff import Backoff
from kestrel_core.base.describe import describe_exception, exception_head, unstorable
from kestrel_core.base.errors import (
    DuplicateStepId,
    NonDeterministicChange,
    NotSerializable,
    StepFailed,
    UnauditedDecision,
)
from kestrel_core.base.latch import Latch
from kestrel_core.base.masking import first_line
from kestrel_core.base.serialization import as_stored, to_json
from kestrel_core.durable import waits
from kestrel_core.durable.boundary import Attempt, Boundary, Finish, Outcome
from kestrel_core.durable.checkpoint import Checkpoint
from kestrel_core.workflow import offload
from kestrel_core.workflow.boxing import boxed, unbox
from kestrel_core.workflow.contracts import Claimed, Unwind, WorkerRuntime
from kestrel_core.workflow.flow_context import EventTurn, FlowOperations, checked_interval, value_refused

__all__ = ["Claimed", "Decision", "Unwind", "WorkflowContext", "describe_exception"]

T = TypeVar("T")

# The first step of a first claim reached within FIRST_STEP_FRESH_S of sending the claim is
# fenced by the claim itself; later, by a write of its own. Within that time nothing but an
# operator's cancel can end the claim: a lease is at least 1 s and a requeue needs it lapsed, a
# freeze counts into the time (Claimed.fenced_at), and a workflow with a deadline never takes
# this way. A cancel of a first claim younger than CANCEL_WAITS_FOR_FRESH_CLAIMS_S (by the
# claim's own statement time, ``started_at``) waits that long before it commits
# (lock_live_execution.sql, for a cancel or a pause): so it commits after every first step the
# claim alone fenced had started, and anything that saw it committed (the workflow's own code included) is followed
# by a fenced start. The margin covers the two clocks' rates.
FIRST_STEP_FRESH_S = 0.2
CANCEL_WAITS_FOR_FRESH_CLAIMS_S = 0.25


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
            approved=bool(output.get("approved")),
            by=output.get("by"),
            comment=output.get("comment"),
            timed_out=bool(output.get("timed_out")),
            decided_at=output.get("decided_at"),
        )


class WorkflowContext(FlowOperations):
    """Durable operations for one execution of a synchronous workflow.

    Every durable operation (step, sleep, gate, child start, wait) takes the next position in
    the execution (1, 2, ...), recorded with its checkpoint: a replay that asks for another
    operation at a recorded position fails the execution (NonDeterministicChange).
    """

    def __init__(self, worker: WorkerRuntime, held: Claimed, checkpoints: dict[str, Checkpoint]) -> None:
        self._worker = worker
        self._held = held
        self._checkpoints = checkpoints
        self._used: set[str] = set()
        self._position = 0
        self._recorded = {cp.position: step for step, cp in checkpoints.items() if cp.position is not None}
        self._auto: dict[str, int] = {}
        self._children = None
        self._events_seen: dict[str, int] = {}
        self._event_turns: dict[str, EventTurn] = {}
        # The boundary state of the workflow's own line of steps: a sync workflow's steps run
        # one after another, so the end of the last one waits for the next boundary. Each step
        # of an async workflow has its own (AsyncWorkflowContext.step): gathered steps never
        # share one. The lock guards what steps running at once share (the checkpoint map, the
        # positions, the children and events seen).
        self._strand = Strand(defer=True)
        self._lock = threading.Lock()

    # -- the durable operations -------------------------------------------------------------

    def step(
        self,
        step_id: str,
        fn: Callable[..., T],
        *args: Any,
        retries: int = 0,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        timeout: timedelta | float | None = None,
        **kwargs: Any,
    ) -> T:
        """Run ``fn(*args, **kwargs)`` once for this execution and checkpoint its JSON result.

        On replay the stored result is returned and ``fn`` is not called. An exception is
        retried ``retries`` times, waiting ``backoff * 2**n`` seconds (with jitter, capped at
        ``max_backoff``); after the last attempt StepFailed is raised here (and stored, so a
        replay raises it again without running ``fn``). ``timeout`` bounds each attempt: an
        attempt still running then fails (and is retried if retries remain); a plain function
        cannot be killed, so it runs on in its thread and its result is discarded, while a
        coroutine step is cancelled.
        """
        # What comes back is fn's result as stored: its JSON form (a tuple comes back a list).
        result: T = self._step(
            self._use(step_id),
            step_id,
            fn,
            args,
            kwargs,
            retries=retries,
            backoff=backoff,
            max_backoff=max_backoff,
            timeout=timeout,
        )
        return result

    def _step(
        self,
        position: int,
        step_id: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        retries: int = 0,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        timeout: timedelta | float | None = None,
    ) -> Any:
        limit = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        stored = self._stored(step_id)
        if stored is not None:
            return self._result(step_id, stored)
        if retries < 0:
            raise ValueError(f"retries must be 0 or more, got {retries!r}")
        strand = self._strand
        total = retries + 1
        number = 0
        while True:
            number += 1
            self._boundary()
            attempt = self._open(step_id, position, strand)
            try:
                if tracing.state.on:  # a span per attempt; off, one attribute test
                    result = tracing.in_step(step_id, attempt.number, self._call, fn, args, kwargs, limit, strand)
                else:
                    result = self._call(fn, args, kwargs, limit, strand)
            except Unwind:
                raise
            except BaseException as exc:  # every class a step raises is its failure (_failed)
                error = self._failed(step_id, number, limit, exc)
            else:
                return self._result(step_id, self._settle(step_id, attempt, result, position, strand))
            if number == total:
                return self._result(step_id, self._checkpoint(step_id, attempt, None, error, position, strand))
            # Closed with the retry's start (one round trip), or by a flush on shutdown.
            strand.pending = Finish(step_id, attempt, error=error, keep=False)
            delay = self._retry_delay(step_id, attempt, number, backoff, max_backoff)
            if self._worker.draining.wait(delay):
                raise Unwind("shutdown")

    def _retry_delay(self, step_id: str, attempt: Attempt, number: int, backoff: float, max_backoff: float) -> float:
        """The pause before attempt ``number + 1`` (logged)."""
        delay = Backoff(backoff, cap=max_backoff, jitter=0.5).delay(number - 1)
        self._worker.log.info(
            "event=step_retry execution_id=%s step=%s attempt=%s delay_s=%.2f",
            self.execution_id,
            step_id,
            attempt.number,
            delay,
        )
        return delay

    def sleep(self, step_id: str, duration: timedelta | float) -> None:
        """Sleep durably: the execution parks (no thread waits) and resumes when due."""
        self._sleep(self._use(step_id), step_id, duration)

    def _sleep(self, position: int, step_id: str, duration: timedelta | float) -> None:
        if self._stored(step_id) is not None:
            return
        after = checked_interval(duration, f"the duration of sleep {step_id!r}", required=True)
        self._park(step_id, "sleep", after, None, position)

    def wait_for_approval(
        self, step_id: str, *, timeout: timedelta | float | None = None, details: Any = None
    ) -> Decision:
        """Park until an operator approves or rejects gate ``step_id`` (or ``timeout`` passes).

        ``details`` (any JSON value) is shown to the approver. A timeout yields
        ``Decision(approved=False, timed_out=True)``.
        """
        return self._approval(self._use(step_id), step_id, timeout, details)

    def _approval(self, position: int, step_id: str, timeout: timedelta | float | None, details: Any) -> Decision:
        stored = self._stored(step_id)
        if stored is not None:
            decision = Decision.from_checkpoint(stored.output or {})
            if not stored.backs(approved=decision.approved, by=decision.by, timed_out=decision.timed_out):
                raise Unwind(
                    "unaudited",
                    UnauditedDecision(
                        f"approval gate {step_id!r} of execution {self.execution_id} has a checkpoint "
                        f"({'approved' if decision.approved else 'rejected'} by {decision.by!r}) that no "
                        "recorded decision backs: it was written outside decide_approval, so it is not "
                        "trusted; see the operator_actions audit"
                    ),
                )
            return decision
        payload = to_json(details, f"the details of approval gate {step_id!r}")
        after = checked_interval(timeout, f"the timeout of approval gate {step_id!r}")
        self._park(step_id, "approval", after, payload, position)
        raise AssertionError("unreachable")

    # -- internals ---------------------------------------------------------------------------

    def _use(self, step_id: str) -> int:
        """Claim ``step_id`` for the next durable operation; returns its position (1-based)."""
        if not isinstance(step_id, str) or not step_id or (why := unstorable(step_id)):
            raise ValueError(f"a step id must be a non-empty string without {why or 'NUL'}, got {step_id!r}")
        if step_id in self._used:
            raise DuplicateStepId(
                f"step id {step_id!r} is used twice in execution {self.execution_id} of "
                f"{self.workflow_name!r}: give every step, sleep and approval gate a unique id "
                "(e.g. add the loop index: f'fetch-{i}')"
            )
        with self._lock:
            self._used.add(step_id)
            self._position += 1
            position = self._position
            stored = self._checkpoints.get(step_id)
        expected = self._recorded.get(position)
        if expected is not None and expected != step_id:
            self._nondeterministic(
                f"replay expected step {expected!r} at position {position}, the code asked for {step_id!r}"
            )
        if stored is not None and stored.position is not None and stored.position != position:
            self._nondeterministic(
                f"replay expected step {step_id!r} at position {stored.position}, "
                f"the code asked for it at position {position}"
            )
        return position

    def _auto_id(self, base: str) -> str:
        """``base`` the first time, then ``base#2``, ``base#3``... (deterministic on replay)."""
        n = self._auto[base] = self._auto.get(base, 0) + 1
        return base if n == 1 else f"{base}#{n}"

    def _nondeterministic(self, what: str) -> None:
        raise Unwind(
            "nondeterministic",
            NonDeterministicChange(
                f"non-deterministic change in workflow {self.workflow_name!r} (execution "
                f"{self.execution_id}): {what} (was the workflow changed while executions were in "
                "flight? use version=...)"
            ),
        )

    def _boundary(self) -> None:
        """Stop here if the claim was lost or the worker is shutting down."""
        if self._held.lost.is_set():
            # The step that ran is written first: a pause (no longer running, still this claim)
            # keeps it; a claim really lost refuses it, as it refuses everything.
            self._flush()
            if not self._current_again():
                self._lost("claim lost (detected by heartbeat)")
        if self._worker.draining.is_set():
            raise Unwind("shutdown")

    def _current_again(self) -> bool:
        """Whether the claim the heartbeat missed is current again (paused, then resumed while
        this claim still ran it: resume_execution), asked with a row that writes nothing."""
        probe = Boundary(self.execution_id, self._worker.worker_id, self._held.claim.claim_epoch)
        if not self._commit(probe, self._strand).held:
            return False
        self._held.lost = Latch()
        return True

    def _lost(self, what: str) -> NoReturn:
        self._worker.refused(self.execution_id, what)
        raise Unwind("lost")

    def _write(self, fn: Callable[[Any], T]) -> T:
        """Run one of the engine's statements. Its failure is not the workflow's: it unwinds
        (past any ``except Exception`` in the workflow) and the lease lapses, so the execution
        is retried later instead of being marked failed."""
        self._flush()
        try:
            return self._worker.db(fn)
        except psycopg.Error as exc:
            raise self._engine_write_failed(exc) from exc

    def _engine_write_failed(self, exc: psycopg.Error) -> Unwind:
        """Log an engine write that failed past the retry window; the Unwind to raise (ending
        the execution as error when the database refused a value the workflow gave)."""
        if (refused := value_refused(exc)) is not None:
            self._worker.log.error("event=workflow_value_refused execution_id=%s error=%r", self.execution_id, refused)
            return Unwind("value_refused", refused)
        self._worker.log.error("event=engine_write_failed execution_id=%s error=%r", self.execution_id, first_line(exc))
        return Unwind("engine_error")

    def _settle(self, step_id: str, attempt: Attempt, result: Any, position: int, strand: Strand) -> Checkpoint:
        """Checkpoint an attempt that returned ``result``: its JSON, or the error that it is
        none (final: the same code would return the same type)."""
        try:
            output = to_json(result, f"the output of step {step_id!r} (execution {self.execution_id})")
        except NotSerializable as exc:
            return self._checkpoint(step_id, attempt, None, str(exc), position, strand)
        return self._checkpoint(step_id, attempt, output, None, position, strand)

    def _failed(self, step_id: str, number: int, timeout: float | None, exc: BaseException) -> str:
        """The error text of an attempt that raised ``exc`` (or outlived its timeout).

        Whatever a step raises fails that attempt, BaseException included: retried, then
        StepFailed. A SystemExit, KeyboardInterrupt, GeneratorExit or asyncio.CancelledError
        out of a step is the step's own (the engine never raises them into a step: a worker
        stops on a signal, and cancels no step's task), so it is no reason to stop the worker
        or strand the execution; it is logged, as it is unusual."""
        if not isinstance(exc, Exception):
            self._worker.log.warning(
                "event=step_raised_base_exception execution_id=%s step=%s attempt=%s error=%r "
                "(a failure of the attempt: retried, then StepFailed)",
                self.execution_id,
                step_id,
                number,
                first_line(exception_head(exc)),
            )
        if isinstance(exc, AttemptTimedOut):
            return (
                f"StepTimeout: attempt {number} of step {step_id!r} timed out after {timeout:g}s "
                "(a function still running goes on in its thread; its result is discarded)"
            )
        return describe_exception(exc)

    def _call(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        timeout: float | None,
        strand: Strand,
    ) -> Any:
        if timeout is None:
            result = fn(*args, **kwargs)
            return self._worker.await_on_loop(self._started(result, strand)) if inspect.isawaitable(result) else result
        if inspect.iscoroutinefunction(fn):
            try:
                work = boxed(self._started(fn(*args, **kwargs), strand))
                return unbox(self._worker.await_on_loop(asyncio.wait_for(work, timeout)))
            except TimeoutError:
                raise AttemptTimedOut() from None
        box: dict[str, Any] = {}
        done = threading.Event()

        def run() -> None:
            try:
                result = fn(*args, **kwargs)
                if inspect.isawaitable(result):
                    result = self._worker.await_on_loop(self._started(result, strand))
                box["result"] = result
            except BaseException as exc:  # handed to the caller's thread
                box["error"] = exc
            finally:
                done.set()

        threading.Thread(target=run, name=f"kestrel-step-{self.execution_id}", daemon=True).start()
        if not done.wait(timeout):
            raise AttemptTimedOut()
        if "error" in box:
            raise box["error"]
        return box["result"]

    def _started(self, awaitable: Any, strand: Strand) -> Any:
        """A coroutine step of a first attempt opened lazily (``_open``) starts on the event
        loop, which another workflow's blocking code may hold long after ``_open`` found the
        claim fresh: the fence is checked again when it really starts."""
        if strand.lazy_open is None:
            return awaitable
        return self._fenced_start(awaitable, strand)

    async def _fenced_start(self, awaitable: Any, strand: Strand) -> Any:
        if time.monotonic() - self._held.fenced_at >= FIRST_STEP_FRESH_S:
            try:
                await offload.to_thread(self._fence, strand)
            except BaseException:
                if inspect.iscoroutine(awaitable):
                    awaitable.close()  # never started: no "never awaited" warning
                raise
        return await awaitable

    def _fence(self, strand: Strand) -> None:
        """Ask, with a row of the next group commit that writes nothing, whether the claim is
        still current; stop here (Unwind) if not."""
        fence = Boundary(self.execution_id, self._worker.worker_id, self._held.claim.claim_epoch)
        if not self._commit(fence, strand).held:
            self._lost("first step not started")

    def _checkpoint(
        self, step_id: str, attempt: Attempt, output: Any, error: str | None, position: int, strand: Strand
    ) -> Checkpoint:
        """The step's checkpoint. Deferred (a sync workflow's strand): it is written with the
        next boundary (the next step's start, a park, the completion), in the same round trip;
        only workflow code, which must be deterministic, runs in between, so a crash there
        re-runs this step exactly as a crash before its checkpoint would. Otherwise (each async
        step's own strand) it is written now."""
        strand.pending = Finish(step_id, attempt, output, error, keep=True, position=position)
        stored = Checkpoint(as_stored(output), error, attempt.number, position)
        if not strand.defer:
            stored = self._flush(strand) or stored
        self._remember(step_id, stored)
        return stored

    def _stored(self, step_id: str) -> Checkpoint | None:
        """The checkpoint of ``step_id``, if it has one."""
        with self._lock:
            return self._checkpoints.get(step_id)

    def _remember(self, step_id: str, stored: Checkpoint) -> None:
        """Record a checkpoint this run wrote (or found) in the map every operation reads."""
        with self._lock:
            self._checkpoints[step_id] = stored

    def _open(self, step_id: str, position: int, strand: Strand) -> Attempt:
        """Start an attempt of ``step_id``, writing the strand's pending end in the same statement.

        Every attempt starts fenced. The first step of a first claim reached while the claim is
        fresh (``FIRST_STEP_FRESH_S``) is fenced by the claim itself: its attempt 1 is written
        lazily, with its end if that comes soon enough (group_commit.py; a coroutine step asks
        again when it really starts: ``_started``). Later, it opens its attempt as every other
        step does, fenced by that write: the attempt's start is then on record before the step
        runs, also when the worker is frozen between the two."""
        claim_epoch = self._held.claim.claim_epoch
        fresh = time.monotonic() - self._held.fenced_at < FIRST_STEP_FRESH_S
        if strand.defer and position == 1 and self._held.claim.first_run and strand.pending is None and fresh:
            strand.lazy_open = self._worker.open_lazily(
                Boundary(self.execution_id, self._worker.worker_id, claim_epoch, open_step=step_id)
            )
            return Attempt(1, None)
        outcome = self._commit(
            Boundary(self.execution_id, self._worker.worker_id, claim_epoch, finish=strand.take(), open_step=step_id),
            strand,
        )
        if not outcome.held:
            self._lost(f"step {step_id!r} not started")
        self._check_raced(outcome, strand)
        if outcome.opened is None:
            self._worker.log.error(
                "event=attempt_not_opened execution_id=%s step=%s (replaying after the lease lapses)",
                self.execution_id,
                step_id,
            )
            raise Unwind("engine_error")
        return outcome.opened

    def _flush(self, strand: Strand | None = None) -> Checkpoint | None:
        """Write the strand's pending end now (by default the workflow's own strand: before a
        write of another kind); the checkpoint that stood first, when ours lost the race."""
        strand = self._strand if strand is None else strand
        pending = strand.take()
        if pending is None:
            return None
        outcome = self._commit(
            Boundary(self.execution_id, self._worker.worker_id, self._held.claim.claim_epoch, finish=pending), strand
        )
        if not outcome.held:
            self._lost(f"checkpoint of step {pending.step_id!r} refused")
        self._check_raced(outcome, strand)
        if outcome.existing is None:
            return None  # ours stands (the caller has it), or it was no checkpoint
        output, error, attempts = outcome.existing
        return Checkpoint(output, error, attempts, pending.position)

    def _commit_last(self, done: Boundary) -> Outcome:
        """Write the execution's completion ``done`` with the last step's end, in one boundary."""
        return self._commit(dataclasses.replace(done, finish=self._strand.take()), self._strand, engine_errors=True)

    def _check_raced(self, outcome: Outcome, strand: Strand) -> None:
        # Another checkpoint of the same step stood first, though we held the claim: the value
        # the workflow went on with is not the recorded one. Replay from the record instead.
        # (A step written at once returns the stored value instead: nothing went on with ours.)
        if outcome.existing is not None and strand.defer:
            self._worker.log.error(
                "event=checkpoint_raced execution_id=%s (replaying from the stored checkpoint after the lease lapses)",
                self.execution_id,
            )
            raise Unwind("engine_error")

    def _commit(self, b: Boundary, strand: Strand, *, engine_errors: bool = False) -> Outcome:
        """Write a boundary with the worker's next group commit (see ``_write`` for failures)."""
        after = None
        if b.finish is not None and b.finish.attempt.started_at is None:
            after, strand.lazy_open = strand.lazy_open, None
        try:
            return self._worker.commit(b, after=after)
        except psycopg.Error as exc:
            if engine_errors:
                raise
            raise self._engine_write_failed(exc) from exc

    def _result(self, step_id: str, stored: Checkpoint) -> Any:
        if stored.error is not None:
            raise StepFailed(step_id, stored.attempts, stored.error.split("\n", 1)[0])
        return stored.output

    def _park(self, step_id: str, kind: str, after: timedelta | None, details: Any, position: int) -> None:
        self._boundary()
        parked = self._write(
            lambda c: waits.park(
                c, self._worker.schema, self._operation_at(step_id, position), kind=kind, after=after, details=details
            )
        )
        if not parked:
            self._lost(f"{kind} {step_id!r} not parked")
        raise Unwind("parked")


class Strand:
    """The step-boundary state of one line of steps that run one after another: the end of
    its last step not written yet (``pending``) and the handle of a first attempt's unwritten
    start. A sync workflow has one (``defer``: the end waits for the next boundary); each step
    of an async workflow has its own, written at once, so steps running at once never share
    one."""

    __slots__ = ("defer", "lazy_open", "pending")

    def __init__(self, *, defer: bool) -> None:
        self.defer = defer
        self.pending: Finish | None = None
        self.lazy_open: Any = None

    def take(self) -> Finish | None:
        """The step end not written yet (handed to whoever writes next), or None."""
        pending, self.pending = self.pending, None
        return pending


class AttemptTimedOut(Exception):
    """A step attempt outlived its timeout."""
