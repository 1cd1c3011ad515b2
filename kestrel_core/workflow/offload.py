"""The engine's blocking work for async workflows, on the worker's own threads.

Workflow code runs on the worker's shared event loop and can reach it
(``asyncio.get_running_loop()``). Its default executor is not the engine's: a workflow that
awaited ``loop.shutdown_default_executor()`` (or replaced it) broke every engine write of every
async execution of the worker, which went through ``asyncio.to_thread``, and they were replayed
forever. The engine's writes, and its plain-function steps, go through the
executor the worker registered for its loop (``use``); ``repair`` gives the loop back a working
default executor and task factory for the workflows' own ``asyncio.to_thread`` and tasks.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import logging
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_executors: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, concurrent.futures.Executor] = (
    weakref.WeakKeyDictionary()
)


def use(loop: asyncio.AbstractEventLoop, executor: concurrent.futures.Executor) -> None:
    """Run the engine's blocking work for ``loop`` in ``executor`` (the worker's own)."""
    _executors[loop] = executor


async def to_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``asyncio.to_thread``, in the executor registered for the running loop (else its default)."""
    loop = asyncio.get_running_loop()
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    return await loop.run_in_executor(_executors.get(loop), call)


def repair(loop: asyncio.AbstractEventLoop, log: logging.Logger, worker_id: str) -> None:
    """Undo what a workflow did to the shared loop that would break the others: a default
    executor shut down (every later ``asyncio.to_thread`` of workflow code would raise), a task
    factory set (the engine's tasks, and every workflow's, would be made by it). Cheap: run
    before and after each async execution. The flag is asyncio's own (CPython 3.9+)."""
    if getattr(loop, "_executor_shutdown_called", False):
        log.warning("event=loop_repaired worker=%s what='a workflow shut down the default executor'", worker_id)
        loop._executor_shutdown_called = False  # type: ignore[attr-defined]
        loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(thread_name_prefix="kestrel-default"))
    if loop.get_task_factory() is not None:
        log.warning("event=loop_repaired worker=%s what='a workflow set a task factory'", worker_id)
        loop.set_task_factory(None)
