"""Async workflows that gather steps, against a real Postgres and a real worker (issue 17):
each gathered step runs once and keeps its checkpoint, large outputs and a replay included,
and coroutine steps hold no thread while they await."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import psycopg

from kestrel_core import Kestrel
from tests.waiting import wait_for

EXECUTIONS = 10
GATHERED = 8
KEYS = 20_000


def record(ledger: psycopg.Connection, eid: int, step: str) -> None:
    ledger.execute("INSERT INTO public.ledger (execution_id, step_id) VALUES (%s, %s)", (eid, step))


def test_gathered_steps_with_large_outputs_run_once_across_a_replay(app: Kestrel, ledger, start_worker) -> None:
    def big(eid: int, step: str) -> dict[str, int]:
        record(ledger, eid, step)
        return {f"{step}-{k}": k for k in range(KEYS)}

    async def big_async(eid: int, step: str) -> dict[str, int]:
        await asyncio.sleep(0)
        record(ledger, eid, step)
        return {f"{step}-{k}": k for k in range(KEYS)}

    @app.workflow("fan-out")
    async def fan_out(ctx, _input):
        eid = ctx.execution_id
        steps = [ctx.step(f"s{i}", big if i % 2 else big_async, eid, f"s{i}") for i in range(GATHERED)]
        sizes = [len(r) for r in await asyncio.gather(*steps)]
        await ctx.sleep("nap", timedelta(milliseconds=100))  # parks: the rest is a replay
        return sizes

    start_worker(app, concurrency=EXECUTIONS, lease=timedelta(seconds=30))
    ids = [app.enqueue("fan-out") for _ in range(EXECUTIONS)]
    wait_for(lambda: all(app.get(i).done for i in ids), timeout=120, what="every fan-out to finish")
    assert [app.get(i).status for i in ids] == ["success"] * EXECUTIONS
    assert all(app.get(i).output == [KEYS] * GATHERED for i in ids)
    twice = ledger.execute(
        "SELECT execution_id, step_id, count(*) FROM public.ledger GROUP BY 1, 2 HAVING count(*) <> 1 ORDER BY 1, 2"
    ).fetchall()
    assert twice == []
    assert ledger.execute("SELECT count(*) FROM public.ledger").fetchone() == (EXECUTIONS * GATHERED,)
    checkpoints = ledger.execute("SELECT count(*) FROM kestrel.operation_outputs WHERE step_id <> 'nap'").fetchone()
    assert checkpoints == (EXECUTIONS * GATHERED,)
    # replayed once, after the sleep: two claims each
    assert ledger.execute("SELECT array_agg(DISTINCT claims) FROM kestrel.workflow_executions").fetchone() == ([2],)


def test_more_gathered_coroutine_steps_than_threads_each_using_to_thread_complete(
    app: Kestrel, ledger, start_worker
) -> None:
    async def uses_a_thread(eid: int, step: str) -> str:
        await asyncio.to_thread(record, ledger, eid, step)
        return step

    @app.workflow("many")
    async def many(ctx, _input):
        return list(
            await asyncio.gather(
                *(ctx.step(f"c{i}", uses_a_thread, ctx.execution_id, f"c{i}") for i in range(gathered))
            )
        )

    worker = start_worker(app, concurrency=1)
    gathered = worker.async_threads + 1
    eid = app.enqueue("many")
    done = wait_for(
        lambda: (e := app.get(eid)).done and e, timeout=30, what=f"{gathered} gathered coroutine steps to finish"
    )
    assert done.status == "success"
    assert done.output == [f"c{i}" for i in range(gathered)]
    assert ledger.execute("SELECT count(*) FROM public.ledger").fetchone() == (gathered,)
