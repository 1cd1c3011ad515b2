"""Buckets (kestrel_core.dispatch.buckets, migration 0038): each execution's bucket chosen at
insert, the groups shared out among the live workers by rendezvous hashing, the bucketed claim
(fast and limited paths), workers running every execution once, a stopping or silent worker's
buckets taken over, and the queues' limits holding."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from datetime import timedelta
from itertools import combinations

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kestrel_core import InvalidArgument, Kestrel, WorkerSettings
from kestrel_core.db.migrate import available, function_files, migrate
from kestrel_core.dispatch.buckets import BUCKETS, Fallback, assign, buckets_of, group_of
from kestrel_core.dispatch.claim import ClaimMark, claim_batch
from kestrel_core.dispatch.queues import declare
from tests.core.schema_history import created_after
from tests.waiting import wait_for, wait_until_none_left
from tests.worker_processes import start_worker_process, stop_worker_processes

LEASE = timedelta(seconds=30)
UNFINISHED = "SELECT count(*) FROM workflow_executions WHERE status <> 'success'"

worker_ids = st.text(alphabet="abcdefghij0123456789:-", min_size=1, max_size=10)
fleets = st.sets(worker_ids, min_size=1, max_size=12)
group_counts = st.integers(min_value=1, max_value=BUCKETS)


# -- the assignment (pure) --------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(fleets, group_counts)
def test_every_bucket_is_served_by_exactly_one_live_worker(workers: set[str], groups: int) -> None:
    served = assign(groups, workers)
    assert set(served) == workers
    assert sorted(g for gs in served.values() for g in gs) == list(range(groups))
    assert sorted(b for gs in served.values() for b in buckets_of(gs, groups)) == list(range(BUCKETS))
    assert assign(groups, sorted(workers, reverse=True)) == served  # any order of the rows: the same winners


@settings(max_examples=300, deadline=None)
@given(fleets, worker_ids, group_counts)
def test_a_worker_joining_takes_only_groups_it_wins_and_leaving_moves_only_its_own(
    workers: set[str], newcomer: str, groups: int
) -> None:
    if newcomer in workers:
        return
    before, after = assign(groups, workers), assign(groups, workers | {newcomer})
    for w in workers:  # nobody but the newcomer gains a group; what moved, moved to it
        assert set(after[w]) <= set(before[w])
    moved = sum(len(before[w]) - len(after[w]) for w in workers)
    assert moved == len(after[newcomer])
    # The same seen the other way: the newcomer leaving gives back exactly what it had.
    assert assign(groups, workers) == before


def test_a_joining_worker_moves_about_one_share_of_the_groups() -> None:
    rng = random.Random(48)
    for fleet in (2, 4, 8):
        fractions = []
        for _ in range(200):
            workers = {f"host-{rng.randrange(10**6)}:{rng.randrange(10**5)}" for _ in range(fleet)}
            newcomer = f"new-{rng.randrange(10**9)}"
            fractions.append(len(assign(BUCKETS, workers | {newcomer})[newcomer]) / BUCKETS)
        mean = sum(fractions) / len(fractions)
        expected = 1 / (len(workers) + 1)
        assert abs(mean - expected) < 0.2 * expected, (fleet, mean, expected)


def test_groups_are_contiguous_ranges_of_the_buckets() -> None:
    assert [group_of(b, 1) for b in (0, 63)] == [0, 0]
    assert buckets_of([0], 16) == [0, 1, 2, 3] and buckets_of([15], 16) == [60, 61, 62, 63]
    assert len({group_of(b, 5) for b in range(BUCKETS)}) == 5


def test_the_fallback_waits_a_poll_interval_only_after_finding_nothing() -> None:
    fallback = Fallback(every=1.0)
    assert fallback.due(0.0)
    fallback.ran(0.0, found=True)  # others' backlog: help again at once
    assert fallback.due(0.0)
    fallback.ran(0.0, found=False)
    assert not fallback.due(0.99) and fallback.due(1.0)


@pytest.mark.parametrize("value", [0, 65, True, 2.0])
def test_the_buckets_setting_is_checked(value: object) -> None:
    with pytest.raises(InvalidArgument, match="buckets"):
        WorkerSettings(buckets=value)  # type: ignore[arg-type]
    assert WorkerSettings(buckets=16).buckets == 16 and WorkerSettings().buckets is None


# -- buckets at insert --------------------------------------------------------------------------


def test_each_execution_gets_a_bucket_its_key_its_parent_or_a_random_one(
    app: Kestrel, db: psycopg.Connection, start_worker
) -> None:
    @app.workflow("leaf")
    def leaf(ctx, n):
        return n

    @app.workflow("parent")
    def parent(ctx, n):
        return ctx.wait_for(ctx.start_child("leaf", n))

    plain = app.enqueue_many("leaf", list(range(300)))
    keyed = [app.enqueue("leaf", i, concurrency_key=f"customer-{i % 3}") for i in range(9)]
    keyed += app.enqueue_many("leaf", [0, 1], concurrency_key="customer-0")
    rows = dict(db.execute("SELECT id, bucket FROM workflow_executions").fetchall())
    assert all(0 <= b < BUCKETS for b in rows.values())
    assert len({rows[i] for i in plain}) > BUCKETS // 2, "unkeyed executions spread over the buckets"
    by_key = dict(db.execute("SELECT id, concurrency_key FROM workflow_executions WHERE id = ANY(%s)", (keyed,)))
    for key in ("customer-0", "customer-1", "customer-2"):
        assert len({rows[i] for i in keyed if by_key[i] == key}) == 1, f"{key}'s executions share one bucket"
    ready = db.execute(
        "SELECT count(*), count(*) FILTER (WHERE r.bucket = e.bucket)"
        " FROM executions_ready r JOIN workflow_executions e USING (id)"
    ).fetchone()
    assert ready == (len(rows), len(rows)), "each ready row carries its execution's bucket"

    db.execute("DELETE FROM workflow_executions")
    parents = [app.enqueue("parent", i, concurrency_key=f"p-{i}") for i in range(6)]
    start_worker(app)
    wait_until_none_left(lambda: db.execute(UNFINISHED).fetchone()[0], what="the parents and children")
    pairs = db.execute(
        "SELECT p.bucket, c.bucket FROM workflow_executions c JOIN workflow_executions p ON p.id = c.parent_id"
    ).fetchall()
    assert len(pairs) == len(parents) and all(p == c for p, c in pairs), "a child lives in its parent's bucket"


# -- the bucketed claim -------------------------------------------------------------------------


def test_a_bucketed_claim_takes_its_buckets_only_in_both_paths(app: Kestrel, db: psycopg.Connection) -> None:
    app.queue("limited", concurrency=1000)

    @app.workflow("fast")
    def fast(ctx, n):
        return n

    @app.workflow("slow", queue="limited")
    def slow(ctx, n):
        return n

    with app.connection() as conn:
        declare(conn, app.schema, list(app.queues.values()), {"limited": ["slow"]})
    app.enqueue_many("fast", list(range(400)))
    app.enqueue_many("slow", list(range(400)))
    mine = list(range(0, 16))
    names = ["fast", "slow"]
    versions = [app.workflows[n].version for n in names]
    claim = {"worker_id": "w", "names": names, "versions": versions, "n": 1000, "lease": LEASE}
    claims, limited = claim_batch(db, app.schema, **claim, mark=ClaimMark(), buckets=mine)
    assert limited
    taken = db.execute(
        "SELECT workflow_name, bucket FROM workflow_executions WHERE id = ANY(%s)", ([c.execution_id for c in claims],)
    ).fetchall()
    assert {name for name, _ in taken} == {"fast", "slow"}, "both paths claimed"
    assert all(b in mine for _, b in taken)
    left = db.execute("SELECT count(*), count(*) FILTER (WHERE bucket = ANY(%s)) FROM executions_ready", (mine,))
    assert left.fetchone() == (800 - len(claims), 0), "every row of those buckets, none of the others"
    rest, _ = claim_batch(db, app.schema, **claim, mark=ClaimMark())
    assert len(rest) == 800 - len(claims), "without buckets: every bucket"


# -- workers ------------------------------------------------------------------------------------


def recording_app(app: Kestrel, runs: Counter, lock: threading.Lock, nap: float = 0.0) -> None:
    @app.workflow("job")
    def job(ctx, n):
        with lock:
            runs[ctx.execution_id] += 1
        time.sleep(nap)
        return n


def serving_as_assigned(workers: list, groups: int) -> bool:
    expected = assign(groups, [w.worker_id for w in workers])
    return all(w.buckets_served == buckets_of(expected[w.worker_id], groups) for w in workers)


def test_three_bucketed_workers_run_every_execution_exactly_once(
    app: Kestrel, db: psycopg.Connection, start_worker
) -> None:
    runs: Counter = Counter()
    recording_app(app, runs, threading.Lock())
    ids = [f"bucketed-{i}" for i in range(3)]
    assert all(assign(16, ids)[w] for w in ids), "each of these three wins some groups"
    workers = [start_worker(app, worker_id=w, buckets=16) for w in ids]
    wait_for(lambda: serving_as_assigned(workers, 16), what="the three to share the groups out")
    eids = app.enqueue_many("job", list(range(600)))
    wait_until_none_left(lambda: db.execute(UNFINISHED).fetchone()[0], what="every execution to succeed")
    assert sorted(runs) == sorted(eids) and set(runs.values()) == {1}, "each ran exactly once"
    own = db.execute(
        "SELECT owner_id, count(*) FROM workflow_executions GROUP BY owner_id ORDER BY owner_id"
    ).fetchall()
    assert [w for w, _ in own] == ids, "every worker ran some"
    for w in workers:
        in_own = db.execute(
            "SELECT count(*) FROM workflow_executions WHERE owner_id = %s AND bucket = ANY(%s)",
            (w.worker_id, w.buckets_served),
        ).fetchone()[0]
        assert in_own > 0, f"{w.worker_id} claimed from its own buckets"


def test_a_stopping_worker_hands_its_buckets_over(app: Kestrel, db: psycopg.Connection, start_worker) -> None:
    runs: Counter = Counter()
    recording_app(app, runs, threading.Lock(), nap=0.02)
    staying = start_worker(app, worker_id="staying", buckets=16)
    leaving = start_worker(app, worker_id="leaving", buckets=16)
    wait_for(lambda: serving_as_assigned([staying, leaving], 16), what="the two to share the groups out")
    assert 0 < len(staying.buckets_served or []) < BUCKETS
    eids = app.enqueue_many("job", list(range(300)))
    wait_for(
        lambda: db.execute("SELECT count(*) FROM workflow_executions WHERE owner_id = 'leaving'").fetchone()[0],
        what="the leaving worker to claim some",
    )
    leaving.stop(grace=timedelta(0))  # what it held goes back to its buckets, enqueued
    wait_for(lambda: staying.buckets_served == list(range(BUCKETS)), what="the staying worker to serve every bucket")
    wait_until_none_left(lambda: db.execute(UNFINISHED).fetchone()[0], what="every execution to succeed")
    assert sorted(runs) == sorted(eids)
    later = app.enqueue_many("job", list(range(50)))
    wait_until_none_left(lambda: db.execute(UNFINISHED).fetchone()[0], what="the later ones")
    owners = db.execute("SELECT DISTINCT owner_id FROM workflow_executions WHERE id = ANY(%s)", (later,)).fetchall()
    assert owners == [("staying",)]


def test_buckets_of_a_silent_worker_are_served_by_the_fallback_then_taken_over(
    app: Kestrel, db: psycopg.Connection, start_worker
) -> None:
    # A worker that registered and never claims (a process frozen, or one that died within its
    # lease): its groups are still assigned to it. Its buckets' executions must run all the same.
    runs: Counter = Counter()
    recording_app(app, runs, threading.Lock())
    peer = "'{job}', ARRAY[%s], now() + interval '1 hour', interval '1 second'"
    db.execute(
        "INSERT INTO workers (worker_id, bucket_groups, workflows, versions, last_heartbeat, lease)"
        f" VALUES ('silent', 16, {peer}), ('other-kind', 16, '{{job,other}}', ARRAY['', ''], now(), interval '1 hour')",
        (app.workflows["job"].version or "",),
    )
    alive = start_worker(app, worker_id="alive", buckets=16)
    expected = buckets_of(assign(16, ["alive", "silent"])["alive"], 16)
    assert 0 < len(expected) < BUCKETS
    # The silent worker is its peer; the one that claims other workflows is not.
    wait_for(lambda: alive.buckets_served == expected, what="the live worker to leave the silent one its share")
    eids = app.enqueue_many("job", list(range(200)))
    silent_share = db.execute(
        "SELECT count(*) FROM workflow_executions WHERE id = ANY(%s) AND bucket <> ALL(%s)", (eids, expected)
    ).fetchone()[0]
    assert silent_share > 0
    wait_until_none_left(lambda: db.execute(UNFINISHED).fetchone()[0], what="every execution, the silent share too")
    assert alive.buckets_served == expected, "the fallback ran them: the silent worker still had its groups"
    db.execute("UPDATE workers SET last_heartbeat = now() - interval '1 minute' WHERE worker_id = 'silent'")
    wait_for(lambda: alive.buckets_served == list(range(BUCKETS)), what="its groups to move once its lease passed")
    assert sorted(runs) == sorted(eids) and set(runs.values()) == {1}


def test_limits_hold_with_buckets(app: Kestrel, db: psycopg.Connection, start_worker) -> None:
    app.queue("limited", concurrency=2)
    app.queue("keyed", per_key=1)

    def timed(ctx, n):
        began = time.time()
        time.sleep(0.1)
        return {"began": began, "ended": time.time()}

    app.workflow("capped", queue="limited")(timed)
    app.workflow("per_key", queue="keyed")(timed)
    for i in range(3):
        start_worker(app, worker_id=f"limited-{i}", buckets=16)
    capped = app.enqueue_many("capped", list(range(24)))
    keyed = [app.enqueue("per_key", i, concurrency_key=f"k-{i % 3}") for i in range(12)]
    wait_until_none_left(lambda: db.execute(UNFINISHED).fetchone()[0], what="every execution to succeed")

    def spans(ids: list[int]) -> list[tuple[str | None, float, float, str]]:
        return db.execute(
            "SELECT concurrency_key, (output->>'began')::float8, (output->>'ended')::float8, owner_id"
            " FROM workflow_executions WHERE id = ANY(%s)",
            (ids,),
        ).fetchall()

    limited = spans(capped)
    most = max(sum(1 for o in limited if o[1] <= s[1] < o[2]) for s in limited)
    assert most <= 2, f"{most} ran at once in a queue of concurrency 2"
    assert len({s[3] for s in limited}) > 1, "more than one worker ran the limited queue"
    per_key = spans(keyed)
    overlapping = [(a[0], b[0]) for a, b in combinations(per_key, 2) if a[1] < b[2] and b[1] < a[2]]
    assert not [p for p in overlapping if p[0] == p[1]], "two executions of one key ran at once"
    assert overlapping, "different keys ran side by side"


def test_the_worker_command_takes_buckets(dsn: str, db: psycopg.Connection) -> None:
    proc = start_worker_process(
        dsn, "tests.core.queues_app:app", "--buckets", "4", "--worker-id", "cli", "--processes", "1", "--lease", "3"
    )
    try:
        wait_for(
            lambda: (
                (db.execute("SELECT bucket_groups FROM workers WHERE worker_id = 'cli'").fetchone() or (None,))[0] == 4
                or proc.poll() is not None
            ),
            timeout=30,
            what="the worker to record its bucket groups",
        )
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
    finally:
        stop_worker_processes([proc])


# The function files migration 0038 made or changed (they name the bucket): a schema from before
# it has the ready triggers as migration 0015 made them, and no bucket_assigned.
BUCKET_FUNCTIONS = {"bucket_assigned", "ready_inserted", "ready_changed"}


def migrate_to_37(conn: psycopg.Connection, schema: str) -> None:
    """``schema`` as code of version 37 left it: its migrations and its function files."""
    migrate(
        conn,
        schema,
        migrations=[m for m in available() if m.version < 38],
        functions=[f for f in function_files() if f.name not in BUCKET_FUNCTIONS | created_after(37)],
    )


def test_migrating_a_populated_database_puts_its_rows_in_bucket_zero(database: str) -> None:
    with psycopg.connect(database, autocommit=True) as conn:
        migrate_to_37(conn, "bucket_mig")
        conn.execute(
            "INSERT INTO bucket_mig.workflow_executions (workflow_name, concurrency_key)"
            " SELECT 'w', CASE WHEN g % 2 = 0 THEN 'k' END FROM generate_series(1, 500) g"
        )
        migrate(conn, "bucket_mig")
        assert conn.execute("SELECT DISTINCT bucket FROM bucket_mig.workflow_executions").fetchall() == [(0,)]
        assert conn.execute("SELECT count(*) FROM bucket_mig.executions_ready WHERE bucket = 0").fetchone() == (500,)
        claims, _ = claim_batch(conn, "bucket_mig", worker_id="w", names=["w"], n=1000, lease=LEASE, buckets=[0])
        assert len(claims) == 500
        conn.execute(
            "INSERT INTO bucket_mig.workflow_executions (workflow_name) SELECT 'w' FROM generate_series(1, 200)"
        )
        spread = conn.execute("SELECT count(DISTINCT bucket) FROM bucket_mig.executions_ready").fetchone()[0]
        assert spread > BUCKETS // 2, "new executions spread over the buckets"
        conn.execute("DROP SCHEMA bucket_mig CASCADE")
