"""Throughput: N no-op workflows enqueued in bulk, run by W Kestrel worker processes.

The workers start, register and are warmed (a few warm-up workflows open their pooled
connections and prepare their statements) before the clock. The N executions are inserted
with enqueue_many batches inside ONE transaction; the clock starts just before its COMMIT
(the workers cannot see any row before it) and stops at the last ``finished_at``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from psycopg.types.json import Jsonb

from kestrel_core import Kestrel
from kestrel_core.db import render
from kestrel_core.dispatch import enqueue_many

from . import pgstats
from .cpu import CpuMeter
from .databases import checkpoint, fresh_database, rates
from .procs import Proc, kestrel_worker, stop_all, wait_registered
from .workloads import STEPS, WARMUP

T = TypeVar("T")

SCHEMA = "kestrel"
BATCH = 1000

# Planner statistics that know about the backlog, taken inside the enqueue transaction (which
# ANALYZE counts as live): a steady-state queue table has them from autovacuum. Without them a
# freshly filled table can get a plan that sorts the whole backlog on every claim (README).
ANALYZE = "ANALYZE {schema}.workflow_executions"
LIVE = """
SELECT count(*) FROM {schema}.workflow_executions
 WHERE status IN ('enqueued', 'running') AND id BETWEEN %(first)s AND %(last)s
"""
OUTCOME = """
SELECT count(*) FILTER (WHERE status = 'success'), count(*),
       extract(epoch FROM max(finished_at))::float8
  FROM {schema}.workflow_executions WHERE id BETWEEN %(first)s AND %(last)s
"""
# The cheapest way to make a claimable execution one call at a time (the fed row's reference):
# a one-row INSERT with the columns that have no default, autocommit, no NOTIFY in it, no checks.
PLAIN_INSERT = """
INSERT INTO {schema}.workflow_executions (workflow_name, input) VALUES (%(name)s, %(input)s) RETURNING id
"""
# Its rows' wake-up, from a thread of its own every PLAIN_WAKE_S (no commit waits on its flush).
PLAIN_WAKE = "SELECT pg_notify({schema}.notify_channel(), %(name)s)"
PLAIN_WAKE_S = 0.002
BY_WORKER = """
SELECT owner_id, count(*) FROM {schema}.workflow_executions
 WHERE id BETWEEN %(first)s AND %(last)s GROUP BY owner_id ORDER BY owner_id
"""


def enqueue_in_one_transaction(
    conn: psycopg.Connection, name: str, n: int, *, analyze: bool = True, batch: int = BATCH
) -> tuple[list[int], float]:
    """Insert ``n`` executions with enqueue_many batches in one transaction.

    Returns the ids and the wall-clock time (``time.time()``) taken just before COMMIT.
    """
    ids: list[int] = []
    with conn.transaction():
        for start in range(0, n, batch):
            ids += enqueue_many(conn, SCHEMA, name, list(range(start, min(n, start + batch))))
        if analyze:
            conn.execute(render(ANALYZE, SCHEMA))
        t0 = time.time()
    return ids, t0


def from_threads(n: int, threads: int, call: Callable[[int, int], T]) -> tuple[list[T], float, float]:
    """``call(thread, i)`` for i in 0..n-1 from ``threads`` threads started together (thread t
    makes the calls i = t, t + threads, ...): what the calls returned, the wall-clock start
    (``time.time()``) and the calls' rate."""
    results: list[T] = []
    start = threading.Barrier(threads + 1)

    def run(t: int) -> None:
        start.wait()
        results.extend([call(t, i) for i in range(t, n, threads)])

    pool = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    start.wait()
    t0, c0 = time.time(), time.perf_counter()
    for th in pool:
        th.join()
    return results, t0, n / (time.perf_counter() - c0)


def feed(dsn: str, name: str, n: int, threads: int) -> tuple[list[int], float, dict[str, Any]]:
    """``n`` single ``Kestrel.enqueue`` calls from ``threads`` threads of one app (its group
    commit); the ids, the wall-clock start (``time.time()``) and the calls' own rate."""
    with Kestrel(dsn) as app:
        app.enqueue(WARMUP, None)  # open the pool before the clock
        ids, t0, rate = from_threads(n, threads, lambda _t, i: app.enqueue(name, i))
        stats = dict(app._enqueue_batcher().stats)
    rows_per_batch = round(stats["rows"] / stats["batches"], 1)
    return ids, t0, {"enqueue_calls_per_s": round(rate), "fed_by": "Kestrel.enqueue", "rows_per_batch": rows_per_batch}


def feed_plain(dsn: str, name: str, n: int, threads: int) -> tuple[list[int], float, dict[str, Any]]:
    """``n`` plain one-row INSERTs from ``threads`` threads, each on its own autocommit
    connection, as ``feed`` returns them: what the workers reach fed by the cheapest ingestion
    there is, on the same cores. A thread of its own NOTIFYs every ``PLAIN_WAKE_S`` (no commit
    of an INSERT waits on it), so the workers wake as they would for enqueues."""
    insert, wake = render(PLAIN_INSERT, SCHEMA), render(PLAIN_WAKE, SCHEMA)
    done = threading.Event()

    def waker() -> None:
        with psycopg.connect(dsn, autocommit=True, options="-c synchronous_commit=off") as conn:
            while not done.wait(PLAIN_WAKE_S):
                conn.execute(wake, {"name": name})

    with contextlib.ExitStack() as stack:
        conns = [stack.enter_context(psycopg.connect(dsn, autocommit=True)) for _ in range(threads)]  # before the clock
        waking = threading.Thread(target=waker)
        waking.start()
        stack.callback(waking.join)
        stack.callback(done.set)
        ids, t0, rate = from_threads(
            n, threads, lambda t, i: conns[t].execute(insert, {"name": name, "input": Jsonb(i)}).fetchone()[0]
        )
    return ids, t0, {"enqueue_calls_per_s": round(rate), "fed_by": "plain INSERT", "rows_per_batch": 1.0}


def wait_done(
    conn: psycopg.Connection,
    first: int,
    last: int,
    *,
    timeout: float,
    procs: list[Proc] | None = None,
    poll: float = 0.05,
) -> None:
    """Block until no execution of the id range is enqueued or running."""
    deadline = time.monotonic() + timeout
    while conn.execute(render(LIVE, SCHEMA), {"first": first, "last": last}).fetchone()[0]:
        for p in procs or []:
            p.check_alive()
        if time.monotonic() > deadline:
            raise TimeoutError(f"executions {first}..{last} not finished after {timeout:.0f} s")
        time.sleep(poll)


def warm_up(conn: psycopg.Connection, procs: list[Proc], count: int) -> None:
    ids, _ = enqueue_in_one_transaction(conn, WARMUP, count, analyze=False)
    wait_done(conn, ids[0], ids[-1], timeout=120, procs=procs)


def run_kestrel(
    admin: str,
    workflow: str,
    *,
    workers: int,
    concurrency: int,
    n: int,
    listen: bool = True,
    analyze: bool = True,
    timeout: float | None = None,
    module: str = "bench.worker",
    profile: Path | None = None,
    settle: float = pgstats.SETTLE_S,
    feed_threads: int = 0,
    plain_feed: bool = False,
) -> dict[str, Any]:
    """Run ``n`` executions of ``workflow`` on ``workers`` fresh worker processes; workflows/s,
    and what Postgres did per workflow (bench.pgstats: commits, statements, writes per table).

    ``module`` runs the workers from another module with bench.worker's options (experiments);
    ``profile`` runs each worker under cProfile, writing ``<profile>/<workflow>-<worker>.pstats``;
    ``settle``: seconds idle after the warm-up, so the workers' backends publish its counters.
    ``feed_threads``: instead of one bulk transaction, ``n`` single ``app.enqueue`` calls from
    that many threads while the workers run (clock from the first call to the last finish);
    ``plain_feed``: those calls are plain one-row INSERTs instead (``feed_plain``).
    """
    steps = STEPS[workflow]
    with fresh_database(admin) as dsn:
        ids = [f"bench-w{i}" for i in range(workers)]
        procs = [
            kestrel_worker(
                dsn,
                worker_id=wid,
                concurrency=concurrency,
                listen=listen,
                module=module,
                profile=profile / f"{workflow}-{wid}.pstats" if profile else None,
            )
            for wid in ids
        ]
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                skipped = pgstats.statements_unavailable(conn)
                wait_registered(dsn, procs, ids)
                warm_up(conn, procs, workers * concurrency * 4)
                checkpoint(conn)
                time.sleep(settle)
                before = pgstats.snapshot(conn, SCHEMA, statements=skipped is None)
                meter = CpuMeter([p.pid for p in procs])
                fed: dict[str, Any] = {}
                if feed_threads:
                    ids_run, t0, fed = (feed_plain if plain_feed else feed)(dsn, workflow, n, feed_threads)
                else:
                    ids_run, t0 = enqueue_in_one_transaction(conn, workflow, n, analyze=analyze)
                first, last = min(ids_run), max(ids_run)
                wait_done(conn, first, last, timeout=timeout or max(120.0, n / 20.0), procs=procs)
                cpu = meter.stop()
                stop_all(procs)  # their backends flush their statistics as they exit
                pgstats.wait_backends_gone(conn)
                postgres = pgstats.delta(before, pgstats.snapshot(conn, SCHEMA, statements=skipped is None), n)
                ok, _total, t_end = conn.execute(render(OUTCOME, SCHEMA), {"first": first, "last": last}).fetchone()
                per_worker = dict(conn.execute(render(BY_WORKER, SCHEMA), {"first": first, "last": last}).fetchall())
        finally:
            stop_all(procs)
    if ok != n:
        raise RuntimeError(f"{n - ok} of {n} executions did not succeed")
    elapsed = t_end - t0
    return {
        "engine": "kestrel",
        "module": module,
        "workflow": workflow,
        "steps": steps,
        "workers": workers,
        "concurrency": concurrency,
        "n": n,
        "listen": listen,
        "analyze": analyze,
        "profiled": bool(profile),
        "feed_threads": feed_threads,
        **fed,
        "stats_settle_s": settle,
        **rates(n, steps, elapsed),
        "per_worker": per_worker,
        **cpu,
        "commits_per_workflow": postgres.pop("commits_per_workflow"),
        "statements_per_workflow": postgres.pop("statements_per_workflow"),
        "statements_skipped": skipped,
        "postgres": postgres,
    }
