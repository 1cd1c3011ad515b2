"""Adversarial review 45b of the stop's release (dispatch/lease.sql ``release``), the limited
claim's locks (limited_claim.sql) and their promises in docs/guarantees.md ("One lock never
costs a worker its leases ... a stopping worker's release skips a running one, which then waits
out its lease and is swept, while the others go back at once"; "Recovery from a dead or frozen
worker").

The release now picks its rows by ``ctid = ANY(ARRAY(SELECT ctid ... FOR NO KEY UPDATE SKIP
LOCKED))``. ``workflow_executions`` is partitioned by id range (migration 0022), and a ctid is a
position *within one partition*: the same ctid names a row in every partition. So the outer
UPDATE also hits the rows at the same positions of every other range: ``let_go`` (no other
condition) clears their leases (or, as the worker role, is refused on a finished one), and
``handed_back`` waits for the very row its SKIP LOCKED skipped when another of the worker's rows
sits at its position in another range.

Real PostgreSQL; the release is the statement a worker's stop runs (lease.release_all), with
the stop's 2 s lock bound, and once through a real worker's stop."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from kestrel_core import Kestrel
from kestrel_core.dispatch import lease as lease_mod
from kestrel_core.dispatch import sweeper
from kestrel_core.engine.worker import RELEASE_LOCK_MS
from tests.waiting import wait_for

S = "kestrel"


def restart_ids(db: psycopg.Connection, at: int) -> None:
    db.execute(f"ALTER TABLE workflow_executions ALTER COLUMN id RESTART WITH {int(at)}")


def two_ranges(app: Kestrel, db: psycopg.Connection, name: str, n: int) -> tuple[list[int], list[int]]:
    """``n`` executions of ``name`` in the first id range (partition A) and ``n`` in the next
    (partition B): the same history, so their rows sit at the same positions (ctids)."""
    los = [lo for (lo,) in db.execute("SELECT lo FROM history_partitions ORDER BY lo")]
    assert len(los) >= 2, los
    # fresh pages in both ranges (the reset between tests deletes, leaving earlier tests' space)
    db.execute("TRUNCATE workflow_executions CASCADE")
    restart_ids(db, 1)
    first = app.enqueue_many(name, list(range(n)))
    restart_ids(db, los[1] + 1)
    second = app.enqueue_many(name, list(range(n)))
    assert all(i < los[1] for i in first) and all(i >= los[1] for i in second)
    return first, second


def ctids(db: psycopg.Connection, ids: list[int]) -> dict[int, str]:
    return {
        eid: str(tid) for eid, tid in db.execute("SELECT id, ctid FROM workflow_executions WHERE id = ANY(%s)", (ids,))
    }


def set_rows(db: psycopg.Connection, ids: list[int], assignments: str) -> None:
    """Move ``ids`` to a state as the schema's owner would (the guards let it through)."""
    db.execute(f"UPDATE workflow_executions SET {assignments} WHERE id = ANY(%s)", (ids,))


# -- 1. let_go reaches the rows at the same positions of another range -----------------------


def test_a_stops_release_leaves_a_dead_workers_leases_in_another_range_alone(
    app: Kestrel, db: psycopg.Connection, dsn: str
) -> None:
    """Attack: worker w1 stops while it holds paused executions (paused by an operator with their
    step in flight: the lease still set) in the first id range; a dead worker ("ghost") left
    running executions with lapsed leases in the next range, awaiting the lease sweep. The
    release must clear w1's paused leases only. Broke: it cleared the ghost's leases at the same
    ctids, and a running execution with no lease is never swept (``lease_expires < now()``):
    running, forever."""
    mine, ghosts = two_ranges(app, db, "nobody-runs-this", 20)
    set_rows(
        db,
        mine,
        "status = 'paused', owner_id = 'w1', claim_epoch = 1, claims = 1, started_at = now(),"
        " lease_expires = now() + interval '30 seconds'",
    )
    set_rows(
        db,
        ghosts,
        "status = 'running', owner_id = 'ghost', claim_epoch = 1, claims = 1, started_at = now(),"
        " lease_expires = now() - interval '1 second'",
    )
    shared = set(ctids(db, mine).values()) & set(ctids(db, ghosts).values())
    assert shared, "setup: rows at the same positions of the two ranges"
    with psycopg.connect(dsn, autocommit=True) as conn:
        lease_mod.release_all(conn, S, "w1", lock_timeout_ms=RELEASE_LOCK_MS)
    (paused_leases,) = db.execute(
        "SELECT count(*) FROM workflow_executions WHERE id = ANY(%s) AND lease_expires IS NOT NULL", (mine,)
    ).fetchone()
    assert paused_leases == 0  # w1 let go of its paused executions
    cleared = [
        eid
        for (eid,) in db.execute(
            "SELECT id FROM workflow_executions WHERE id = ANY(%s) AND lease_expires IS NULL", (ghosts,)
        )
    ]
    swept = set(sweeper.LeaseSweep().run(db, S))
    stranded = [
        eid
        for (eid,) in db.execute(
            "SELECT id FROM workflow_executions WHERE id = ANY(%s) AND status = 'running'", (ghosts,)
        )
    ]
    print(f"ghost leases cleared by w1's release: {len(cleared)} of {len(ghosts)}; swept {len(swept)}")
    assert not cleared, f"w1's release cleared the lease of another worker's executions {cleared}"
    assert not stranded, f"never swept, running forever: {stranded}"


@pytest.mark.parametrize(
    "victim",
    [
        "status = 'success', owner_id = NULL, finished_at = now(), output = '1'::jsonb",
        "status = 'waiting', owner_id = NULL",
    ],
    ids=["finished", "waiting"],
)
def test_a_worker_logins_release_is_not_refused_for_a_finished_row_in_another_range(
    app: Kestrel, db: psycopg.Connection, dsn: str, victim: str
) -> None:
    """Attack: the same stop as a ``kestrel_worker`` login (the engine's own role), the next range
    holding finished (or waiting: a sleep) executions. The release must let go of w1's paused executions. Broke: its
    UPDATE reached the finished rows at the same ctids and the 'finished' guard refused the whole
    statement (``permission denied to change the finished execution``): nothing released, and
    the worker's stop, which catches only OperationalError, raised."""
    mine, done = two_ranges(app, db, "nobody-runs-this", 20)
    set_rows(
        db,
        mine,
        "status = 'paused', owner_id = 'w1', claim_epoch = 1, claims = 1, started_at = now(),"
        " lease_expires = now() + interval '30 seconds'",
    )
    set_rows(
        db,
        done,
        victim + ", claim_epoch = 1, claims = 1, started_at = now()",
    )
    assert set(ctids(db, mine).values()) & set(ctids(db, done).values()), "setup: shared positions"
    with psycopg.connect(dsn, autocommit=True, options="-c role=kestrel_worker") as conn:
        assert conn.execute("SELECT current_user").fetchone()[0] == "kestrel_worker"
        try:
            lease_mod.release_all(conn, S, "w1", lock_timeout_ms=RELEASE_LOCK_MS)
            error = None
        except psycopg.Error as exc:
            error = exc
    assert error is None, f"the worker role's release failed: {type(error).__name__}: {error}"
    (held,) = db.execute(
        "SELECT count(*) FROM workflow_executions WHERE id = ANY(%s) AND lease_expires IS NOT NULL", (mine,)
    ).fetchone()
    assert held == 0


def test_a_real_stop_with_a_paused_step_in_flight_leaves_another_workers_leases_alone(
    app: Kestrel, db: psycopg.Connection, dsn: str, start_worker
) -> None:
    """The same through a real worker: w1 runs a step, an operator pauses the execution (the
    step in flight keeps the claim and its lease), w1 is stopped (grace 0). The next id range
    holds another worker's running executions (live leases, an hour ahead). Promised: w1's
    release lets go of its own paused execution only. Broke: it cleared the lease of the other
    worker's execution at the same position: should that worker die, that execution is never
    swept (a NULL lease never lapses)."""
    release = threading.Event()

    @app.workflow("hold")
    def hold(ctx, _input):
        ctx.step("wait", lambda: release.wait(60))
        return 1

    los = [lo for (lo,) in db.execute("SELECT lo FROM history_partitions ORDER BY lo")]
    db.execute("TRUNCATE workflow_executions CASCADE")  # fresh pages (see two_ranges)
    restart_ids(db, 1)
    eid = app.enqueue("hold")
    w1 = start_worker(app, worker_id="w1", concurrency=1, lease=timedelta(seconds=60))
    try:
        wait_for(
            lambda: db.execute("SELECT count(*) FROM step_attempts WHERE execution_id = %s", (eid,)).fetchone()[0],
            what="the step in flight",
        )
        app.pause(eid, by="op")
        assert app.get(eid).status == "paused"
        restart_ids(db, los[1] + 1)
        db.execute(
            "INSERT INTO workflow_executions (workflow_name, status, owner_id, claim_epoch, claims, started_at,"
            " lease_expires) SELECT 'elsewhere', 'running', 'w2', 1, 1, now(), now() + interval '1 hour'"
            " FROM generate_series(1, 400)"
        )
        (tid,) = db.execute("SELECT ctid::text FROM workflow_executions WHERE id = %s", (eid,)).fetchone()
        (collides,) = db.execute(
            "SELECT count(*) FROM workflow_executions WHERE owner_id = 'w2' AND ctid = %s::tid", (tid,)
        ).fetchone()
        assert collides, f"setup: a row of w2 at {tid} in the other range"
        w1.stop(grace=timedelta(0))
        (lease,) = db.execute("SELECT lease_expires FROM workflow_executions WHERE id = %s", (eid,)).fetchone()
        assert lease is None  # w1 let go of its paused execution
        cleared = [
            i
            for (i,) in db.execute("SELECT id FROM workflow_executions WHERE owner_id = 'w2' AND lease_expires IS NULL")
        ]
        assert not cleared, f"w1's stop cleared the lease of w2's running executions {cleared}"
    finally:
        release.set()


def test_a_real_stop_as_the_worker_role_with_a_paused_step_in_flight_releases_and_retires(
    app: Kestrel, db: psycopg.Connection, dsn: str, start_worker
) -> None:
    """As above, the worker logged in as the engine's role (``kestrel_worker``) and the next
    range holding finished executions (any database with history). Promised: the stop releases
    (lets go of the paused execution) and retires. Broke: the release was refused by the
    'finished' guard on a row of the other range, an InsufficientPrivilege the stop does not
    catch (it catches OperationalError): stop() raised, the worker was never retired (and the
    fixture's stop at teardown raises again: an ERROR in teardown is the same break)."""
    release = threading.Event()

    def register(on: Kestrel) -> None:
        @on.workflow("hold")
        def hold(ctx, _input):
            ctx.step("wait", lambda: release.wait(60))
            return 1

    register(app)
    los = [lo for (lo,) in db.execute("SELECT lo FROM history_partitions ORDER BY lo")]
    db.execute("TRUNCATE workflow_executions CASCADE")
    restart_ids(db, 1)
    eid = app.enqueue("hold")
    engine = Kestrel(make_conninfo(dsn, options="-c role=kestrel_worker"))
    register(engine)
    try:
        w1 = start_worker(engine, worker_id="w1", concurrency=1, lease=timedelta(seconds=60))
        wait_for(
            lambda: db.execute("SELECT count(*) FROM step_attempts WHERE execution_id = %s", (eid,)).fetchone()[0],
            what="the step in flight",
        )
        app.pause(eid, by="op")
        restart_ids(db, los[1] + 1)
        db.execute(
            "INSERT INTO workflow_executions (workflow_name, status, claim_epoch, claims, started_at, finished_at,"
            " output) SELECT 'history', 'success', 1, 1, now(), now(), '1'::jsonb FROM generate_series(1, 400)"
        )
        (tid,) = db.execute("SELECT ctid::text FROM workflow_executions WHERE id = %s", (eid,)).fetchone()
        assert db.execute(
            "SELECT count(*) FROM workflow_executions WHERE workflow_name = 'history' AND ctid = %s::tid", (tid,)
        ).fetchone()[0], f"setup: a finished row at {tid} in the other range"
        try:
            w1.stop(grace=timedelta(0))
            error = None
        except Exception as exc:
            error = exc
        assert error is None, f"the stop raised {type(error).__name__}: {error}"
        (lease,) = db.execute("SELECT lease_expires FROM workflow_executions WHERE id = %s", (eid,)).fetchone()
        (retired,) = db.execute("SELECT stopped_at IS NOT NULL FROM workers WHERE worker_id = 'w1'").fetchone()
        assert lease is None and retired
    finally:
        release.set()
        engine.close()


# -- 2. handed_back waits for the row its SKIP LOCKED skipped -----------------------------------


def test_one_locked_execution_in_another_range_does_not_hold_back_the_release(
    app: Kestrel, db: psycopg.Connection, dsn: str
) -> None:
    """Attack: w1 runs executions in two id ranges; an operator holds one of them FOR UPDATE (in
    the second range, at a position where w1 also runs one in the first). Promised: the release
    skips the locked one and hands back the others at once. Broke: the UPDATE by ctid matched the
    locked row again (same ctid, other partition), waited 2 s for it and gave up: nothing handed
    back, every lease left to lapse."""
    first, second = two_ranges(app, db, "nobody-runs-this", 20)
    set_rows(
        db,
        first + second,
        "status = 'running', owner_id = 'w1', claim_epoch = 1, claims = 1, started_at = now(),"
        " lease_expires = now() + interval '30 seconds'",
    )
    at_a = {tid: eid for eid, tid in ctids(db, first).items()}
    locked = next(eid for eid, tid in sorted(ctids(db, second).items()) if tid in at_a)
    with psycopg.connect(dsn) as blocker, psycopg.connect(dsn, autocommit=True) as conn:
        blocker.execute("SELECT 1 FROM kestrel.workflow_executions WHERE id = %s FOR UPDATE", (locked,))
        begun = time.monotonic()
        try:
            released = lease_mod.release_all(conn, S, "w1", lock_timeout_ms=RELEASE_LOCK_MS)
            error = None
        except psycopg.Error as exc:
            released, error = [], exc
        took = time.monotonic() - begun
        blocker.rollback()
    print(f"release took {took:.2f} s, handed back {len(released)}, error {error!r}")
    assert error is None, f"the release gave up on the lock it had skipped: {type(error).__name__}: {error}"
    assert sorted(released) == sorted(i for i in first + second if i != locked)


def test_a_real_stop_hands_back_what_is_not_locked_across_ranges(
    app: Kestrel, db: psycopg.Connection, dsn: str, start_worker
) -> None:
    """The same through a real worker's stop: 16 held executions, 8 per range, one locked by an
    operator's FOR UPDATE at a position w1 also holds in the other range. Promised: right after
    the stop the 15 others are enqueued again. Broke: all 15 still running (release gave up)."""
    release = threading.Event()

    @app.workflow("hold")
    def hold(ctx, _input):
        ctx.step("wait", lambda: release.wait(60))
        return 1

    first, second = two_ranges(app, db, "hold", 8)
    ids = first + second
    w1 = start_worker(app, worker_id="w1", concurrency=16, lease=timedelta(seconds=60))
    try:
        wait_for(lambda: all(app.get(i).status == "running" for i in ids), what="16 held on w1")
        wait_for(
            lambda: (
                db.execute(
                    "SELECT count(DISTINCT execution_id) FROM step_attempts WHERE execution_id = ANY(%s)", (ids,)
                ).fetchone()[0]
                == 16
            ),
            what="every step started",
        )
        time.sleep(0.3)
        at_a = set(ctids(db, first).values())
        candidates = [eid for eid, tid in sorted(ctids(db, second).items()) if tid in at_a]
        assert candidates, "setup: rows of w1 at the same positions of the two ranges"
        locked = candidates[0]
        with psycopg.connect(dsn) as blocker:
            blocker.execute("SELECT 1 FROM kestrel.workflow_executions WHERE id = %s FOR UPDATE", (locked,))
            w1.stop(grace=timedelta(0))
            statuses = {i: app.get(i).status for i in ids if i != locked}
            blocker.rollback()
        still = [i for i, s in statuses.items() if s != "enqueued"]
        print(f"after the stop: released={w1.stats['released']}, not handed back: {len(still)}")
        assert not still, f"{len(still)} of 15 unlocked executions left running: {still}"
    finally:
        release.set()


# -- 3. The limited claim: a locked head of a queue of concurrency 1 ------------------------


@pytest.mark.xfail(
    strict=True,
    reason="a known limit (docs/guarantees.md): the limited claim applies a queue's limits before "
    "it locks, so a limit of 1 chooses only the head, and a head another session holds locked "
    "stalls that queue (or key) for as long as the lock is held (as before this change)",
)
@pytest.mark.parametrize("limit", ["concurrency", "per_key"])
def test_a_limited_queue_runs_past_a_locked_head_when_its_limit_is_one(
    app: Kestrel, db: psycopg.Connection, dsn: str, start_worker, limit: str
) -> None:
    """Attack: a queue whose limit is one (concurrency=1; per_key=1 with one key), nothing
    running; an operator holds its first execution FOR UPDATE. Promised: a claim skips an
    execution so locked (limited_claim.sql: "the few more stand in for rows the next step skips
    as locked"); the second is allowed by the limit (nothing runs) and should run. Broke: the
    queue runs nothing for as long as the lock is held (the rows the limit allows are chosen
    before the locks are tried: ``nth_of_queue <= room.free`` / ``nth_of_key``, so the "few
    more" never include the second). Not a regression of this change: fails at 2b0a72d too."""

    @app.workflow("w")
    def w(ctx, _input):
        return 1

    if limit == "concurrency":
        app.queue("one", concurrency=1)
        ids = [app.enqueue("w", queue="one", priority=10 - i) for i in range(3)]
    else:
        app.queue("one", per_key=1)
        ids = [app.enqueue("w", queue="one", concurrency_key="k", priority=10 - i) for i in range(3)]
    with psycopg.connect(dsn) as blocker:
        blocker.execute("SELECT 1 FROM kestrel.workflow_executions WHERE id = %s FOR UPDATE", (ids[0],))
        start_worker(app, worker_id="lim", concurrency=2)
        try:
            wait_for(
                lambda: all(app.get(i).status == "success" for i in ids[1:]),
                timeout=8,
                what="the two unlocked executions run while the head is locked",
            )
        finally:
            blocker.rollback()
