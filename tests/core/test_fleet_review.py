"""Adversarial review of the fleet turns (kestrel_core/engine/fleet.py), the PL/pgSQL waits
sweep, the stop's cancel and release, and the limited claim's locks after its limit
(docs/scale.md "Hundreds of workers", docs/guarantees.md's recovery row).

Real PostgreSQL and real workers. Rows of ``workers`` written by the test stand for workers
that beat and count in the fleet but take no turn at what is measured: a peer whose every slot
is taken (it never polls). Each break the review found (polls shared among peers that do not
poll; draining workers counted but taking no turn; the limited claim's limit spent on a locked
row) failed here before its fix."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from kestrel_core import Kestrel
from kestrel_core.db.migrate import function_files
from kestrel_core.dispatch.buckets import Claims
from kestrel_core.engine.fleet import SHARE
from tests.core.test_claim_under_outside_locks import (
    FAST_PATHS,
    LIMITED_PATHS,
    LOCKS,
    claimer,
    enqueue_four,
    stop_in_thread,
    take,
)
from tests.core.test_fleet import add_workers
from tests.core.test_pgbouncer import bouncer  # noqa: F401 (fixture)
from tests.waiting import wait_for


def started_late(db: psycopg.Connection, eid: int) -> float:
    """Seconds from when ``eid`` was due (its run_at) to its first claim."""
    row = db.execute(
        "SELECT extract(epoch FROM started_at - run_at) FROM workflow_executions WHERE id = %s", (eid,)
    ).fetchone()
    assert row is not None and row[0] is not None
    return float(row[0])


# -- 1. Fleet sizes at the edge: 8 behaves as before, 9 passes turns ------------------------


def test_a_fleet_of_eight_takes_every_turn_and_of_nine_passes_some(
    app: Kestrel, db: psycopg.Connection, start_worker
) -> None:
    @app.workflow("w")
    def w(ctx, _input):
        ctx.sleep("nap", timedelta(milliseconds=100))
        return 1

    mine = Claims(["w"], [app.workflows["w"].version], None)
    add_workers(db, SHARE - 1, prefix="peer", claims=mine)
    worker = start_worker(app, worker_id="real", sweep_interval=0.05, poll_interval=0.05)
    wait_for(lambda: worker.fleet.size == SHARE, what="a fleet of 8 read")
    # many turns at every duty (sweeps and ticks every 50 ms) while sleeps are woken
    for _ in range(5):
        eid = app.enqueue("w")
        wait_for(lambda: app.get(eid).status == "success", timeout=20, what="a sleep woken")
    assert worker.fleet.size == SHARE and worker.stats["turns_passed"] == 0
    add_workers(db, 1, prefix="ninth", claims=mine)
    wait_for(lambda: worker.fleet.size == SHARE + 1, what="a fleet of 9 read")
    wait_for(lambda: worker.stats["turns_passed"] > 0, what="a turn passed in a fleet of 9")


# -- 2. Polls thinned by peers that do not poll ----------------------------------------------


@pytest.mark.parametrize("how", ["delayed_with_listen", "enqueued_without_listen"])
def test_due_work_is_claimed_within_a_poll_interval_among_busy_peers(
    app: Kestrel, db: psycopg.Connection, start_worker, how: str
) -> None:
    @app.workflow("w")
    def w(ctx, _input):
        return 1

    # every slot taken at their last beat: they do not poll
    add_workers(db, 80, prefix="busy", claims=Claims(["w"], [app.workflows["w"].version], None), free=0)
    listen = how == "delayed_with_listen"
    worker = start_worker(app, worker_id="idle", listen=listen, poll_interval=0.1)
    wait_for(lambda: (worker.fleet.size, worker.fleet.pollers) == (81, 1), what="the fleet read at a heartbeat")
    late = []
    for _ in range(8):
        # idle, in a fleet that shares its sweeps (a turn passed)
        wait_for(lambda: worker.stats["turns_passed"] > 0, what="a sweep's turn passed")
        eid = app.enqueue("w", delay=timedelta(milliseconds=300)) if listen else app.enqueue("w")
        wait_for(lambda: app.get(eid).status == "success", timeout=30, what="the execution run")
        late.append(started_late(db, eid))
    print(f"claimed after due (s): {[round(x, 2) for x in late]}")
    # each poll after 0.08-0.12 s; before the change every idle poll claimed
    assert max(late) < 0.5, f"claimed {max(late):.2f} s after due (poll interval 0.1 s): {late}"


# -- 3. A draining worker counts in the fleet, and takes its turns ---------------------------


def test_draining_workers_leave_no_interval_unswept(dsn: str, db: psycopg.Connection, start_worker) -> None:
    release = threading.Event()
    holders = Kestrel(dsn)

    @holders.workflow("hold")
    def hold(ctx, _input):
        ctx.step("wait", lambda: release.wait(60))
        return 1

    active = Kestrel(dsn)

    @active.workflow("sleepy")
    def sleepy(ctx, _input):
        ctx.sleep("nap", timedelta(milliseconds=100))
        return 1

    stoppers: list[threading.Thread] = []
    try:
        with holders, active:
            # Two real workers that will drain, in a fleet of more than SHARE (the rest stand-in
            # rows, live for the test's length): connections stay within a test's budget.
            add_workers(db, SHARE - 1, prefix="stand-in", claims=None)
            draining = [
                start_worker(holders, worker_id=f"old-{i}", concurrency=1, lease=timedelta(seconds=3)) for i in range(2)
            ]
            ids = [holders.enqueue("hold") for _ in draining]
            wait_for(
                lambda: all(holders.get(i).status == "running" for i in ids),
                timeout=30,
                what="every old worker running a step",
            )
            for old in draining:  # a rolling deploy: each drains what it runs
                stopper = threading.Thread(target=old.stop, kwargs={"grace": timedelta(seconds=60)})
                stopper.start()
                stoppers.append(stopper)
            wait_for(lambda: all(old.draining.is_set() for old in draining), what="the old workers draining")
            taken_before = [old.stats["turns_taken"] for old in draining]
            worker = start_worker(active, worker_id="new", sweep_interval=0.1, lease=timedelta(seconds=3))
            wait_for(lambda: worker.fleet.size == SHARE + 2, timeout=10, what="the draining workers counted")
            # each of them in a fleet of more than SHARE too: it passes some turns, takes others
            wait_for(lambda: all(old.fleet.size > SHARE for old in draining), what="the old ones' fleet read")
            late = []
            for _ in range(5):
                eid = active.enqueue("sleepy")
                wait_for(lambda: active.get(eid).status == "success", timeout=30, what="the sleep woken")
                late.append(
                    db.execute(
                        "SELECT extract(epoch FROM resolved_at - wake_at) FROM workflow_waits WHERE execution_id = %s",
                        (eid,),
                    ).fetchone()[0]
                )
            # A draining worker counts in the fleet, so it must take its turns: before, only its
            # heartbeat went on, and each turn "new" passed was an interval with no sweep or tick.
            wait_for(
                lambda: all(old.stats["turns_taken"] > before for old, before in zip(draining, taken_before)),
                timeout=30,
                what="every draining worker taking turns at the sweeps and ticks",
            )
            assert max(late) < 1, f"sleeps woken late by {late}"
    finally:
        release.set()
        for stopper in stoppers:
            stopper.join(30)


# -- 4. Most of a fleet dies at once: recovery within the documented bound -------------------


def test_a_mass_death_is_recovered_within_lease_over_six_twice_and_a_claim(
    app: Kestrel, db: psycopg.Connection, start_worker
) -> None:
    """40 workers beat for the last time now (lease 2 s), one of them holding an execution
    claimed now: its lease lapses in 2 s; the survivor counts them out after its next beat
    past 1 s. Documented: past expiry, lease/6 + lease/6 + a claim cycle (~0.9 s here)."""

    @app.workflow("w")
    def w(ctx, _input):
        ctx.step("a", lambda: 1)
        return "ran"

    worker = start_worker(app, worker_id="survivor", lease=timedelta(seconds=2), sweep_interval=0.1)
    wait_for(lambda: worker.fleet.size == 1, what="the survivor's first fleet read")
    mine = Claims(["w"], [app.workflows["w"].version], None)
    eid = app.enqueue("w", delay=timedelta(hours=1))  # not claimable: it stands for one the dead claimed
    add_workers(db, 40, prefix="dead", claims=mine, beat="now(), interval '2 seconds'")
    (expires,) = db.execute(
        "UPDATE workflow_executions SET status = 'running', owner_id = 'dead-0', claim_epoch = claim_epoch + 1,"
        " claims = claims + 1, started_at = now(), lease_expires = now() + interval '2 seconds' WHERE id = %s"
        " RETURNING lease_expires",
        (eid,),
    ).fetchone()
    db.execute("DELETE FROM executions_ready WHERE id = %s", (eid,))
    wait_for(lambda: worker.fleet.size == 41, what="the dead counted while they were live")
    wait_for(lambda: app.get(eid).status == "success", timeout=30, what="the dead worker's execution recovered")
    (ran,) = db.execute("SELECT min(started_at) FROM step_attempts WHERE execution_id = %s", (eid,)).fetchone()
    late = (ran - expires).total_seconds()
    print(f"run again {late:.2f} s past the lease's expiry; fleet read now {worker.fleet.size}")
    assert worker.fleet.size == 1
    assert late < 2 / 6 + 2 / 6 + 0.5, f"recovered {late:.2f} s past expiry"


# -- 5. The PL/pgSQL waits sweep against the SQL function it replaced ------------------------


def statement_alone() -> str:
    """The oracle: the waits sweep's function file made a SQL function of its statement alone,
    as it was until schema version 38 (without the early-exit probe, planned on every call).
    Derived, not copied: what the test holds is that the probe and the PL/pgSQL around the
    statement change nothing it does; the statement's own behaviour has its own tests."""
    (text,) = (f.text for f in function_files() if f.name == "sweep_waits")
    head, body = text.split("\nBEGIN\n", 1)
    probe, statement = body.split("\nRETURN QUERY\n", 1)
    assert "IF NOT EXISTS" in probe and "LANGUAGE plpgsql" in head, "sweep_waits.sql changed its form"
    return head.replace("LANGUAGE plpgsql", "LANGUAGE sql") + "\n" + statement.split("\nEND\n$$;", 1)[0] + "\n$$;"


OLD_SWEEP = statement_alone()

SNAPSHOT = {
    "waits": "SELECT execution_id, step_id, kind, resolved_at IS NOT NULL, resolved_at = now(), decision,"
    " decided_at = now() FROM workflow_waits ORDER BY 1, 2",
    "outputs": "SELECT execution_id, step_id, output - 'decided_at', (output ->> 'decided_at')::timestamptz = now()"
    " FROM operation_outputs ORDER BY 1, 2",
    "executions": "SELECT id, status, run_at = now() FROM workflow_executions ORDER BY id",
}


def swept(db: psycopg.Connection, function: str, batch: int, calls: int, locked: tuple[int, str] | None, dsn: str):
    """What ``calls`` calls of ``function`` in one transaction return and leave (rolled back)."""
    with psycopg.connect(dsn) as blocker:
        if locked is not None:
            blocker.execute(
                "SELECT 1 FROM kestrel.workflow_waits WHERE execution_id = %s AND step_id = %s FOR UPDATE", locked
            )
        with db.transaction(force_rollback=True):
            if function == "old":
                body = OLD_SWEEP.replace("{schema}.sweep_waits(", "pg_temp.old_sweep_waits(")
                db.execute(body.replace("{schema}", "kestrel"))
                call = "SELECT id FROM pg_temp.old_sweep_waits(%s) AS id"
            else:
                call = "SELECT id FROM kestrel.sweep_waits(%s) AS id"
            returned = [sorted(r[0] for r in db.execute(call, (batch,)).fetchall()) for _ in range(calls)]
            return returned, {name: db.execute(q).fetchall() for name, q in SNAPSHOT.items()}


def test_the_plpgsql_waits_sweep_does_what_the_sql_function_did(
    app: Kestrel, db: psycopg.Connection, dsn: str, start_worker
) -> None:
    assert "LANGUAGE sql" in OLD_SWEEP
    hour = timedelta(hours=1)

    @app.workflow("sleeper")
    def sleeper(ctx, _input):
        ctx.sleep("nap", hour)
        return 1

    @app.workflow("gate")
    def gate(ctx, timeout):
        return ctx.wait_for_approval("ok", timeout=hour if timeout else None).approved

    @app.workflow("eventer")
    def eventer(ctx, _input):
        return ctx.wait_for_event("never", timeout=hour).timed_out

    @app.workflow("parent")
    def parent(ctx, _input):
        ctx.wait_for(ctx.start_child("sleeper", None), timeout=hour)
        return 1

    ids = [app.enqueue("sleeper") for _ in range(3)]
    ids += [app.enqueue("gate", True), app.enqueue("gate", False), app.enqueue("eventer"), app.enqueue("parent")]
    worker = start_worker(app, worker_id="parker", sweep_interval=3600)
    wait_for(
        lambda: db.execute("SELECT count(*) FROM workflow_executions WHERE status = 'waiting'").fetchone() == (8,),
        timeout=30,
        what="every execution parked",
    )
    worker.stop(grace=timedelta(0))
    # every timed wait due, each at its own time (the sweep takes them in wake_at order)
    db.execute(
        "UPDATE workflow_waits w SET wake_at = now() - interval '1 minute' * n.n"
        " FROM (SELECT execution_id, step_id, row_number() OVER (ORDER BY execution_id, step_id) AS n"
        "       FROM workflow_waits WHERE wake_at IS NOT NULL) n"
        " WHERE w.execution_id = n.execution_id AND w.step_id = n.step_id"
    )
    # a sleep beside the undecided gate (no timeout): it resolves, its execution stays parked
    untimed = ids[4]
    db.execute(
        "INSERT INTO workflow_waits (execution_id, step_id, kind, wake_at) VALUES (%s, 'beside', 'sleep', now())",
        (untimed,),
    )
    due = db.execute("SELECT count(*) FROM workflow_waits WHERE resolved_at IS NULL AND wake_at <= now()").fetchone()
    assert due == (8,)
    first = db.execute("SELECT execution_id, step_id FROM workflow_waits ORDER BY wake_at LIMIT 1").fetchone()
    for batch, calls, locked in [(100, 1, None), (1, 3, None), (3, 4, None), (100, 2, first), (0, 1, None)]:
        old = swept(db, "old", batch, calls, locked, dsn)
        new = swept(db, "new", batch, calls, locked, dsn)
        assert new == old, (batch, calls, locked)
    # the full sweep woke every parked execution but the one of the untimed gate
    returned, state = swept(db, "new", 100, 1, None, dsn)
    assert len(returned[0]) == 7 and untimed not in returned[0]
    # nothing due: the early exit returns nothing, as the statement did
    db.execute("UPDATE workflow_waits SET wake_at = now() + interval '1 hour' WHERE wake_at IS NOT NULL")
    assert swept(db, "new", 100, 1, None, dsn) == swept(db, "old", 100, 1, None, dsn)


def test_the_plpgsql_waits_sweep_keeps_its_privileges(db: psycopg.Connection) -> None:
    row = db.execute(
        "SELECT prosecdef, proconfig, array_to_string(proacl, ',') FROM pg_proc"
        " WHERE oid = 'kestrel.sweep_waits(integer)'::regprocedure"
    ).fetchone()
    assert row is not None
    secdef, config, acl = row
    assert secdef and config == ["search_path=kestrel, pg_temp"]
    assert acl is None or not any(entry.startswith("=") for entry in acl.split(","))  # not PUBLIC's


# -- 6. A stop through PgBouncer whose release meets a table lock ----------------------------


def test_a_stop_through_pgbouncer_gives_up_its_release_on_a_lock_and_retires(
    dsn: str,
    db: psycopg.Connection,
    start_worker,
    bouncer: str,
) -> None:
    through = make_conninfo(bouncer, dbname=conninfo_to_dict(dsn)["dbname"])
    with Kestrel(through, transaction_pooling=True) as app:

        @app.workflow("slow")
        def slow(ctx, _input):
            ctx.step("a", lambda: time.sleep(3))
            return 1

        worker = start_worker(app, worker_id="leaver", concurrency=1, lease=timedelta(seconds=3))
        eid = app.enqueue("slow")
        wait_for(lambda: app.get(eid).status == "running", timeout=20, what="the step running")
        with psycopg.connect(dsn) as blocker:
            blocker.execute("LOCK TABLE kestrel.workflow_executions IN ACCESS EXCLUSIVE MODE")
            began = time.monotonic()
            thread, done = stop_in_thread(worker, grace=0.2)
            stopped = done.wait(20)
            took = time.monotonic() - began
            blocker.rollback()
        thread.join(20)
        assert stopped, "stop did not return within 20 s while the executions table was locked"
        print(f"stop took {took:.1f} s")
        retired = db.execute("SELECT stopped_at IS NOT NULL FROM workers WHERE worker_id = 'leaver'").fetchone()
        assert retired == (True,)
        start_worker(app, worker_id="heir", concurrency=1, lease=timedelta(seconds=3))
        wait_for(lambda: app.get(eid).status == "success", timeout=30, what="the left execution run by another")


# -- 7. The limited claim after its limit ----------------------------------------------------


@pytest.mark.parametrize("path", [p for p in FAST_PATHS if p != "slice"] + LIMITED_PATHS)
def test_a_claim_of_one_takes_the_next_when_the_first_is_locked(
    app: Kestrel, db: psycopg.Connection, dsn: str, path: str
) -> None:
    ids = enqueue_four(app, db, path)
    with claimer(dsn) as conn, psycopg.connect(dsn) as blocker:
        blocker.execute(LOCKS["for_update"], (ids[0],))
        claimed, _ = take(conn, path, n=1)
        assert claimed == [ids[1]]


def test_a_worker_of_one_slot_runs_a_limited_queue_past_a_locked_head(
    app: Kestrel, db: psycopg.Connection, dsn: str, start_worker
) -> None:
    @app.workflow("w")
    def w(ctx, _input):
        return 1

    app.queue("lim", concurrency=10)
    ids = [app.enqueue("w", queue="lim", priority=10 - i) for i in range(4)]
    with psycopg.connect(dsn) as blocker:
        blocker.execute(LOCKS["for_update"], (ids[0],))
        start_worker(app, worker_id="one-slot", concurrency=1)
        wait_for(
            lambda: all(app.get(i).status == "success" for i in ids[1:]),
            timeout=8,
            what="the three unlocked executions run while the head is locked",
        )
