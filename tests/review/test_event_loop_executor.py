"""Review of "Every exception a step or a workflow raises ends in an outcome ... None stops the
worker or strands the execution ... the async workflows' event loop runs on after a task raised
SystemExit, and after a workflow or a step stopped it" (docs/guarantees.md).

Reproduction: an async workflow awaits ``asyncio.get_running_loop().shutdown_default_executor()``
(as ``loop.stop()``, one call on the shared loop). Every engine write of every async workflow of
that worker goes through ``asyncio.to_thread``, which now raises RuntimeError('Executor shutdown
has been called'): the offender and every later async execution crash (``execution_crashed``),
their leases lapse, they are claimed again by the same worker and crash again, forever."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from kestrel_core import Kestrel
from tests.waiting import wait_for


def test_an_async_workflow_shutting_down_the_loops_executor_strands_no_execution(app: Kestrel, start_worker) -> None:
    async def quick() -> str:
        return "done"

    @app.workflow("bystander")
    async def bystander(ctx: Any, _input: Any) -> str:
        return await ctx.step("one", quick)

    @app.workflow("offender")
    async def offender(ctx: Any, _input: Any) -> str:
        await asyncio.get_running_loop().shutdown_default_executor()
        return "after"

    start_worker(app, lease=timedelta(seconds=1), concurrency=4)
    bad = app.enqueue("offender", None)
    wait_for(lambda: app.get(bad).done, timeout=15, what="the offender to end in an outcome")
    later = app.enqueue("bystander", None)
    wait_for(lambda: app.get(later).status == "success", timeout=15, what="a later async execution to finish")
