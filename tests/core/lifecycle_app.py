"""The app of the model-based lifecycle test (tests/core/test_lifecycle_model.py), run in worker
processes: ``python -m tests.core.lifecycle_app --worker-id w1 --lease 3`` ($KESTREL_DSN).

Every real run of a step INSERTs one ``public.lifecycle_ledger`` row first thing, on a
connection of its own (outside the engine's writes), naming the claim it ran under (worker
id, claim epoch): the ledger shows every time a step really ran. ``LEDGER_DDL`` also installs a
trigger that records every change of an execution's status or claim with the time it was
written (``public.lifecycle_transitions``), from which the test reads when each claim ended.

A worker can be told to freeze itself (SIGSTOP) at its next claim that takes rows, after the
claim statement ran and before its transaction commits: the test creates the file
``$LIFECYCLE_CONTROL/<worker id>.freeze-at-claim`` (consumed when it fires). If the claim runs
in no transaction of its own, the worker freezes right after it returns, before running what
it claimed.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import psycopg

from kestrel_core import Kestrel
from tests.worker_processes import worker_main

LEDGER_DDL = """
CREATE TABLE IF NOT EXISTS public.lifecycle_ledger (
    id           bigserial PRIMARY KEY,
    execution_id bigint NOT NULL,
    step_id      text   NOT NULL,
    owner_id     text   NOT NULL,
    claim_epoch  bigint NOT NULL,
    pid          integer NOT NULL,
    started      float8 NOT NULL,  -- the step function's first line (time.time()), before any connect
    at           timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE IF NOT EXISTS public.lifecycle_transitions (
    id           bigserial PRIMARY KEY,
    execution_id bigint NOT NULL,
    old_status   text, new_status text,
    old_owner    text, new_owner text,
    old_epoch    bigint, new_epoch bigint,
    at           timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE OR REPLACE FUNCTION public.lifecycle_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.lifecycle_transitions
           (execution_id, old_status, new_status, old_owner, new_owner, old_epoch, new_epoch)
    VALUES (NEW.id, OLD.status, NEW.status, OLD.owner_id, NEW.owner_id, OLD.claim_epoch, NEW.claim_epoch);
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS lifecycle_transitions ON kestrel.workflow_executions;
CREATE TRIGGER lifecycle_transitions AFTER UPDATE ON kestrel.workflow_executions FOR EACH ROW
  WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.claim_epoch IS DISTINCT FROM NEW.claim_epoch
        OR OLD.owner_id IS DISTINCT FROM NEW.owner_id)
  EXECUTE FUNCTION public.lifecycle_transition();
"""
RECORD = """
INSERT INTO public.lifecycle_ledger (execution_id, step_id, owner_id, claim_epoch, pid, started)
VALUES (%s, %s, %s, %s, %s, %s)
"""
# The rows the claim's transaction took (its own uncommitted writes).
CLAIMED_HERE = """
SELECT count(*) FROM kestrel.workflow_executions
 WHERE status = 'running' AND owner_id = %s AND xmin = xid(pg_current_xact_id_if_assigned())
"""

app = Kestrel()
# A workflow deadline shorter than the work its code does before its first step.
TIMED_OUT_S = 1.0

_local = threading.local()


def _ledger() -> psycopg.Connection:
    conn = getattr(_local, "conn", None)
    if conn is None or conn.closed:
        conn = _local.conn = psycopg.connect(app.dsn, autocommit=True, application_name="lifecycle-ledger")
    return conn


def record(execution_id: int, step_id: str, owner: str, epoch: int, started: float | None = None) -> None:
    """The side effect: one ledger row per real run of a step, with when the step began (a
    freeze while the row's connection opens must not make the step look late)."""
    started = time.time() if started is None else started
    _ledger().execute(RECORD, (execution_id, step_id, owner, epoch, os.getpid(), started))


def effect(execution_id: int, step_id: str, owner: str, epoch: int, work_ms: int) -> str:
    record(execution_id, step_id, owner, epoch, time.time())
    time.sleep(work_ms / 1000)
    return f"{step_id}@{epoch}"


async def cancelled_inside(execution_id: int, step_id: str, owner: str, epoch: int) -> None:
    """A coroutine step that raises CancelledError (a cancelled inner task of a client library)."""
    await asyncio.to_thread(record, execution_id, step_id, owner, epoch, time.time())
    inner = asyncio.get_running_loop().create_task(asyncio.sleep(10))
    inner.cancel()
    await inner


def exits(execution_id: int, step_id: str, owner: str, epoch: int) -> None:
    """A step that raises SystemExit (a library calling sys.exit)."""
    record(execution_id, step_id, owner, epoch, time.time())
    raise SystemExit(3)


def _steps(ctx: Any, spec: dict[str, Any]) -> list[str]:
    owner, epoch = ctx.worker_id, ctx.claim_epoch
    time.sleep(spec.get("pre_ms", 0) / 1000)  # workflow code before the first step
    done = []
    for i in range(spec["steps"]):
        done.append(ctx.step(f"s{i}", effect, ctx.execution_id, f"s{i}", owner, epoch, spec["work_ms"]))
        if i == 0 and spec.get("gate"):
            decision = ctx.wait_for_approval("gate")
            done.append("approved" if decision.approved else f"rejected by {decision.by}")
        if i == 0 and spec.get("event"):
            done.append(ctx.wait_for_event(spec["event"]).payload)
    return done


@app.workflow("chain")
def chain(ctx: Any, spec: dict[str, Any]) -> list[str]:
    """``spec``: steps, work_ms, pre_ms (workflow code before the first step), gate (an
    approval after s0), event (a key waited for after s0)."""
    return _steps(ctx, spec)


@app.workflow("timed", timeout=TIMED_OUT_S)
def timed(ctx: Any, spec: dict[str, Any]) -> list[str]:
    """A chain whose deadline passes before its first step (``pre_ms`` > TIMED_OUT_S)."""
    return _steps(ctx, spec)


@app.workflow("events2")
async def events2(ctx: Any, spec: dict[str, Any]) -> list[Any]:
    """One step, then two waits on one key gathered: each must receive its own event."""
    await ctx.step("s0", effect, ctx.execution_id, "s0", ctx.worker_id, ctx.claim_epoch, spec["work_ms"])
    got = await asyncio.gather(ctx.wait_for_event(spec["event"]), ctx.wait_for_event(spec["event"]))
    return sorted(e.payload for e in got)


@app.workflow("cancelled_step")
async def cancelled_step(ctx: Any, spec: dict[str, Any]) -> None:
    await ctx.step("s0", cancelled_inside, ctx.execution_id, "s0", ctx.worker_id, ctx.claim_epoch)


@app.workflow("exit_step")
def exit_step(ctx: Any, spec: dict[str, Any]) -> None:
    ctx.step("s0", exits, ctx.execution_id, "s0", ctx.worker_id, ctx.claim_epoch)


# -- freezing at a claim ------------------------------------------------------------------------


def _freeze_flag(worker_id: str) -> Path | None:
    control = os.environ.get("LIFECYCLE_CONTROL")
    return Path(control) / f"{worker_id}.freeze-at-claim" if control else None


def _freeze_if_asked(worker_id: str) -> bool:
    flag = _freeze_flag(worker_id)
    if flag is None or not flag.exists():
        return False
    flag.unlink(missing_ok=True)
    logging.getLogger("kestrel.lifecycle").warning("event=freezing_at_claim worker=%s", worker_id)
    os.kill(os.getpid(), signal.SIGSTOP)
    return True


class _FreezingTransaction:
    """``conn.transaction()`` of a claim: before it commits, freeze if asked and it took rows."""

    def __init__(self, conn: psycopg.Connection, inner: Any, worker_id: str, fired: list[bool]) -> None:
        self._conn, self._inner, self._worker_id, self._fired = conn, inner, worker_id, fired

    def __enter__(self) -> Any:
        return self._inner.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        flag = _freeze_flag(self._worker_id)
        if exc[0] is None and not self._fired[0] and flag is not None and flag.exists():
            took = self._conn.execute(CLAIMED_HERE, (self._worker_id,)).fetchone()
            if took and took[0]:
                self._fired[0] = _freeze_if_asked(self._worker_id)
        return self._inner.__exit__(*exc)


class _ClaimConnection:
    """The claim's connection, its transactions made ``_FreezingTransaction``s."""

    def __init__(self, conn: psycopg.Connection, worker_id: str, fired: list[bool]) -> None:
        self._conn, self._worker_id, self._fired = conn, worker_id, fired

    def transaction(self, *args: Any, **kwargs: Any) -> _FreezingTransaction:
        return _FreezingTransaction(self._conn, self._conn.transaction(*args, **kwargs), self._worker_id, self._fired)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def install_freeze_hook() -> None:
    """Wrap the worker's claim so that it freezes where the test asks (module docstring)."""
    from kestrel_core.dispatch import claim as claim_mod

    original = claim_mod.claim_batch

    @functools.wraps(original)
    def claim_batch(conn: psycopg.Connection, *args: Any, **kwargs: Any) -> Any:
        worker_id = kwargs["worker_id"]
        fired = [False]
        result = original(_ClaimConnection(conn, worker_id, fired), *args, **kwargs)
        if not fired[0] and result[0]:
            _freeze_if_asked(worker_id)  # a claim with no transaction of its own
        return result

    claim_mod.claim_batch = claim_batch  # type: ignore[assignment]


def main() -> None:
    worker_main(app, __doc__, prepare=install_freeze_hook, concurrency=3, lease=3.0, poll=0.2, grace=1)


if __name__ == "__main__":
    main()
