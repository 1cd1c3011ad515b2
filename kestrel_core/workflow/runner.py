"""Running one claimed execution to its end: replay its checkpoints, call the workflow, and
record the outcome (completion fenced by the claim), or let it unwind (parked, lost, shutdown).

The worker (worker.py) owns the threads and the claim; this module only needs the few
services named by ``RunnerHost``.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import AbstractContextManager
from typing import Any, Protocol

import psycopg

from kestrel_core.base import tracing
from kestrel_core.base.describe import exception_head, storable
from kestrel_core.base.errors import NonDeterministicChange, NotSerializable
from kestrel_core.base.masking import first_line
from kestrel_core.base.serialization import to_json
from kestrel_core.db.outage import is_outage
from kestrel_core.dispatch import claim as claim_mod
from kestrel_core.dispatch import deadlines, enqueue, lease
from kestrel_core.durable import checkpoint
from kestrel_core.durable.boundary import Boundary, Completion
from kestrel_core.durable.checkpoint import Checkpoint
from kestrel_core.workflow import offload
from kestrel_core.workflow.async_context import AsyncWorkflowContext
from kestrel_core.workflow.boxing import being_cancelled, boxed, unbox
from kestrel_core.workflow.context import WorkflowContext, describe_exception
from kestrel_core.workflow.contracts import Claimed, EngineSettings, Registry, Unwind, WorkerRuntime


class RunnerHost(WorkerRuntime, Protocol):
    """What running an execution needs of the worker, beyond a context's needs."""

    registry: Registry
    settings: EngineSettings

    def count(self, key: str) -> None: ...


def prepare(worker: RunnerHost, held: Claimed) -> WorkflowContext:
    """Read a large input left out of the claim, stamp the execution's deadline (if its
    workflow has one) and load its checkpoints; Unwind when the claim ended meanwhile (or its
    deadline passed): nothing may run under it."""
    item = held.claim
    if item.input_later:  # a large input, not in the claim's result (statements.py, claimed_input)
        loaded = worker.db(lambda c: claim_mod.load_input(c, worker.schema, item, worker.worker_id))
        if loaded is None:
            worker.refused(item.execution_id, "input read (claim ended)")
            raise Unwind("lost")
        held.claim = item = loaded
    timeout = worker.registry.workflows[item.workflow_name].timeout
    if timeout is not None:
        current = worker.db(
            lambda c: deadlines.stamp(
                c,
                worker.schema,
                execution_id=item.execution_id,
                worker_id=worker.worker_id,
                claim_epoch=item.claim_epoch,
                timeout=timeout,
            )
        )
        if not current:
            worker.refused(item.execution_id, "deadline stamp (claim ended or deadline passed)")
            raise Unwind("lost")
        held.fenced_at = float("-inf")  # a deadline sweep may end it any time: no fresh claim
    stored: dict[str, Checkpoint] | None = {}
    if not item.first_run:
        stored = worker.db(
            lambda c: checkpoint.load(
                c, worker.schema, item.execution_id, worker_id=worker.worker_id, claim_epoch=item.claim_epoch
            )
        )
    if stored is None:
        worker.refused(item.execution_id, "checkpoint load")
        raise Unwind("lost")
    return WorkflowContext(worker, held, stored)


def execute(worker: RunnerHost, held: Claimed) -> None:
    """Run a synchronous workflow on this (runner) thread."""
    started = time.monotonic()
    ctx: WorkflowContext | None = None
    try:
        ctx = prepare(worker, held)
        fn = worker.registry.workflows[held.claim.workflow_name].fn
        try:
            with traced(held, trace_parent(worker, held) if tracing.state.on else None):
                result = fn(ctx, held.claim.input)
        except Unwind:
            raise
        except BaseException as exc:  # whatever the workflow raises ends it as error
            _unusual(worker, held, exc)
            finish(worker, held, ctx, error=exc, started=started)
        else:
            finish(worker, held, ctx, result=result, started=started)
    except Unwind as unwind:
        if unwind.error is not None:
            finish(worker, held, ctx, error=unwind.error, started=started)
        else:
            unwound(worker, held, ctx, unwind)
    except psycopg.Error as exc:
        gave_up(worker, held, exc)


async def execute_async(worker: RunnerHost, held: Claimed) -> None:
    """Run an ``async def`` workflow on the worker's event loop (database work in threads)."""
    started = time.monotonic()
    ctx: WorkflowContext | None = None
    try:
        ctx = await offload.to_thread(prepare, worker, held)
        fn = worker.registry.workflows[held.claim.workflow_name].fn
        try:
            parent = await offload.to_thread(trace_parent, worker, held) if tracing.state.on else None
            with traced(held, parent):
                # In a task of its own, boxed: whatever it raises comes back here (async_context.boxed)
                result = unbox(await asyncio.ensure_future(boxed(fn(AsyncWorkflowContext(ctx), held.claim.input))))
        except Unwind:
            raise
        except BaseException as exc:  # whatever the workflow raises ends it as error
            if isinstance(exc, asyncio.CancelledError) and being_cancelled():
                raise  # this task itself was cancelled: not the workflow's doing
            _unusual(worker, held, exc)
            await offload.to_thread(finish, worker, held, ctx, error=exc, started=started)
        else:
            await offload.to_thread(finish, worker, held, ctx, result=result, started=started)
    except Unwind as unwind:
        if unwind.error is not None:
            await offload.to_thread(finish, worker, held, ctx, error=unwind.error, started=started)
        else:
            await offload.to_thread(unwound, worker, held, ctx, unwind)
    except psycopg.Error as exc:
        gave_up(worker, held, exc)
    except Exception:
        worker.log.exception(
            "event=execution_crashed worker=%s execution_id=%s (its lease will lapse and it will be retried)",
            worker.worker_id,
            held.claim.execution_id,
        )


def trace_parent(worker: RunnerHost, held: Claimed) -> str | None:
    """The trace context the execution's enqueue recorded (read only while tracing is on)."""
    return worker.db(lambda c: enqueue.trace_context(c, worker.schema, held.claim.execution_id))


def traced(held: Claimed, parent: str | None) -> AbstractContextManager[None]:
    """The span of this run of the execution (tracing on), a child of its enqueue's."""
    item = held.claim
    return tracing.execution(item.workflow_name, item.execution_id, item.claim_epoch, parent, benign=Unwind)


def _unusual(worker: RunnerHost, held: Claimed, exc: BaseException) -> None:
    """Log a workflow body that raised a BaseException (SystemExit, KeyboardInterrupt, a
    CancelledError of its own...): it ends the execution as error like any exception, and
    neither the runner thread nor the worker's event loop stops for it."""
    if not isinstance(exc, Exception):
        worker.log.warning(
            "event=workflow_raised_base_exception worker=%s execution_id=%s error=%r (ends it as error)",
            worker.worker_id,
            held.claim.execution_id,
            first_line(exception_head(exc)),
        )


def finish(
    worker: RunnerHost,
    held: Claimed,
    ctx: WorkflowContext | None,
    *,
    started: float,
    result: Any = None,
    error: BaseException | None = None,
) -> None:
    """Record the execution's outcome, fenced by the claim, with the last step's checkpoint in
    the same statement."""
    item = held.claim
    output = None
    if error is None:
        try:
            output = to_json(result, f"the output of workflow {item.workflow_name!r} (execution {item.execution_id})")
        except NotSerializable as exc:
            error = exc
    status = "success" if error is None else "error"
    plain = isinstance(error, (NotSerializable, NonDeterministicChange))
    text = None if error is None else (storable(str(error)) if plain else describe_exception(error))
    done = Boundary(item.execution_id, worker.worker_id, item.claim_epoch, complete=Completion(status, output, text))
    outcome = ctx._commit_last(done) if ctx is not None else worker.commit(done)
    if not outcome.completed:
        worker.refused(item.execution_id, f"completion ({status})")
        let_go(worker, held)
        return
    worker.count("succeeded" if status == "success" else "failed")
    worker.log.info(
        "event=finished worker=%s execution_id=%s workflow=%s status=%s duration_s=%.3f%s",
        worker.worker_id,
        item.execution_id,
        item.workflow_name,
        status,
        time.monotonic() - started,
        "" if text is None else f" error={first_line(text)!r}",
    )


def unwound(worker: RunnerHost, held: Claimed, ctx: WorkflowContext | None, unwind: Unwind) -> None:
    """The workflow stopped without finishing: parked, lost its claim, or shutting down. On a
    shutdown the last step's end is still written, so the next worker does not run it again."""
    if unwind.reason == "shutdown" and ctx is not None:
        try:
            ctx._flush()
        except Unwind:
            pass  # refused or unreachable: that step runs again on the next claim
    key = {"parked": "parked", "lost": "lost"}.get(unwind.reason)
    if key:
        worker.count(key)
    if unwind.reason == "lost":
        let_go(worker, held)
    worker.log.info(
        "event=%s worker=%s execution_id=%s workflow=%s",
        unwind.reason,
        worker.worker_id,
        held.claim.execution_id,
        held.claim.workflow_name,
    )


def let_go(worker: RunnerHost, held: Claimed) -> None:
    """This claim stops running the execution: if an operator paused it, say so (its lease
    cleared), so that a resume has it claimed afresh rather than handed back to this claim."""
    item = held.claim
    try:
        worker.db(lambda c: lease.let_go(c, worker.schema, worker.worker_id, item.execution_id, item.claim_epoch))
    except psycopg.Error as exc:  # the lease it kept lapses: a resume then has it claimed afresh
        worker.log.warning(
            "event=let_go_failed worker=%s execution_id=%s error=%r",
            worker.worker_id,
            item.execution_id,
            first_line(exc, worker.settings.dsn),
        )


def gave_up(worker: RunnerHost, held: Claimed, exc: Exception) -> None:
    """An engine statement failed (the database stayed away past the retry window, or refused
    it: a statement timeout, say): the lease lapses, and a worker resumes from the checkpoints."""
    event = "db_unreachable" if is_outage(exc) else "engine_write_failed"
    worker.log.error(
        "event=%s worker=%s execution_id=%s error=%r (abandoned; its lease will lapse "
        "and a worker resumes it from its checkpoints)",
        event,
        worker.worker_id,
        held.claim.execution_id,
        first_line(exc, worker.settings.dsn),
    )
