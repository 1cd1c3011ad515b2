"""A Kestrel app run in worker subprocesses by the crash tests (DSN from $KESTREL_DSN).

Steps write to public.ledger each time they really run, so a test can tell which steps ran
again after a crash. ``$CRASH_STEP_SECONDS`` sets how long each step of ``slow`` takes.
"""

from __future__ import annotations

import os
import time

import psycopg

from kestrel_core import Kestrel

app = Kestrel()
STEP_SECONDS = float(os.environ.get("CRASH_STEP_SECONDS", "0.5"))


def record(execution_id: int, step_id: str) -> str:
    with psycopg.connect(app.dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO public.ledger (execution_id, step_id, worker) VALUES (%s, %s, %s)",
            (execution_id, step_id, os.environ.get("WORKER_NAME", str(os.getpid()))),
        )
    return f"{step_id}-done"


@app.workflow("slow")
def slow(ctx, input):
    results = []
    for i in range(input.get("steps", 4)):

        def work(i=i):
            time.sleep(STEP_SECONDS)
            return record(ctx.execution_id, f"s{i}")

        results.append(ctx.step(f"s{i}", work))
    return results


@app.workflow("sleeper")
def sleeper(ctx, input):
    ctx.step("before", record, ctx.execution_id, "before")
    ctx.sleep("nap", input.get("seconds", 2))
    return ctx.step("after", record, ctx.execution_id, "after")


@app.workflow("gated")
def gated(ctx, input):
    decision = ctx.wait_for_approval("approve", details={"what": "deploy"})
    return {"approved": decision.approved, "by": decision.by}


@app.workflow("leaf")
def leaf(ctx, i):
    def work():
        time.sleep(STEP_SECONDS)
        return record(ctx.execution_id, f"leaf-{i}")

    return ctx.step("work", work)


@app.workflow("fan")
def fan(ctx, input):
    handles = [ctx.start_child("leaf", i) for i in range(input.get("children", 50))]
    return [ctx.wait_for(h) for h in handles]
