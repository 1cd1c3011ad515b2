"""Outcomes carried across asyncio's edges as values, so that no exception class is lost there.

asyncio delivers an exception that ends a future or a task to the top frame of the task
awaiting it, closing every coroutine in between (a GeneratorExit cannot be caught on the way:
the coroutine that catches it and awaits again is a RuntimeError), and re-raises a task's
SystemExit or KeyboardInterrupt out of the event loop (ending ``run_forever`` for every task
on it). A step or a workflow body run as the top of a task of its own through ``boxed`` comes
back as a value instead, and ``unbox`` raises what it raised in the caller's own frame, where
the engine turns it into the documented outcome (context.py, runner.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

__all__ = ["being_cancelled", "boxed", "call_boxed", "unbox"]


def being_cancelled() -> bool:
    """Whether the running task was asked to stop (a CancelledError it raises is then its own
    cancellation, not one that came out of a step or a workflow)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def boxed(awaitable: Any) -> tuple[bool, Any]:
    """(True, its result) or (False, what it raised), BaseException included (run it as the
    top of a task: see the module's docstring). Only this task's own cancellation goes through."""
    try:
        return True, await awaitable
    except BaseException as exc:
        if isinstance(exc, asyncio.CancelledError) and being_cancelled():
            raise
        return False, exc


def call_boxed(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[bool, Any]:
    """``boxed`` for a plain function (run in a thread)."""
    try:
        return True, fn(*args, **kwargs)
    except BaseException as exc:
        return False, exc


def unbox(outcome: tuple[bool, Any]) -> Any:
    """The result ``boxed`` returned, or what it caught, raised here."""
    ok, value = outcome
    if not ok:
        raise value
    return value
