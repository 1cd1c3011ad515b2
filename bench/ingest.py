"""Ingestion: single enqueue calls, as webhook and alert handlers make them, against a plain
one-row INSERT of the same row on the same server, with workers running.

One fresh database; W worker processes (bench.worker) run throughout and LISTEN: every
wake-up reaches their listener connections. The rows are of a workflow they do not run
(``INGEST``), so they do not claim them: the measure is ingestion, not execution (the
throughput benchmark's "fed by single enqueues" row is the end-to-end figure). A first
version enqueued the bench's own workflow with a one-hour delay: then every wake-up made
each worker's claim walk the whole delayed backlog, which measured the claim, not the enqueue.

Each source runs for ``seconds``, the sources alternated ``rounds`` times; a ratio is the
median of the rounds' ratios, each of two sources measured one after the other in this run: on
a shared machine the load drifts over a run, and a ratio of means taken over seconds apart
swung from 0.6x to 1.0x between two runs of the same code.
- plain INSERT: each thread (or asyncio task) its own autocommit connection, one
  ``INSERT ... VALUES`` of the same row into a copy of ``workflow_executions`` (same columns,
  defaults and indexes; no trigger, no NOTIFY): what Postgres does for one row per commit;
- ``Kestrel.enqueue`` from the threads of one process (group-committed);
- ``AsyncKestrel.enqueue`` from asyncio tasks of one loop (group-committed);
- ``Kestrel.enqueue(conn=own connection)`` per thread: one statement, one commit and one
  NOTIFY per call, the way every enqueue was written before group commit.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from kestrel_core import AsyncKestrel, Kestrel
from kestrel_core.db import render

from .databases import fresh_database
from .procs import kestrel_worker, stop_all, wait_registered

SCHEMA = "kestrel"
INGEST = "ingest"  # no bench worker registers it
PLAIN_TABLE = "CREATE TABLE public.plain_insert (LIKE {schema}.workflow_executions INCLUDING ALL)"
PLAIN_INSERT = "INSERT INTO public.plain_insert (workflow_name, input) VALUES (%s, %s)"


def _threads(count: int, seconds: float, setup: Callable[[int], Any], call: Callable[[Any, int], None]) -> float:
    """Calls per second of ``count`` threads each calling ``call(state, i)`` for ``seconds``
    (``state = setup(thread)`` made before the clock)."""
    states = [setup(t) for t in range(count)]
    done = [0] * count
    stop = threading.Event()
    start = threading.Barrier(count + 1)

    def run(t: int) -> None:
        start.wait()
        i = 0
        while not stop.is_set():
            call(states[t], i)
            i += 1
        done[t] = i

    threads = [threading.Thread(target=run, args=(t,)) for t in range(count)]
    for th in threads:
        th.start()
    start.wait()
    t0 = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for th in threads:
        th.join()
    elapsed = time.perf_counter() - t0
    for state in states:
        if isinstance(state, psycopg.Connection):
            state.close()
    return sum(done) / elapsed


async def _tasks(count: int, seconds: float, call: Callable[[int, int], Any]) -> float:
    """Calls per second of ``count`` asyncio tasks each awaiting ``call(task, i)`` for ``seconds``."""
    done = [0] * count
    stop = asyncio.Event()

    async def run(t: int) -> None:
        i = 0
        while not stop.is_set():
            await call(t, i)
            i += 1
        done[t] = i

    tasks = [asyncio.create_task(run(t)) for t in range(count)]
    t0 = time.perf_counter()
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.gather(*tasks)
    return sum(done) / (time.perf_counter() - t0)


async def _async_rates(dsn: str, tasks: int, seconds: float, payload: Any) -> tuple[float, float, dict[str, int]]:
    """(plain INSERT from ``tasks`` tasks, AsyncKestrel.enqueue from as many), calls/s."""
    conns = [await psycopg.AsyncConnection.connect(dsn, autocommit=True) for _ in range(tasks)]
    try:

        async def plain(t: int, i: int) -> None:
            await conns[t].execute(PLAIN_INSERT, (INGEST, Jsonb(payload)))

        plain_rate = await _tasks(tasks, seconds, plain)
    finally:
        for c in conns:
            await c.close()
    async with AsyncKestrel(dsn) as client:
        await client.enqueue(INGEST, payload)  # open the pool before the clock
        before = dict(client._batcher.stats)

        async def enqueue(t: int, i: int) -> None:
            await client.enqueue(INGEST, payload)

        rate = await _tasks(tasks, seconds, enqueue)
        stats = {k: client._batcher.stats[k] - before[k] for k in ("batches", "rows")}
    return plain_rate, rate, stats


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def _paired(runs: list[float], plain: list[float]) -> float:
    """The median of the rounds' ratios ``runs[i] / plain[i]``."""
    return statistics.median(r / p for r, p in zip(runs, plain)) if plain else float("nan")


@dataclass(frozen=True)
class Ingest:
    """The sources (``threads`` and ``tasks`` counts), each run for ``seconds``, alternated
    ``rounds`` times, while ``workers`` processes run at ``concurrency``: small, as they only
    listen, so that their pools (up to concurrency + 3 connections) leave the server's
    connections to the 64 plain INSERTs."""

    threads: tuple[int, ...] = (8, 64)
    tasks: tuple[int, ...] = (64,)
    seconds: float = 1.5
    rounds: int = 6
    workers: int = 1
    concurrency: int = 8


def run_ingest(admin: str, plan: Ingest = Ingest()) -> dict[str, Any]:
    """Single-enqueue rates against a plain INSERT's, per source; see the module docstring."""
    payload = {"alert": "disk-full", "host": "db-7"}
    rows: list[dict[str, Any]] = []
    with fresh_database(admin) as dsn:
        procs = [
            kestrel_worker(dsn, worker_id=f"ingest-w{i}", concurrency=plan.concurrency) for i in range(plan.workers)
        ]
        try:
            wait_registered(dsn, procs, [f"ingest-w{i}" for i in range(plan.workers)])
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(render(PLAIN_TABLE, SCHEMA))
            with Kestrel(dsn) as app:
                app.enqueue(INGEST, payload)  # open the pool before the clock
                batcher = app._enqueue_batcher()

                def own_connection(_t: int) -> psycopg.Connection:
                    return psycopg.connect(dsn, autocommit=True)

                def plain(conn: psycopg.Connection, _i: int) -> None:
                    conn.execute(PLAIN_INSERT, (INGEST, Jsonb(payload)))

                def grouped(_state: Any, _i: int) -> None:
                    app.enqueue(INGEST, payload)

                def per_call(conn: psycopg.Connection, _i: int) -> None:
                    app.enqueue(INGEST, payload, conn=conn)

                for count in plan.threads:
                    runs: dict[str, list[float]] = {"plain": [], "kestrel": [], "per_call": []}
                    before = dict(batcher.stats)
                    for _ in range(plan.rounds):
                        runs["plain"].append(_threads(count, plan.seconds, own_connection, plain))
                        runs["kestrel"].append(_threads(count, plan.seconds, lambda _t: None, grouped))
                        runs["per_call"].append(_threads(count, plan.seconds, own_connection, per_call))
                    batches = batcher.stats["batches"] - before["batches"]
                    rows.append(
                        _row(f"{count} threads", runs, (batcher.stats["rows"] - before["rows"]) / max(1, batches))
                    )
            for count in plan.tasks:
                runs = {"plain": [], "kestrel": []}
                grouped_rows = grouped_batches = 0
                for _ in range(plan.rounds):
                    plain_rate, rate, stats = asyncio.run(_async_rates(dsn, count, plan.seconds, payload))
                    runs["plain"].append(plain_rate)
                    runs["kestrel"].append(rate)
                    grouped_rows += stats["rows"]
                    grouped_batches += stats["batches"]
                rows.append(_row(f"{count} asyncio tasks", runs, grouped_rows / max(1, grouped_batches)))
            for p in procs:
                p.check_alive()
        finally:
            stop_all(procs)
    return {
        "workers": plan.workers,
        "concurrency": plan.concurrency,
        "seconds": plan.seconds,
        "rounds": plan.rounds,
        "workflow": INGEST,
        "rows": rows,
    }


def _row(source: str, runs: dict[str, list[float]], rows_per_batch: float) -> dict[str, Any]:
    plain = _mean(runs["plain"])
    out = {
        "source": source,
        "plain_per_s": round(plain),
        "kestrel_per_s": round(_mean(runs["kestrel"])),
        "kestrel_vs_plain": round(_paired(runs["kestrel"], runs["plain"]), 2),
        "rows_per_batch": round(rows_per_batch, 1),
        "runs": {k: [round(v) for v in vs] for k, vs in runs.items()},
    }
    if runs.get("per_call"):
        out["per_call_per_s"] = round(_mean(runs["per_call"]))
        out["per_call_vs_plain"] = round(_paired(runs["per_call"], runs["plain"]), 2)
    return out
