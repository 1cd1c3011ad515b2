"""One lock never costs a worker its leases (issue 43, break 5).

The heartbeat locked every running row of its worker in one statement, waiting for any lock
another session held: an operator's ``SELECT ... FOR UPDATE`` of one execution for 4 s
stalled it (and the sweeps and ticks of the same loop), the worker's other executions were
swept and their in-flight steps ran twice elsewhere. Now the heartbeat skips a locked row (and
says so, so that the sweep leaves it to its live worker), and every maintenance duty has its
own thread: a sweep or a tick stuck on a lock delays no heartbeat.
"""

from __future__ import annotations

import time
from datetime import timedelta

import psycopg
from psycopg import sql

from kestrel_core import Kestrel
from tests.core.conftest import ledger_rows
from tests.waiting import wait_for

LEASE = timedelta(seconds=2)
EXECUTIONS = 6
HOLD_S = 2 * LEASE.total_seconds()  # the outside lock: twice the lease


def slow_workflow(app: Kestrel, dsn: str, step_s: float) -> None:
    def work(execution_id: int) -> str:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("INSERT INTO public.ledger (execution_id, step_id) VALUES (%s, 's')", (execution_id,))
        end = time.monotonic() + step_s
        while time.monotonic() < end:
            time.sleep(0.05)
        return "done"

    @app.workflow("slow")
    def slow(ctx, _input):
        return ctx.step("s", work, ctx.execution_id)


def all_running_with_steps_started(db: psycopg.Connection, ids: list[int], owner: str) -> bool:
    running = db.execute(
        "SELECT count(*) FROM workflow_executions WHERE id = ANY(%s) AND status = 'running' AND owner_id = %s",
        (ids, owner),
    ).fetchone()[0]
    started = db.execute("SELECT count(DISTINCT execution_id) FROM public.ledger").fetchone()[0]
    return running == len(ids) and started == len(ids)


def running_on_a(app: Kestrel, db: psycopg.Connection, dsn: str, start_worker) -> list[int]:
    """EXECUTIONS slow executions, every one running its step on worker a; their ids."""
    slow_workflow(app, dsn, step_s=HOLD_S + 3)
    start_worker(app, worker_id="a", concurrency=EXECUTIONS, lease=LEASE)
    ids = app.enqueue_many("slow", list(range(EXECUTIONS)))
    wait_for(lambda: all_running_with_steps_started(db, ids, "a"), timeout=30, what="every step running on a")
    return ids


def ids_seen_for(db: psycopg.Connection, seconds: float, query: str, params: tuple) -> set[int]:
    """Every id ``query`` returned, read every 0.1 s for ``seconds``."""
    seen: set[int] = set()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        seen |= {row[0] for row in db.execute(query, params)}
        time.sleep(0.1)
    return seen


def test_an_outside_row_lock_on_one_execution_costs_its_worker_no_other_lease(
    app: Kestrel, db: psycopg.Connection, dsn: str, ledger: psycopg.Connection, start_worker
) -> None:
    ids = running_on_a(app, db, dsn, start_worker)
    epochs = dict(db.execute("SELECT id, claim_epoch FROM workflow_executions WHERE id = ANY(%s)", (ids,)).fetchall())
    start_worker(app, worker_id="b", concurrency=EXECUTIONS, lease=LEASE)  # sweeps, and would take them
    with psycopg.connect(dsn) as operator:
        operator.execute("SELECT 1 FROM kestrel.workflow_executions WHERE id = %s FOR UPDATE", (ids[0],))
        # The fault itself: an operator holding the lock for HOLD_S.
        lapsed = ids_seen_for(
            db,
            HOLD_S,
            "SELECT id FROM workflow_executions WHERE id = ANY(%s) AND id <> %s"
            " AND (status <> 'running' OR owner_id <> 'a' OR lease_expires < now())",
            (ids, ids[0]),
        )
        operator.rollback()
    assert lapsed == set(), f"leases of a's other executions lapsed or were taken while one row was locked: {lapsed}"
    wait_for(
        lambda: db.execute(
            "SELECT count(*) = %s FROM workflow_executions WHERE id = ANY(%s) AND status = 'success'", (len(ids), ids)
        ).fetchone()[0],
        timeout=30,
        what="every execution to succeed",
    )
    # Nothing swept, nothing reclaimed, no step run twice: not even the locked execution's,
    # whose lease lapsed under the lock and was renewed once the lock was gone.
    assert (
        dict(db.execute("SELECT id, claim_epoch FROM workflow_executions WHERE id = ANY(%s)", (ids,)).fetchall())
        == epochs
    )
    assert sorted(e for e, _ in ledger_rows(ledger)) == sorted(ids)


def test_a_sweep_or_tick_stuck_on_a_lock_delays_no_heartbeat(
    app: Kestrel, db: psycopg.Connection, dsn: str, ledger: psycopg.Connection, start_worker
) -> None:
    ids = running_on_a(app, db, dsn, start_worker)
    with psycopg.connect(dsn) as operator:
        # The schedules' tick and the waits' sweep now wait for these locks.
        operator.execute("LOCK TABLE kestrel.schedules, kestrel.workflow_waits IN ACCESS EXCLUSIVE MODE")
        lapsed = ids_seen_for(
            db, HOLD_S, "SELECT id FROM workflow_executions WHERE id = ANY(%s) AND lease_expires < now()", (ids,)
        )
        operator.rollback()
    assert lapsed == set(), f"leases lapsed while a tick and a sweep waited on a lock: {lapsed}"


def test_the_heartbeat_gives_up_on_a_partition_lock_after_its_bound(
    app: Kestrel, db: psycopg.Connection, dsn: str, ledger: psycopg.Connection, start_worker, caplog
) -> None:
    """The heartbeat's session sets lock_timeout (a tenth of the lease): it gives up on a lock
    it cannot skip (an ACCESS EXCLUSIVE lock on a partition: a drop or a detach) and tries again
    soon, rather than wait as long as the lock is held. Through PgBouncer a session setting does
    not hold (transaction pooling): the bound was missing there, and the heartbeat waited for
    the whole lock."""
    slow_workflow(app, dsn, step_s=HOLD_S + 3)
    start_worker(app, worker_id="a", concurrency=1, lease=LEASE)
    (eid,) = app.enqueue_many("slow", [0])
    wait_for(lambda: all_running_with_steps_started(db, [eid], "a"), timeout=30, what="the step running on a")
    (partition,) = db.execute(
        "SELECT tableoid::regclass::text FROM workflow_executions WHERE id = %s", (eid,)
    ).fetchone()
    partition = sql.Identifier("kestrel", partition.rsplit(".", 1)[-1])
    caplog.clear()
    with psycopg.connect(dsn) as locker:
        locker.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(partition))
        locked_at = time.monotonic()
        # Within the lock bound (a tenth of the lease) after a beat (a third of the lease), plus room.
        wait_for(
            lambda: any(
                "event=heartbeat_failed" in r.getMessage() and "lock" in r.getMessage() for r in caplog.records
            ),
            timeout=HOLD_S,
            what="the heartbeat to give up on the partition lock",
        )
        gave_up_after = time.monotonic() - locked_at
        locker.rollback()
    assert gave_up_after < LEASE.total_seconds(), f"the heartbeat waited {gave_up_after:.2f} s on the lock"
