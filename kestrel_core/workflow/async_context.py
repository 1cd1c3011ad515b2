"""The ``ctx`` of an ``async def`` workflow: the operations of context.py, awaitable.

Steps run on the worker's event loop: a coroutine step is awaited there (it holds no thread
while it awaits), a plain function runs in a thread. Each step owns its boundary state, so
steps gathered with ``asyncio.gather`` write their own ends, each at once; the engine's writes,
which block, go to threads.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from kestrel_core.base import tracing
from kestrel_core.durable.boundary import Finish
from kestrel_core.workflow import offload
from kestrel_core.workflow.boxing import being_cancelled, boxed, call_boxed, unbox
from kestrel_core.workflow.context import AttemptTimedOut, Decision, Strand, WorkflowContext
from kestrel_core.workflow.contracts import Flag, Unwind
from kestrel_core.workflow.flow_context import AsyncFlowOperations, ExecutionFacts

__all__ = ["AsyncWorkflowContext"]


class AsyncWorkflowContext(AsyncFlowOperations, ExecutionFacts):
    """The ``ctx`` of an ``async def`` workflow: the same operations, awaitable.

    Database work and blocking steps run in threads; coroutine steps run on the worker's loop.
    Each operation takes its position before its first ``await``, so operations started
    together (``asyncio.gather``) take the same positions on every replay.
    """

    _sync: WorkflowContext  # the sync ctx whose internals every operation uses

    def __init__(self, sync: WorkflowContext) -> None:
        self._sync = sync
        # what ExecutionFacts reads: the sync ctx's worker and hold
        self._worker = sync._worker
        self._held = sync._held

    async def step(
        self,
        step_id: str,
        fn: Callable[..., Any],
        *args: Any,
        retries: int = 0,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        timeout: timedelta | float | None = None,
        **kwargs: Any,
    ) -> Any:
        """See WorkflowContext.step; ``fn`` may be a coroutine function.

        The step runs here, on the event loop: a coroutine step is awaited on it, a plain
        function runs in a thread of its own. Each step has its own boundary state (steps
        gathered with ``asyncio.gather`` write their own ends, each at once); only the writes,
        which block, go to threads."""
        sync = self._sync
        position = sync._use(step_id)
        stored = sync._stored(step_id)
        if stored is not None:
            return sync._result(step_id, stored)
        if retries < 0:
            raise ValueError(f"retries must be 0 or more, got {retries!r}")
        limit = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        strand = Strand(defer=False)
        total = retries + 1
        number = 0
        while True:
            number += 1
            sync._boundary()
            attempt = await offload.to_thread(sync._open, step_id, position, strand)
            try:
                work = _call_async(fn, args, kwargs, limit)
                if tracing.state.on:  # a span per attempt; off, one attribute test
                    work = tracing.in_step_async(step_id, attempt.number, work)
                result = await work
            except Unwind:
                raise
            except BaseException as exc:  # every class a step raises is its failure (_failed)
                if isinstance(exc, asyncio.CancelledError) and being_cancelled():
                    raise  # this task itself was cancelled: not the step's doing
                error = sync._failed(step_id, number, limit, exc)
            else:  # serialised in the thread that writes it: a large output never holds the loop
                return sync._result(
                    step_id, await offload.to_thread(sync._settle, step_id, attempt, result, position, strand)
                )
            if number == total:
                return sync._result(
                    step_id, await offload.to_thread(sync._checkpoint, step_id, attempt, None, error, position, strand)
                )
            strand.pending = Finish(step_id, attempt, error=error, keep=False)
            await offload.to_thread(sync._flush, strand)
            delay = sync._retry_delay(step_id, attempt, number, backoff, max_backoff)
            if await _set_within(sync._worker.draining, delay):
                raise Unwind("shutdown")

    async def sleep(self, step_id: str, duration: timedelta | float) -> None:
        """See WorkflowContext.sleep."""
        await offload.to_thread(self._sync._sleep, self._sync._use(step_id), step_id, duration)

    async def wait_for_approval(
        self, step_id: str, *, timeout: timedelta | float | None = None, details: Any = None
    ) -> Decision:
        """See WorkflowContext.wait_for_approval."""
        return await offload.to_thread(self._sync._approval, self._sync._use(step_id), step_id, timeout, details)


async def _call_async(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], timeout: float | None
) -> Any:
    """One attempt of an async workflow's step: a coroutine function on the loop, anything
    else in a thread (an awaitable it returns is then awaited on the loop), in a task of its
    own whose outcome comes back boxed (``boxed``); what it raised is raised here."""

    async def attempt() -> Any:
        if inspect.iscoroutinefunction(fn):
            result = await fn(*args, **kwargs)
        else:
            result = unbox(await offload.to_thread(call_boxed, fn, args, kwargs))
        if inspect.isawaitable(result):
            result = await result
        return result

    work = boxed(attempt())
    try:
        outcome = await (asyncio.ensure_future(work) if timeout is None else asyncio.wait_for(work, timeout))
    except TimeoutError:
        raise AttemptTimedOut() from None
    return unbox(outcome)


async def _set_within(event: Flag, delay: float) -> bool:
    """Whether ``event`` is set within ``delay`` seconds, waiting on the loop (no thread)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + delay
    while not event.is_set():
        left = deadline - loop.time()
        if left <= 0:
            return False
        await asyncio.sleep(min(left, 0.1))
    return True
