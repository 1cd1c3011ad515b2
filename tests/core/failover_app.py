"""The app the failover test runs in its worker processes (DSN from $KESTREL_DSN): three short
steps, each recording in public.ledger that it really ran, retried while the database is away."""

from __future__ import annotations

import os
import time

import psycopg

from kestrel_core import Kestrel

app = Kestrel()


def record(execution_id: int, step_id: str) -> str:
    time.sleep(0.05)
    with psycopg.connect(app.dsn, autocommit=True, connect_timeout=5) as conn:
        conn.execute(
            "INSERT INTO public.ledger (execution_id, step_id, worker) VALUES (%s, %s, %s)",
            (execution_id, step_id, os.environ.get("WORKER_NAME", str(os.getpid()))),
        )
    return step_id


@app.workflow("chain")
def chain(ctx, input):
    return [ctx.step(f"s{i}", record, ctx.execution_id, f"s{i}", retries=20) for i in range(3)]
