"""The Kestrel app the benchmarks run: no-op workflows of 1 and 5 steps, a latency probe and a
long step for the recovery test.

Run it in a worker process with ``python -m bench.worker --dsn DSN`` or
``kestrel-console --dsn DSN worker bench.workloads:app --concurrency N``.
"""

from __future__ import annotations

import time
from typing import Any

from kestrel_core import Kestrel

app = Kestrel()

NOOP1 = "noop1"
NOOP5 = "noop5"
STAMP = "stamp"
HOLD = "hold"
WARMUP = "warmup"

# Steps per no-op workload, by workflow name.
STEPS = {NOOP1: 1, NOOP5: 5}


def noop() -> None:
    """A step that does nothing: the benchmark measures the engine, not the work."""
    return None


def _run_noop_steps(ctx: Any, n: int) -> None:
    for i in range(n):
        ctx.step(f"s{i}", noop)


@app.workflow(NOOP1)
def noop1(ctx: Any, _input: Any) -> None:
    _run_noop_steps(ctx, 1)


@app.workflow(NOOP5)
def noop5(ctx: Any, _input: Any) -> None:
    _run_noop_steps(ctx, 5)


@app.workflow(WARMUP)
def warmup(ctx: Any, _input: Any) -> None:
    """Opens the worker's pooled connections and warms its prepared statements."""
    _run_noop_steps(ctx, 2)


@app.workflow(STAMP)
def stamp(_ctx: Any, _input: Any) -> dict[str, float]:
    """Records when the workflow function began (the dispatch-latency probe)."""
    return {"started": time.time()}


@app.workflow(HOLD)
def hold(ctx: Any, seconds: float) -> None:
    """One long step: the execution stays running in its worker (the recovery test)."""
    ctx.step("hold", time.sleep, float(seconds))
