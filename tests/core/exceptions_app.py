"""The app of tests/core/test_step_exceptions.py, run in a worker subprocess ($KESTREL_DSN).

Steps and workflow bodies that raise each class of exception, BaseException included (the
classes in ``RAISED``), from every kind of step (a plain function or a coroutine, with or
without a timeout, in a sync or an async workflow) and at step position 1 or 2. Each attempt
of a raising step is counted in public.ledger. ``ok`` and ``ok_async`` run afterwards: the
worker's threads and event loop must still be there to run them.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import psycopg

from kestrel_core import Kestrel

app = Kestrel()


class Custom(BaseException):
    """A BaseException of the application's own."""


RAISED: dict[str, Any] = {
    "SystemExit": lambda: SystemExit(3),
    "KeyboardInterrupt": KeyboardInterrupt,
    "GeneratorExit": GeneratorExit,
    "CancelledError": lambda: asyncio.CancelledError("inner task cancelled"),
    "Custom": lambda: Custom("custom"),
    "ValueError": lambda: ValueError("plain"),
}
SYNC_KINDS = ("fn", "fn-timeout", "coro", "coro-timeout")  # steps of a sync workflow
ASYNC_KINDS = ("fn", "coro", "coro-timeout")  # steps of an async workflow


def _record(execution_id: int, step_id: str) -> None:
    with psycopg.connect(app.dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO public.ledger (execution_id, step_id, worker) VALUES (%s, %s, %s)",
            (execution_id, step_id, str(os.getpid())),
        )


def raising(execution_id: int, name: str) -> None:
    _record(execution_id, "boom")
    raise RAISED[name]()


async def raising_async(execution_id: int, name: str) -> None:
    await asyncio.to_thread(_record, execution_id, "boom")
    raise RAISED[name]()


def _step_args(ctx: Any, case: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    fn = raising_async if case["kind"].startswith("coro") else raising
    options: dict[str, Any] = {"retries": 1, "backoff": 0.01}
    if case["kind"].endswith("timeout"):
        options["timeout"] = 30
    return fn, options


@app.workflow("step-sync")
def step_sync(ctx, case):
    if case["at"] == 2:
        ctx.step("before", lambda: "fine")
    fn, options = _step_args(ctx, case)
    return ctx.step("boom", fn, ctx.execution_id, case["name"], **options)


@app.workflow("step-async")
async def step_async(ctx, case):
    if case["at"] == 2:
        await ctx.step("before", lambda: "fine")
    fn, options = _step_args(ctx, case)
    return await ctx.step("boom", fn, ctx.execution_id, case["name"], **options)


@app.workflow("body-sync")
def body_sync(ctx, case):
    if case["at"] == 2:
        ctx.step("before", lambda: "fine")
    raise RAISED[case["name"]]()


@app.workflow("body-async")
async def body_async(ctx, case):
    if case["at"] == 2:
        await ctx.step("before", lambda: "fine")
    raise RAISED[case["name"]]()


@app.workflow("ok")
def ok(ctx, n):
    return ctx.step("one", lambda: n)


@app.workflow("ok-async")
async def ok_async(ctx, n):
    async def one() -> int:
        return n

    return await ctx.step("one", one)
