"""Enqueue throughput (bulk ``enqueue_many`` and one-by-one ``enqueue``) and worker memory.

Bulk: ``app.enqueue_many`` in batches (each batch one statement and one transaction), no
worker running. Memory: one worker at concurrency 32, its resident set idle and after running
a load of 5-step workflows (VmRSS, and the peak VmHWM).
"""

from __future__ import annotations

import time
from typing import Any

from kestrel_core import Kestrel

from .databases import fresh_database
from .procs import kestrel_worker, stop_all, wait_registered
from .throughput import enqueue_in_one_transaction, wait_done
from .workloads import NOOP1, NOOP5


def run_enqueue(admin: str, *, rows: int, batch: int = 1000, singles: int = 1000) -> dict[str, Any]:
    """Rows/s of bulk enqueue (``rows`` in batches of ``batch``) and of ``singles`` one by one."""
    with fresh_database(admin) as dsn, Kestrel(dsn) as app:
        app.enqueue_many(NOOP1, list(range(batch)))  # warm the pool and the statement
        started = time.perf_counter()
        for start in range(0, rows, batch):
            app.enqueue_many(NOOP1, list(range(start, min(rows, start + batch))))
        bulk_s = time.perf_counter() - started
        started = time.perf_counter()
        for i in range(singles):
            app.enqueue(NOOP1, i)
        single_s = time.perf_counter() - started
    return {
        "rows": rows,
        "batch": batch,
        "bulk_s": round(bulk_s, 3),
        "bulk_rows_per_s": round(rows / bulk_s, 0),
        "singles": singles,
        "single_rows_per_s": round(singles / single_s, 0),
    }


def run_rss(admin: str, *, concurrency: int = 32, load: int = 2000) -> dict[str, Any]:
    """Resident memory of one worker at ``concurrency``: idle, then after ``load`` executions."""
    with fresh_database(admin) as dsn:
        proc = kestrel_worker(dsn, worker_id="rss", concurrency=concurrency)
        try:
            wait_registered(dsn, [proc], ["rss"])
            time.sleep(0.5)
            idle = proc.rss_mib()
            with Kestrel(dsn) as app, app.connection() as conn:
                ids, _ = enqueue_in_one_transaction(conn, NOOP5, load)
                wait_done(conn, ids[0], ids[-1], timeout=max(120.0, load / 10), procs=[proc])
            loaded = proc.rss_mib()
        finally:
            stop_all([proc])
    return {
        "concurrency": concurrency,
        "load": load,
        "idle_rss_mib": idle["rss_mib"],
        "rss_mib": loaded["rss_mib"],
        "peak_rss_mib": loaded["peak_rss_mib"],
    }
