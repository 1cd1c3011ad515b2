"""The chaos workload: a Kestrel app whose steps leave non-idempotent side effects in a ledger.

Run as a worker process by the harness: ``python -m tests.chaos.workload --worker-id w3``.
Configuration comes from the environment (the harness sets it):
``KESTREL_CHAOS_DSN`` (where workers connect, maybe through PgBouncer),
``KESTREL_CHAOS_POOLING=1`` (PgBouncer transaction pooling: no LISTEN, no prepared statements),
``KESTREL_CHAOS_PARENT`` (the harness's pid: the worker stops once that process is gone).

Every real run of a step INSERTs one ``chaos_ledger`` row on its own connection, outside the
checkpoint transaction, recording the claim it ran under (worker id and claim epoch) and a
random nonce that is also the step's result. So the ledger shows every time a step really ran,
and which run's result the checkpoint kept.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import signal
import threading
import time
from datetime import timedelta
from typing import Any

import psycopg

from kestrel_core import Kestrel
from tests.worker_processes import worker_main

LEDGER_DDL = """
CREATE TABLE IF NOT EXISTS public.chaos_ledger (
    nonce         bigint PRIMARY KEY,       -- the step's result; unique per real run
    execution_id  bigint NOT NULL,
    step_id       text   NOT NULL,
    owner_id      text   NOT NULL,          -- the claim the step ran under ...
    claim_epoch   bigint NOT NULL,          -- ... (worker id, epoch)
    pid           integer NOT NULL,
    started       float8 NOT NULL,          -- when the step's function began (time.time())
    at            timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS chaos_ledger_step_idx ON public.chaos_ledger (execution_id, step_id);
-- Every change of an execution's status or claim, when it was written: when each claim ended.
CREATE TABLE IF NOT EXISTS public.chaos_transitions (
    execution_id  bigint NOT NULL,
    old_status    text, new_status text,
    old_owner     text, old_epoch bigint, new_epoch bigint,
    at            timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE OR REPLACE FUNCTION public.chaos_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.chaos_transitions (execution_id, old_status, new_status, old_owner, old_epoch, new_epoch)
    VALUES (NEW.id, OLD.status, NEW.status, OLD.owner_id, OLD.claim_epoch, NEW.claim_epoch);
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS chaos_transitions ON kestrel.workflow_executions;
CREATE TRIGGER chaos_transitions AFTER UPDATE ON kestrel.workflow_executions FOR EACH ROW
  WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.claim_epoch IS DISTINCT FROM NEW.claim_epoch)
  EXECUTE FUNCTION public.chaos_transition();
"""
# A retried INSERT whose first try committed but lost its reply must not count twice.
RECORD = """
INSERT INTO public.chaos_ledger (nonce, execution_id, step_id, owner_id, claim_epoch, pid, started)
VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (nonce) DO NOTHING
"""

POOLING = os.environ.get("KESTREL_CHAOS_POOLING") == "1"
app = Kestrel(os.environ.get("KESTREL_CHAOS_DSN"), transaction_pooling=POOLING, application_name="kestrel-chaos")
LEDGER_RETRY_S = 120.0

# Part of the chains run in a queue with limits (the harness routes them there at enqueue):
# at most LIMITED_CONCURRENCY running at once across all workers, and at most LIMITED_PER_KEY
# per concurrency key. The harness samples the table to check both hold through the chaos.
LIMITED_QUEUE = "chaos-limited"
LIMITED_CONCURRENCY = 3
LIMITED_PER_KEY = 1
app.queue(LIMITED_QUEUE, concurrency=LIMITED_CONCURRENCY, per_key=LIMITED_PER_KEY)


def break_fences() -> None:
    """Mutation test of the checks (``KESTREL_CHAOS_BREAK_FENCE=1``): drop the claim from every
    fenced write (the row must still be running, by anyone), so a stale worker may checkpoint
    and complete. A chaos run must then report violations."""
    from kestrel_core.db import statements
    from kestrel_core.durable import boundary

    # Every fenced write pastes {claim_is_current} (or its locking form); the batched step
    # boundaries spell the fence per row.
    statements.CLAIM_IS_CURRENT = "id = %(eid)s AND status = 'running'"
    boundary.WRITE = boundary.WRITE.replace("e.owner_id = i.worker_id AND e.claim_epoch = i.claim_epoch", "TRUE")
    statements.fragments.cache_clear()
    statements.render.cache_clear()
    # The heartbeat would also stop a stale run at its next step: turn that off too, so only
    # the (broken) database fences stand between a stale worker and the data.
    from kestrel_core.workflow.context import Unwind, WorkflowContext

    def boundary(self: WorkflowContext) -> None:
        if self._worker.draining.is_set():
            raise Unwind("shutdown")

    WorkflowContext._boundary = boundary  # type: ignore[method-assign]
    logging.getLogger("kestrel.chaos").warning("event=fences_broken (mutation test)")


if os.environ.get("KESTREL_CHAOS_BREAK_FENCE") == "1" and __name__ == "__main__":
    break_fences()

_local = threading.local()


def _ledger_connection() -> psycopg.Connection:
    conn = getattr(_local, "conn", None)
    if conn is None or conn.closed:
        conn = psycopg.connect(app.dsn, autocommit=True, connect_timeout=5, application_name="kestrel-chaos-ledger")
        if POOLING:
            conn.prepare_threshold = None
        _local.conn = conn
    return conn


def record(execution_id: int, step_id: str, owner: str, epoch: int) -> int:
    """The side effect: one ledger row per real run of a step. Returns its nonce.

    Retried while the database is down (the harness restarts it): the step must not fail for
    good because of an outage, and the nonce keeps a retried INSERT from counting twice.
    """
    nonce = random.getrandbits(52)
    started = time.time()  # the ledger's own time may be an outage later
    deadline = time.monotonic() + LEDGER_RETRY_S
    while True:
        try:
            _ledger_connection().execute(RECORD, (nonce, execution_id, step_id, owner, epoch, os.getpid(), started))
            return nonce
        except psycopg.OperationalError:
            conn = getattr(_local, "conn", None)
            if conn is not None:
                conn.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def claim_of(ctx: Any) -> tuple[str, int]:
    """(worker id, claim epoch) this run of the workflow holds."""
    return ctx.worker_id, ctx.claim_epoch


def side_effect(execution_id: int, step_id: str, owner: str, epoch: int, work_ms: int) -> int:
    nonce = record(execution_id, step_id, owner, epoch)
    time.sleep(work_ms / 1000.0 * random.uniform(0.5, 1.5))  # the work after the effect
    return nonce


@app.workflow("chain")
def chain(ctx: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """``spec``: steps (int), work_ms (int), nap (seconds or null), gate (approve|reject|timeout|null),
    pre_ms (workflow code before the first step: where the harness's early cancels land)."""
    owner, epoch = claim_of(ctx)
    time.sleep(spec.get("pre_ms", 0) / 1000)
    nonces = []
    decision = None
    for i in range(spec["steps"]):
        step_id = f"s{i}"
        nonces.append(ctx.step(step_id, side_effect, ctx.execution_id, step_id, owner, epoch, spec["work_ms"]))
        if i == 0 and spec.get("nap"):
            ctx.sleep("nap", timedelta(seconds=spec["nap"]))
        if i == 1 and spec.get("gate"):
            timeout = 1.5 if spec["gate"] == "timeout" else 600
            d = ctx.wait_for_approval("gate", timeout=timedelta(seconds=timeout), details={"i": i})
            decision = {"approved": d.approved, "timed_out": d.timed_out, "by": d.by}
    return {"nonces": nonces, "sum": sum(nonces), "owner": owner, "epoch": epoch, "decision": decision}


async def side_effect_async(execution_id: int, step_id: str, owner: str, epoch: int, work_ms: int) -> int:
    """The same side effect as a coroutine step (its ledger INSERT in a thread, its work awaited)."""
    nonce = await asyncio.to_thread(record, execution_id, step_id, owner, epoch)
    await asyncio.sleep(work_ms / 1000.0 * random.uniform(0.5, 1.5))
    return nonce


@app.workflow("fan")
async def fan(ctx: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """``spec``: fan (int: steps gathered at once, plain and coroutine ones in turn), work_ms
    (int), nap (seconds): gather the steps, sleep durably (the rest is a replay that must
    return every gathered checkpoint), then one more step."""
    owner, epoch = claim_of(ctx)
    gathered = [
        ctx.step(
            f"f{i}",
            side_effect_async if i % 2 else side_effect,
            ctx.execution_id,
            f"f{i}",
            owner,
            epoch,
            spec["work_ms"],
        )
        for i in range(spec["fan"])
    ]
    nonces = list(await asyncio.gather(*gathered))
    await ctx.sleep("nap", timedelta(seconds=spec["nap"]))
    nonces.append(await ctx.step("after", side_effect, ctx.execution_id, "after", owner, epoch, spec["work_ms"]))
    return {"nonces": nonces, "sum": sum(nonces), "owner": owner, "epoch": epoch, "decision": None}


# A deadline that passes while the workflow's code runs before its first step: the execution
# ends error, and its step must never run.
DEADLINE_S = 1.0


@app.workflow("deadline", timeout=DEADLINE_S)
def deadline(ctx: Any, spec: dict[str, Any]) -> None:
    """``spec``: pre_ms (past DEADLINE_S)."""
    owner, epoch = claim_of(ctx)
    time.sleep(spec["pre_ms"] / 1000)
    ctx.step("s0", side_effect, ctx.execution_id, "s0", owner, epoch, 10)


def exits(execution_id: int, owner: str, epoch: int) -> None:
    """A step that raises SystemExit (a library calling sys.exit)."""
    record(execution_id, "boom", owner, epoch)
    raise SystemExit(3)


async def cancelled_inside(execution_id: int, owner: str, epoch: int) -> None:
    """A coroutine step that raises CancelledError (an inner task cancelled, as in client libraries)."""
    await asyncio.to_thread(record, execution_id, "boom", owner, epoch)
    inner = asyncio.get_running_loop().create_task(asyncio.sleep(10))
    inner.cancel()
    await inner


@app.workflow("exit_step")
def exit_step(ctx: Any, spec: dict[str, Any]) -> None:
    """A step, then one raising SystemExit: the execution must end error (StepFailed)."""
    owner, epoch = claim_of(ctx)
    ctx.step("s0", side_effect, ctx.execution_id, "s0", owner, epoch, 10)
    ctx.step("boom", exits, ctx.execution_id, owner, epoch)


@app.workflow("cancelled_step")
async def cancelled_step(ctx: Any, spec: dict[str, Any]) -> None:
    """A step, then a coroutine step raising CancelledError: the execution must end error."""
    owner, epoch = claim_of(ctx)
    await ctx.step("s0", side_effect, ctx.execution_id, "s0", owner, epoch, 10)
    await ctx.step("boom", cancelled_inside, ctx.execution_id, owner, epoch)


# What each workflow but the chains and fan-outs must end as (the harness's cancels aside).
FAILING = {"deadline": "timed out", "exit_step": "boom", "cancelled_step": "boom"}


TICK_SCHEDULE = "chaos-tick"


@app.schedule("* * * * * *", name=TICK_SCHEDULE, catch_up=True)
def tick(ctx: Any, input: dict[str, Any]) -> str:
    """Enqueued by every worker's scheduler at each second: one run per tick, whatever the chaos
    (catch_up: ticks missed during an outage are enqueued after it, so none is skipped)."""
    return input["scheduled_at"]


def effect_steps(spec: dict[str, Any]) -> list[str]:
    """The steps of an execution of ``spec`` that leave a side effect, in the order of its
    output's nonces (a ``fan`` spec is the async fan-out, else a chain)."""
    if spec.get("expect"):  # a workflow of FAILING: no output to compare
        return []
    if "fan" in spec:
        return [f"f{i}" for i in range(spec["fan"])] + ["after"]
    return [f"s{i}" for i in range(spec["steps"])]


def expected_steps(spec: dict[str, Any]) -> set[str]:
    """Every checkpoint an execution of ``spec`` must end with."""
    steps = set(effect_steps(spec))
    if "fan" in spec:
        return steps | {"nap"}
    if spec.get("nap"):
        steps.add("nap")
    if spec.get("gate") and spec["steps"] >= 2:
        steps.add("gate")
    return steps


def stop_when_orphaned(interval: float = 0.5) -> None:
    """Stop this worker, as SIGTERM does, once the process that started it is gone. A run
    killed outright (``pytest -x`` stopping xdist, Ctrl-C) runs no teardown: its workers went
    on polling the private server it had also left running, for as long as the machine ran."""
    # The harness says who it is: by the time this runs it may be gone already.
    parent = int(os.environ.get("KESTREL_CHAOS_PARENT") or os.getppid())

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="orphan-watch", daemon=True).start()


def main() -> None:
    worker_main(app, __doc__, prepare=stop_when_orphaned, concurrency=4, lease=4.0, poll=0.3, grace=2)


if __name__ == "__main__":
    main()
