"""An async workflow or step that stops or closes the worker's event loop (issue 43 review).

Async workflows share one event loop per worker. ``asyncio.get_running_loop().stop()`` in a
workflow's code or a coroutine step made ``run_forever`` return, and the loop's thread ended:
every other async execution of the worker hung, running and heartbeated, forever. Now the
worker runs the loop on unless it is stopping itself (``event=loop_resumed``): the stop stops
nothing, the execution goes on to its outcome. ``loop.close()`` raises asyncio's RuntimeError
into its caller (the loop is running), which ends the workflow as ``error`` (or fails the
step: ``StepFailed``), like any exception.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from kestrel_core import Kestrel
from tests.waiting import wait_for


@pytest.mark.parametrize(("how", "where"), [("stop", "workflow"), ("stop", "step"), ("close", "step")])
def test_stopping_the_workers_event_loop_hangs_no_other_execution(
    app: Kestrel, start_worker, where: str, how: str
) -> None:
    async def slow_step() -> str:
        await asyncio.sleep(0.3)
        return "slept"

    @app.workflow("bystander")
    async def bystander(ctx: Any, _input: Any) -> str:
        first = await ctx.step("one", slow_step)
        second = await ctx.step("two", slow_step)
        return first + second

    def hostile() -> None:
        loop = asyncio.get_running_loop()
        loop.stop() if how == "stop" else loop.close()

    async def hostile_step() -> str:
        hostile()
        await asyncio.sleep(0.1)
        return "after"

    @app.workflow("offender")
    async def offender(ctx: Any, _input: Any) -> str:
        if where == "workflow":
            hostile()
            await asyncio.sleep(0.1)
            return "after"
        return await ctx.step("hostile", hostile_step, retries=0)

    others = app.enqueue_many("bystander", [1, 2, 3])
    start_worker(app, lease=timedelta(seconds=2), concurrency=6)
    wait_for(lambda: all(app.get(i).status == "running" for i in others), timeout=15, what="the bystanders running")
    bad = app.enqueue("offender", None)
    wait_for(lambda: app.get(bad).done, timeout=15, what="the offender to end")
    wait_for(lambda: all(app.get(i).status == "success" for i in others), timeout=15, what="the bystanders to finish")
    assert [app.get(i).output for i in others] == ["sleptslept"] * 3
    ended = app.get(bad)
    if how == "stop":
        assert (ended.status, ended.output) == ("success", "after")
    else:
        assert ended.status == "error"
        assert "RuntimeError" in (ended.error or "")
    # The loop still runs what comes next.
    late = app.enqueue("bystander", 4)
    wait_for(lambda: app.get(late).status == "success", timeout=15, what="a later async execution to finish")


@pytest.mark.parametrize("sabotage", ["shutdown_default_executor", "set_task_factory"])
def test_a_workflow_breaking_the_loops_executor_or_task_factory_strands_no_execution(
    app: Kestrel, start_worker, sabotage: str
) -> None:
    """``await loop.shutdown_default_executor()`` in a workflow made every engine write of every
    async execution of the worker raise (they went through ``asyncio.to_thread``): each was
    replayed every lease, forever (issue 43 review). The engine now uses its own executor
    (offload.py), and repairs the loop after the offender: the workflows after it (their own
    ``asyncio.to_thread`` too) run as before. The offender ends in an outcome: success (its
    executor shut down is not the engine's), or error when its own step's task could not be made
    by the factory it set (StepFailed)."""

    async def quick() -> str:
        return "done"

    @app.workflow("bystander")
    async def bystander(ctx: Any, _input: Any) -> str:
        return await ctx.step("one", quick) + await asyncio.to_thread(lambda: "!")

    @app.workflow("offender")
    async def offender(ctx: Any, _input: Any) -> str:
        loop = asyncio.get_running_loop()
        if sabotage == "shutdown_default_executor":
            await loop.shutdown_default_executor()
        else:
            loop.set_task_factory(lambda _loop, coro, **_kw: 1 / 0)
        return await ctx.step("after", quick)

    start_worker(app, lease=timedelta(seconds=1), concurrency=4)
    bad = app.enqueue("offender", None)
    wait_for(lambda: app.get(bad).done, timeout=10, what="the offender to end in an outcome")
    assert app.get(bad).status == ("success" if sabotage == "shutdown_default_executor" else "error")
    later = app.enqueue("bystander", None)
    wait_for(lambda: app.get(later).done, timeout=10, what="a later async execution to finish")
    assert (app.get(later).status, app.get(later).output) == ("success", "done!")
