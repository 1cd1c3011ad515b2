"""The bucketed claim against today's (``python -m bench throughput --buckets 1,16``).

For each variant (no buckets, then each count of bucket groups given) the same W worker
processes (``--workers``, first count; concurrency as the throughput run's) start on a fresh
database, register, warm up and settle into their groups (a refresh every third of the lease:
the run's lease is BUCKET_LEASE_S); then one transaction enqueues a backlog of one-step
workflows too big to drain in the window, and the figure is the workflows finished per second
inside a window of ``--window`` seconds (at least 10) starting a second after the commit. The
variants run interleaved, ``--rounds`` times (the machine is shared: a drift hits all
alike), and each variant's median is compared to the median without buckets.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass
from typing import Any

import psycopg

from kestrel_core.db import render

from .databases import checkpoint, fresh_database
from .procs import kestrel_worker, stop_all, wait_registered
from .report import ratio
from .throughput import SCHEMA, enqueue_in_one_transaction, warm_up
from .workloads import NOOP1

BUCKET_LEASE_S = 6.0  # refresh of the groups every 2 s: settled soon after the warm-up
SKIP_S = 1.0  # the window starts this long after the backlog's commit
MIN_WINDOW_S = 10.0
GROUPS_SET = "SELECT count(*) FROM {schema}.workers WHERE worker_id = ANY(%s) AND bucket_groups = %s"
FINISHED_IN = """
SELECT count(*) FROM {schema}.workflow_executions
 WHERE id BETWEEN %(first)s AND %(last)s
   AND finished_at >= to_timestamp(%(start)s) AND finished_at < to_timestamp(%(end)s)
"""
LEFT = "SELECT count(*) FROM {schema}.executions_ready"
BY_WORKER = """
SELECT owner_id, count(*) FROM {schema}.workflow_executions
 WHERE id BETWEEN %(first)s AND %(last)s AND finished_at IS NOT NULL GROUP BY 1 ORDER BY 1
"""


def run_variant(
    admin: str, *, buckets: int | None, workers: int, concurrency: int, n: int, window: float
) -> dict[str, Any]:
    """One measurement: workflows/s finished in the window by ``workers`` processes started
    with ``buckets`` groups (None: today's claim)."""
    with fresh_database(admin) as dsn:
        ids = [f"bench-b{i}" for i in range(workers)]
        procs = [
            kestrel_worker(dsn, worker_id=wid, concurrency=concurrency, lease=BUCKET_LEASE_S, buckets=buckets)
            for wid in ids
        ]
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                wait_registered(dsn, procs, ids)
                warm_up(conn, procs, workers * concurrency * 4)
                if buckets is not None:
                    deadline = time.monotonic() + 60
                    while conn.execute(render(GROUPS_SET, SCHEMA), (ids, buckets)).fetchone()[0] < workers:
                        if time.monotonic() > deadline:
                            raise TimeoutError("the workers did not record their bucket groups")
                        time.sleep(0.1)
                time.sleep(BUCKET_LEASE_S / 3 + 0.5)  # every worker has refreshed since the last joined
                checkpoint(conn)
                load = os.getloadavg()[0]
                eids, t0 = enqueue_in_one_transaction(conn, NOOP1, n)
                start, end = t0 + SKIP_S, t0 + SKIP_S + window
                time.sleep(max(0.0, end - time.time()) + 0.5)
                left = conn.execute(render(LEFT, SCHEMA)).fetchone()[0]
                params = {"first": min(eids), "last": max(eids), "start": start, "end": end}
                done = conn.execute(render(FINISHED_IN, SCHEMA), params).fetchone()[0]
                per_worker = dict(conn.execute(render(BY_WORKER, SCHEMA), params).fetchall())
        finally:
            stop_all(procs)
    return {
        "buckets": buckets,
        "workers": workers,
        "concurrency": concurrency,
        "window_s": window,
        "workflows_per_s": round(done / window, 1),
        "backlog_left": left,  # 0: the backlog drained inside the window (the figure is a floor)
        "per_worker": per_worker,
        "load_average_1m": round(load, 2),
    }


@dataclass(frozen=True)
class Buckets:
    """Today's claim against each count of bucket ``groups`` (none: no comparison), each run on
    a backlog of ``n`` one-step workflows (one the windows do not drain at 5,000 wf/s) for a
    window of ``window`` seconds, interleaved ``rounds`` times."""

    groups: tuple[int, ...] = ()
    n: int = 150_000
    window: float = 12.0
    rounds: int = 2


def compare(admin: str, plan: Buckets, *, workers: int, concurrency: int, echo: Any = print) -> dict[str, Any]:
    """Today's claim and each count of ``groups``, interleaved ``rounds`` times; medians and
    their ratios to today's."""
    groups, n, window, rounds = plan.groups, plan.n, plan.window, plan.rounds
    if window < MIN_WINDOW_S:
        raise ValueError(f"a window of at least {MIN_WINDOW_S:g} s, not {window:g}")
    variants: list[int | None] = [None, *groups]
    runs: list[dict[str, Any]] = []
    for r in range(rounds):
        for b in variants:
            echo(f"  round {r + 1}/{rounds}: {'no buckets' if b is None else f'{b} bucket group(s)'} ...")
            try:
                run = run_variant(admin, buckets=b, workers=workers, concurrency=concurrency, n=n, window=window)
            except psycopg.OperationalError as exc:  # a shared server: a dropped connection is run again, once
                echo(f"    ({exc}: once more)")
                run = run_variant(admin, buckets=b, workers=workers, concurrency=concurrency, n=n, window=window)
            if not run["backlog_left"]:
                echo("    (the backlog drained inside the window: raise -n)")
            runs.append(run)
    medians = {b: statistics.median(x["workflows_per_s"] for x in runs if x["buckets"] == b) for b in variants}
    rows = [
        {
            "buckets": b,
            "median_workflows_per_s": medians[b],
            "runs": [x["workflows_per_s"] for x in runs if x["buckets"] == b],
            "vs_no_buckets": ratio(medians[b], medians[None]),
        }
        for b in variants
    ]
    echo(table(rows, workers, concurrency, window, [x["load_average_1m"] for x in runs]))
    return {
        "workers": workers,
        "concurrency": concurrency,
        "n": n,
        "window_s": window,
        "bucket_rows": rows,
        "runs": runs,
    }


def table(rows: list[dict[str, Any]], workers: int, concurrency: int, window: float, loads: list[float]) -> str:
    lines = [
        f"Bucketed claim: {workers} worker(s) x concurrency {concurrency}, one-step workflows finished "
        f"per second in {window:g} s windows (load average {min(loads):.1f}-{max(loads):.1f} at the windows' start)",
        f"{'buckets':>10} {'median wf/s':>12} {'runs':>22} {'vs none':>8}",
    ]
    for row in rows:
        name = "none" if row["buckets"] is None else str(row["buckets"])
        runs = ", ".join(f"{v:g}" for v in row["runs"])
        lines.append(f"{name:>10} {row['median_workflows_per_s']:>12g} {runs:>22} {row['vs_no_buckets']!s:>8}")
    return "\n".join(lines)
