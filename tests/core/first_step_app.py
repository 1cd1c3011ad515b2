"""The app of tests/core/test_first_step_fence.py, run in worker subprocesses ($KESTREL_DSN).

``gated`` records that its code started (a ledger row ``reached``, written by the workflow's
own code, not a step), waits for a gate file to exist (polling: no database, no step
boundary), then runs its first step ``s1``, which records every run of it in the ledger. A
worker frozen (SIGSTOP) while it waits is resumed with the gate already open, so its thread
goes straight on to the first step.
"""

from __future__ import annotations

import os
import time

import psycopg

from kestrel_core import Kestrel

app = Kestrel()


def record(execution_id: int, step_id: str) -> str:
    with psycopg.connect(app.dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO public.ledger (execution_id, step_id, worker) VALUES (%s, %s, %s)",
            (execution_id, step_id, str(os.getpid())),
        )
    return step_id


@app.workflow("gated")
def gated(ctx, gate: str):
    record(ctx.execution_id, "reached")
    while not os.path.exists(gate):
        time.sleep(0.02)
    return ctx.step("s1", record, ctx.execution_id, "s1")
