"""Dispatch latency: enqueue-to-start on an idle system, with LISTEN/NOTIFY and polling only.

One worker waits idle; executions of the ``stamp`` workflow are enqueued one at a time, spaced
so the worker is idle at each enqueue. The start is what the workflow function records as its
first act (``time.time()``, kept in its output); the enqueue time is taken just before
``app.enqueue`` (same machine, same clock).
"""

from __future__ import annotations

import random
import time
from typing import Any

from kestrel_core import Kestrel
from kestrel_core.db import render

from .databases import fresh_database
from .procs import kestrel_worker, stop_all, wait_registered
from .report import summary_ms
from .throughput import wait_done
from .workloads import STAMP

SCHEMA = "kestrel"
STARTS = """
SELECT id, (output->>'started')::float8 FROM {schema}.workflow_executions
 WHERE id BETWEEN %(first)s AND %(last)s AND status = 'success'
"""


def run_latency(
    admin: str, *, listen: bool, samples: int, poll_interval: float = 1.0, gap: float = 0.05, concurrency: int = 8
) -> dict[str, Any]:
    """Enqueue ``samples`` probes, each after a random pause; p50/p99 enqueue-to-start.

    With NOTIFY the pause is ``gap`` (x0.5..1.5); polling only, it is 1-2 poll intervals, so
    each enqueue lands at a random point of the poll cycle and the worker is idle.
    """
    rng = random.Random(5)
    with fresh_database(admin) as dsn:
        procs = [
            kestrel_worker(
                dsn, worker_id="latency", concurrency=concurrency, listen=listen, poll_interval=poll_interval
            )
        ]
        try:
            wait_registered(dsn, procs, ["latency"])
            with Kestrel(dsn) as app:
                for _ in range(3):  # warm the worker's pool and our own
                    eid = app.enqueue(STAMP, -1)
                    with app.connection() as conn:
                        wait_done(conn, eid, eid, timeout=30, procs=procs, poll=0.01)
                enqueued: dict[int, float] = {}
                for i in range(samples):
                    pause = gap * rng.uniform(0.5, 1.5) if listen else poll_interval * rng.uniform(1.0, 2.0)
                    time.sleep(pause)
                    t = time.time()
                    enqueued[app.enqueue(STAMP, i)] = t
                first, last = min(enqueued), max(enqueued)
                with app.connection() as conn:
                    wait_done(conn, first, last, timeout=60 + 3 * poll_interval, procs=procs)
                    starts = dict(conn.execute(render(STARTS, SCHEMA), {"first": first, "last": last}).fetchall())
        finally:
            stop_all(procs)
    if len(starts) != samples:
        raise RuntimeError(f"only {len(starts)} of {samples} probes succeeded")
    delays = [starts[eid] - t for eid, t in enqueued.items()]
    return {
        "mode": "notify" if listen else "polling",
        "listen": listen,
        "poll_interval_s": poll_interval,
        **summary_ms(delays),
    }
