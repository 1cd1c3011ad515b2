"""The app of tests/core/test_frozen_worker.py, run in a worker subprocess ($KESTREL_DSN).

Each step records its start in public.ledger (clock_timestamp()), then works in short ticks:
a step frozen by SIGSTOP still has work left when the process is resumed, so its thread
notices the lost claim only after the worker may have claimed the execution again.
"""

from __future__ import annotations

import os
import time

import psycopg

from kestrel_core import Kestrel

app = Kestrel()
TICKS = int(os.environ.get("FROZEN_STEP_TICKS", "15"))  # of 0.1 s each


def work(execution_id: int, step_id: str) -> str:
    with psycopg.connect(app.dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO public.ledger (execution_id, step_id, worker) VALUES (%s, %s, %s)",
            (execution_id, step_id, str(os.getpid())),
        )
    for _ in range(TICKS):
        time.sleep(0.1)
    return f"{step_id}-done"


@app.workflow("three")
def three(ctx, _input):
    # retried: the shared test server may refuse a connection when it is full (nothing recorded then)
    return [ctx.step(f"s{i}", work, ctx.execution_id, f"s{i}", retries=3, backoff=0.2) for i in range(3)]
