"""A claim under outside locks, and a stop racing it (from an adversarial review).

A claim skips an execution another session holds locked, whatever the lock, the path (fast,
behind the mark, heap slice, limited: concurrency, per worker, rate, keys) and the position; a
stop cancels a claim blocked on a lock, returns promptly and lets nothing commit after it (also
through PgBouncer, and with the executions' table locked); a keyed child lives in its key's
bucket. ``Broke`` names the promise an assertion checks; each one that broke in the review
failed before its fix."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from datetime import timedelta

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from kestrel_core import Kestrel
from kestrel_core.db.statements import render
from kestrel_core.dispatch import claim as claim_mod
from kestrel_core.dispatch import limited_claim
from kestrel_core.dispatch.claim import END_KEY, BehindPass, ClaimMark, claim_batch
from tests.core.test_claim_and_stop_edges import lock_waiters
from tests.core.test_pgbouncer import bouncer  # noqa: F401 (fixture)
from tests.waiting import wait_for

S = "kestrel"
LEASE = timedelta(seconds=30)
WAIT_MS = 1500  # a claim that waits this long for a lock is stalled


class Broke(AssertionError):
    """A promise of the change under review, broken."""


def broke_unless(held: bool, what: str) -> None:
    if not held:
        raise Broke(what)


# -- 1. A claim never waits for a lock on one enqueued execution ----------------------------

FAST_PATHS = ["fast", "behind", "slice"]
LIMITED_PATHS = ["concurrency", "per_worker", "rate", "keyed"]
QUEUE_ROW = {
    "concurrency": "INSERT INTO queues (name, concurrency, declared_at) VALUES ('lim', 10, now())",
    "per_worker": "INSERT INTO queues (name, per_worker, declared_at) VALUES ('lim', 10, now())",
    "rate": "INSERT INTO queues (name, rate_limit, rate_period, declared_at) VALUES ('lim', 10, '1 hour', now())",
}
ROW = "SELECT 1 FROM kestrel.workflow_executions WHERE id = %s"
READY = "SELECT 1 FROM kestrel.executions_ready WHERE id = %s"
LOCKS = {
    "for_update": ROW + " FOR UPDATE",
    "for_no_key_update": ROW + " FOR NO KEY UPDATE",
    "for_share": ROW + " FOR SHARE",
    "for_key_share": ROW + " FOR KEY SHARE",
    "uncommitted_update": "UPDATE kestrel.workflow_executions SET updated_at = now() WHERE id = %s",
    "priority_change": "UPDATE kestrel.workflow_executions SET priority = priority + 100 WHERE id = %s",
    "cancel_under_way": "SELECT kestrel.cancel_execution(%s, 'op', NULL)",
    "pause_under_way": "SELECT kestrel.pause_execution(%s, 'op', NULL)",
    "advisory": "SELECT pg_advisory_xact_lock(%s)",
    "ready_row_for_update": READY + " FOR UPDATE",
    "ready_row_key_share": READY + " FOR KEY SHARE",
}
NO_CONFLICT = {"for_key_share", "advisory"}  # nothing the claim takes conflicts: all are claimed
READY_ONLY = {"ready_row_for_update", "ready_row_key_share"}


def enqueue_four(app: Kestrel, db: psycopg.Connection, path: str) -> list[int]:
    """Four due executions for ``path``, in claim order."""
    if path in QUEUE_ROW:
        db.execute(QUEUE_ROW[path])
    options: Callable[[int], dict] = {
        "keyed": lambda i: {"concurrency_key": f"k{i}"},
        **{p: (lambda i: {"queue": "lim"}) for p in QUEUE_ROW},
    }.get(path, lambda i: {})
    return [app.enqueue("w", i, priority=10 - i, **options(i)) for i in range(4)]


def take(conn: psycopg.Connection, path: str, n: int = 10) -> tuple[list[int], bool]:
    """Claim by ``path`` alone: the walk from the start, the look behind a mark past every row,
    a slice of the heap (the only walk while a whole pass is under way), or the limited claim."""
    mark = None
    if path == "behind":
        mark = ClaimMark(key=END_KEY)
    elif path == "slice":
        mark = ClaimMark(key=END_KEY, slices=BehindPass(blocks=8, whole=True))
    claims, limited = claim_batch(
        conn, S, worker_id="r", names=["w"], n=n, lease=LEASE, mark=mark, check_limited=path in LIMITED_PATHS
    )
    return [c.execution_id for c in claims], limited


def claimer(dsn: str) -> psycopg.Connection:
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute(f"SET lock_timeout = {WAIT_MS}")
    return conn


@pytest.mark.parametrize("position", ["first", "last"])
@pytest.mark.parametrize("lock", sorted(LOCKS))
@pytest.mark.parametrize("path", FAST_PATHS + LIMITED_PATHS)
def test_a_claim_skips_an_execution_locked_by_another_session(
    app: Kestrel, db: psycopg.Connection, dsn: str, request: pytest.FixtureRequest, path: str, lock: str, position: str
) -> None:
    ids = enqueue_four(app, db, path)
    locked = ids[0] if position == "first" else ids[-1]
    others = [i for i in ids if i != locked]
    with claimer(dsn) as conn, psycopg.connect(dsn) as blocker:
        blocker.execute(LOCKS[lock], (locked,))
        began = time.monotonic()
        try:
            claimed, limited = take(conn, path)
        except psycopg.errors.LockNotAvailable as exc:
            raise Broke(f"the {path} claim waited {time.monotonic() - began:.1f} s for the lock: {exc}") from exc
        assert limited == (path in LIMITED_PATHS)
        assert sorted(claimed) == (sorted(ids) if lock in NO_CONFLICT else others)
        blocker.rollback()
        # The skipped one is claimed once free, and no stale ready row stays behind.
        assert take(conn, path)[0] == ([] if lock in NO_CONFLICT else [locked])
    assert db.execute("SELECT count(*) FROM executions_ready").fetchone() == (0,)
    assert db.execute("SELECT count(*) FROM workflow_executions WHERE status = 'running'").fetchone() == (4,)


def test_a_locked_execution_behind_the_mark_is_found_by_the_look_behind(
    app: Kestrel, db: psycopg.Connection, dsn: str
) -> None:
    """The worker's own sequence: the walk from the mark skips the locked head and moves the mark
    past it; once free, the walk from the mark finds nothing and the look behind takes it."""
    ids = [app.enqueue("w", i, priority=10 - i) for i in range(4)]
    mark = ClaimMark()
    with claimer(dsn) as conn, psycopg.connect(dsn) as blocker:
        blocker.execute(LOCKS["for_update"], (ids[0],))
        first, _ = claim_batch(conn, S, worker_id="r", names=["w"], n=10, lease=LEASE, mark=mark)
        assert sorted(c.execution_id for c in first) == ids[1:]
        blocker.rollback()
        # (paced: within RESCAN_MAX_PACE_S, as the worker's loop claims again every poll)
        later: list[int] = []
        deadline = time.monotonic() + claim_mod.RESCAN_MAX_PACE_S + 2
        while not later and time.monotonic() < deadline:
            later = [
                c.execution_id
                for c in claim_batch(conn, S, worker_id="r", names=["w"], n=10, lease=LEASE, mark=mark)[0]
            ]
            time.sleep(0.1)
    assert later == [ids[0]]


def deadlocks(db: psycopg.Connection) -> int:
    db.execute("SELECT pg_stat_clear_snapshot()")
    return db.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()").fetchone()[0]


def test_no_deadlock_between_claims_and_cancels_pauses_priority_changes(
    app: Kestrel, db: psycopg.Connection, dsn: str, start_worker, caplog: pytest.LogCaptureFixture
) -> None:
    """Two workers claim (fast, limited, keyed) with heartbeats and sweeps, while operators
    cancel, pause, resume and re-prioritise enqueued executions, each holding its lock a moment:
    the new lock order (ready row, then execution) must deadlock with none of them."""
    db.execute("INSERT INTO queues (name, concurrency, per_key, declared_at) VALUES ('lim', 6, 2, now())")

    @app.workflow("w")
    def w(ctx, n):
        return ctx.step("s", lambda: n)

    before = deadlocks(db)
    workers = [start_worker(app, worker_id=name, concurrency=4, lease=timedelta(seconds=2)) for name in ("a", "b")]
    stop = threading.Event()
    errors: list[BaseException] = []
    acted = [0]  # operator actions that held their lock

    def feed() -> None:
        i = 0
        while not stop.is_set():
            app.enqueue_many("w", list(range(i, i + 5)))
            app.enqueue_many("w", list(range(i, i + 5)), queue="lim")
            for k in range(3):
                app.enqueue("w", i, concurrency_key=f"k{(i + k) % 4}")
            i += 5
            time.sleep(0.02)

    def operate(seed: int) -> None:
        rnd = random.Random(seed)
        with psycopg.connect(dsn, options="-c search_path=kestrel") as conn:
            while not stop.is_set():
                row = conn.execute(
                    "SELECT id, status FROM workflow_executions WHERE status IN ('enqueued', 'paused')"
                    " ORDER BY random() LIMIT 1"
                ).fetchone()
                conn.rollback()
                if row is None:
                    time.sleep(0.01)
                    continue
                eid, status = row
                verb = "resume" if status == "paused" else rnd.choice(["cancel", "pause", "priority"])
                try:
                    if verb == "priority":
                        conn.execute("UPDATE workflow_executions SET priority = priority + 1 WHERE id = %s", (eid,))
                    else:
                        conn.execute(f"SELECT {verb}_execution(%s, 'op', NULL)", (eid,))
                    time.sleep(rnd.uniform(0, 0.05))  # the lock held a moment
                    conn.commit()
                    acted[0] += 1
                except psycopg.errors.DeadlockDetected as exc:
                    errors.append(exc)
                    conn.rollback()
                except psycopg.Error:  # a refusal (finished meanwhile): not what is looked for
                    conn.rollback()

    threads = [threading.Thread(target=feed)] + [threading.Thread(target=operate, args=(s,)) for s in range(3)]
    for t in threads:
        t.start()
    try:
        # a few hundred operator actions amid a few hundred claims
        wait_for(
            lambda: acted[0] >= 150 and sum(w.stats["claimed"] for w in workers) >= 300,
            timeout=60,
            what="operators and claims at work side by side",
        )
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    for worker in workers:
        worker.stop(grace=timedelta(seconds=1))
    assert not errors  # the operators'
    # the workers' (a claim, a heartbeat, a sweep or a boundary that deadlocked logs it)
    assert not [r.getMessage() for r in caplog.records if "deadlock" in r.getMessage().lower()]
    if app.dsn == dsn:  # direct: the workers' own sessions end, and their statistics are flushed
        wait_for(
            lambda: (
                db.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND application_name LIKE 'kestrel-worker%%'"
                ).fetchone()
                == (0,)
            ),
            what="the workers' sessions ended (their statistics flushed)",
        )
        assert deadlocks(db) == before


# -- 2. A stop while the claim is blocked ----------------------------------------------------


def blocked_worker(app: Kestrel, db: psycopg.Connection, dsn: str, start_worker, blocker: psycopg.Connection, how: str):
    """A worker whose claim waits for ``blocker``'s lock, and an execution it would claim once
    the lock goes: ``queue_row`` (a limited queue's row FOR UPDATE: the limited claim) or
    ``ready_table`` (the ready table's relation lock: the fast path). Returns (worker, eid, pid)."""

    @app.workflow("w")
    def w(ctx, _input):
        return 1

    if how == "queue_row":
        app.queue("narrow", concurrency=1)
        worker = start_worker(app, lease=timedelta(seconds=3), worker_id="racer")
        wait_for(
            lambda: blocker.execute("SELECT 1 FROM kestrel.queues WHERE name = 'narrow' FOR UPDATE").fetchall(),
            what="the queue declared and locked",
        )
        eid = app.enqueue("w", queue="narrow")
    else:
        app.queue("later")
        worker = start_worker(app, lease=timedelta(seconds=3), worker_id="racer")
        wait_for(lambda: db.execute("SELECT 1 FROM queues WHERE name = 'later'").fetchall(), what="the queue")
        app.pause_queue("later", by="t")
        eid = app.enqueue("w", queue="later")
        blocker.execute("LOCK TABLE kestrel.executions_ready IN ACCESS EXCLUSIVE MODE")
        app.resume_queue("later", by="t")  # claimable once the lock goes
    wait_for(lambda: lock_waiters(db), what="the claim to wait for the lock")
    (claim_pid,) = lock_waiters(db)
    return worker, eid, claim_pid


def claim_over(db: psycopg.Connection, pid: int) -> bool:
    """The server session that ran a claim ended (direct: the worker's own) or sits idle
    (through PgBouncer, a pooled session that outlives the worker)."""
    row = db.execute("SELECT state FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
    return row is None or row[0] == "idle"


def stop_in_thread(worker, grace: float) -> tuple[threading.Thread, threading.Event]:
    done = threading.Event()
    thread = threading.Thread(target=lambda: (worker.stop(grace=timedelta(seconds=grace)), done.set()))
    thread.start()
    return thread, done


def status_of(db: psycopg.Connection, eid: int) -> tuple:
    return db.execute("SELECT status, owner_id FROM workflow_executions WHERE id = %s", (eid,)).fetchone()


@pytest.mark.parametrize("how", ["queue_row", "ready_table"])
def test_a_stop_cancels_a_blocked_claim_and_nothing_commits_after_it(
    app: Kestrel, dsn: str, db, start_worker, how: str
) -> None:
    """The lock goes only after stop returned: nothing is claimed, the claim's session is gone
    (also for a fast-path claim, whose cancel the claim takes for a statement timeout)."""
    with psycopg.connect(dsn) as blocker:
        worker, eid, claim_pid = blocked_worker(app, db, dsn, start_worker, blocker, how)
        thread, done = stop_in_thread(worker, grace=0.5)
        assert done.wait(20), "stop did not return"
        assert claim_pid not in lock_waiters(db)
        blocker.rollback()
    thread.join(5)
    wait_for(lambda: claim_over(db, claim_pid), what="the stopped worker's claim over")
    assert status_of(db, eid) == ("enqueued", None)


def test_a_stop_with_nothing_in_flight_returns_before_its_grace(app: Kestrel, dsn: str, db, start_worker) -> None:
    with psycopg.connect(dsn) as blocker:
        worker, eid, _ = blocked_worker(app, db, dsn, start_worker, blocker, "queue_row")
        began = time.monotonic()
        thread, done = stop_in_thread(worker, grace=6)
        assert done.wait(30), "stop did not return"
        took = time.monotonic() - began
        blocker.rollback()
    thread.join(5)
    assert status_of(db, eid) == ("enqueued", None)
    broke_unless(took < 3, f"stop took {took:.1f} s with a 6 s grace and nothing in flight")


def test_a_stop_through_pgbouncer_leaves_nothing_claimed(dsn: str, db, start_worker, bouncer: str) -> None:
    through = make_conninfo(bouncer, dbname=conninfo_to_dict(dsn)["dbname"])
    with Kestrel(through, transaction_pooling=True) as app, psycopg.connect(dsn) as blocker:
        worker, eid, claim_pid = blocked_worker(app, db, dsn, start_worker, blocker, "queue_row")
        thread, done = stop_in_thread(worker, grace=0.5)
        assert done.wait(20), "stop did not return"
        still_waiting = claim_pid in lock_waiters(db)
        blocker.rollback()
        thread.join(5)
        # the pooled server session that ran the claim is idle: the cancelled claim is over
        wait_for(
            lambda: (
                db.execute("SELECT state FROM pg_stat_activity WHERE pid = %s", (claim_pid,)).fetchone()
                in (None, ("idle",))
            ),
            what="the pooled session that ran the claim idle",
        )
        row = status_of(db, eid)
    broke_unless(not still_waiting and row == ("enqueued", None), f"after the stop: waiting={still_waiting}, {row}")


def test_a_stop_while_the_executions_table_is_locked(app: Kestrel, dsn: str, db, start_worker) -> None:
    @app.workflow("w")
    def w(ctx, _input):
        return 1

    worker = start_worker(app, lease=timedelta(seconds=3), worker_id="racer")
    wait_for(
        lambda: db.execute("SELECT count(*) FROM workers WHERE worker_id = 'racer'").fetchone() == (1,),
        what="the worker registered",
    )
    with psycopg.connect(dsn) as blocker:
        blocker.execute("LOCK TABLE kestrel.workflow_executions IN ACCESS EXCLUSIVE MODE")
        wait_for(lambda: lock_waiters(db), what="the claim to wait for the lock")
        thread, done = stop_in_thread(worker, grace=0.5)
        stopped = done.wait(12)
        waiting = db.execute(
            "SELECT application_name, left(query, 40) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock' ORDER BY 1, 2"
        ).fetchall()
        blocker.rollback()
    thread.join(20)
    broke_unless(stopped, f"stop did not return within 12 s while the executions table was locked; waiting: {waiting}")


# -- 3. A keyed child takes its key's bucket -------------------------------------------------


def child(db: psycopg.Connection, parent: int, key: str | None) -> tuple[int, int]:
    return db.execute(
        "INSERT INTO workflow_executions (workflow_name, parent_id, concurrency_key, bucket)"
        " VALUES ('kid', %s, %s, 63) RETURNING id, bucket",
        (parent, key),
    ).fetchone()


def test_buckets_of_keyed_and_unkeyed_children_and_grandchildren(app: Kestrel, db: psycopg.Connection) -> None:
    key_bucket = app.enqueue("kid", 0, concurrency_key="kk")
    (kb,) = db.execute("SELECT bucket FROM workflow_executions WHERE id = %s", (key_bucket,)).fetchone()
    parent = app.enqueue("p")
    db.execute("UPDATE workflow_executions SET bucket = %s WHERE id = %s", ((kb + 1) % 64, parent))
    keyed_kid, keyed_bucket = child(db, parent, "kk")
    _, plain_bucket = child(db, parent, None)
    _, grandkid_bucket = child(db, keyed_kid, None)
    _, orphan_bucket = child(db, 10**9, "kk")  # a parent not found: the key's all the same
    assert (keyed_bucket, plain_bucket, grandkid_bucket, orphan_bucket) == (kb, (kb + 1) % 64, kb, kb)


def test_a_per_key_limit_holds_for_a_key_split_over_buckets_by_older_children(
    app: Kestrel, db: psycopg.Connection, dsn: str
) -> None:
    """Keyed children made before the change stay in their parent's bucket (nothing moves them):
    one key in two buckets. Claims by workers serving either bucket still keep per_key."""
    db.execute("INSERT INTO queues (name, per_key, concurrency, declared_at) VALUES ('pk', 1, 100, now())")
    ids = [app.enqueue("w", i, queue="pk", concurrency_key="split") for i in range(4)]
    buckets = [b for (b,) in db.execute("SELECT bucket FROM workflow_executions WHERE id = ANY(%s)", (ids,))]
    assert len(set(buckets)) == 1
    other = (buckets[0] + 1) % 64
    db.execute("UPDATE workflow_executions SET bucket = %s WHERE id = ANY(%s)", (other, ids[::2]))
    db.execute("UPDATE executions_ready SET bucket = %s WHERE id = ANY(%s)", (other, ids[::2]))
    taken = []
    with claimer(dsn) as conn:
        for served in ([buckets[0]], [other], [buckets[0]], [other]):
            claims, _ = claim_batch(conn, S, worker_id=f"b{served[0]}", names=["w"], n=5, lease=LEASE, buckets=served)
            taken += claims
    assert len(taken) == 1


# -- Throughput: the plans at a 100k backlog in two partitions -------------------------------


def backlog(db: psycopg.Connection, queue: str = "default") -> None:
    insert = (
        "INSERT INTO workflow_executions (workflow_name, input, priority, queue)"
        " SELECT 'w', '1'::jsonb, g %% 3, %s FROM generate_series(1, %s) g"
    )
    db.execute(insert, (queue, 60_000))
    db.execute("ALTER TABLE workflow_executions ALTER COLUMN id RESTART WITH 2000000")
    db.execute(insert, (queue, 40_000))
    db.execute("ANALYZE workflow_executions")
    db.execute("ANALYZE executions_ready")


def explained(db: psycopg.Connection, statement: sql.Composable, params: dict, settings: str) -> list[str]:
    with db.transaction(force_rollback=True):
        db.execute(settings)
        rows = db.execute(sql.SQL("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) ") + statement, params).fetchall()
    return [r[0] for r in rows]


def probes_of_the_executions_pkey(plan: list[str], before: str) -> int:
    """The loops of the first executions' primary-key probe in ``plan``, in the part before the
    line containing ``before`` (the CTE that locks)."""
    head = plan[: next(i for i, line in enumerate(plan) if before in line)]
    for line in head:
        if "workflow_executions_p0_pkey" in line:
            return int(line.rsplit("loops=", 1)[1].rstrip(")"))
    raise AssertionError("no probe of the executions' primary key:\n" + "\n".join(plan))


BASE = {"names": ["w"], "worker_id": "x", "lease": LEASE, "versions": [None], "buckets": None}


def test_the_fast_claim_at_a_100k_backlog_probes_one_execution_per_row_taken(db: psycopg.Connection) -> None:
    backlog(db)
    settings = "SET LOCAL enable_sort = off; SET LOCAL jit = off"
    for n in (50, 1000):
        after_p, after_at, after_id = claim_mod.START_KEY  # a walk from the start
        params = {**BASE, "n": n, "queues": None, "after_p": after_p, "after_at": after_at, "after_id": after_id}
        plan = explained(db, render(claim_mod.CLAIM, S), params, settings)
        text = "\n".join(plan)
        assert "Seq Scan on executions_ready" not in text and "Sort" not in text, text
        assert "Index Scan using executions_ready_claim_idx" in text, text
        assert probes_of_the_executions_pkey(plan, "CTE taken") == n, text


def test_the_limited_claim_at_a_100k_backlog_probes_only_what_it_takes(db: psycopg.Connection) -> None:
    backlog(db)
    db.execute("INSERT INTO queues (name, concurrency, declared_at) VALUES ('default', 1000000, now())")
    n = 50
    params = {**BASE, "n": n, "queues": ["default"], "scan": max(500, 50 * n)}
    plan = explained(db, render(limited_claim.SQL.claim_limited, S), params, "SET LOCAL enable_sort = on")
    probes = probes_of_the_executions_pkey(plan, "CTE taken")
    broke_unless(probes <= 2 * n, f"{probes} probes of the executions for a claim of {n}")
