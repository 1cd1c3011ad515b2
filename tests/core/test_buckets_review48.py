"""Review 48: attacks on the bucketed claim (kestrel_core.dispatch.buckets). Each test names the
promise it holds the code to (docs/scale.md "On plain PostgreSQL first", docs/guarantees.md)."""

from __future__ import annotations

import threading
import time

import psycopg

from kestrel_core import Kestrel
from kestrel_core.dispatch.buckets import Fallback, assign, buckets_of
from tests.waiting import wait_for, wait_until_none_left

UNFINISHED = "SELECT count(*) FROM workflow_executions WHERE status <> 'success' AND workflow_name = 'job'"


def keys_in(db: psycopg.Connection, buckets: list[int], n: int = 1) -> list[str]:
    """``n`` concurrency keys whose bucket (bucket_assigned()) is one of ``buckets``."""
    rows = db.execute(
        "SELECT 'k' || g FROM generate_series(1, 100000) g"
        " WHERE ((hashtext('k' || g)::bigint + 2147483648) %% 64)::int = ANY(%s) LIMIT %s",
        (buckets, n),
    ).fetchall()
    return [r[0] for r in rows]


def test_a_busy_winners_groups_are_not_starved_by_a_peers_backlog(
    app: Kestrel, db: psycopg.Connection, start_worker
) -> None:
    # FAILS ON MAIN (006637c): the fallback claim runs only when a worker's own buckets come
    # back short of its free slots. A live winner that is busy (every slot on a long step) still
    # holds its groups, and a peer whose own buckets have a backlog never comes back short, so
    # never runs the fallback: a priority-100 execution in the busy worker's group waits
    # behind the peer's whole priority-0 backlog (docs/scale.md: "a row no worker serves ...
    # is taken within its place in that order: the same guarantee as without buckets").
    release = threading.Event()

    @app.workflow("hold")
    def hold(ctx, n):
        release.wait(120)
        return n

    @app.workflow("job")
    def job(ctx, n):
        began = time.time()
        time.sleep(0.02)
        return {"began": began}

    try:
        assert assign(2, ["busy", "backlogged"]) == {"backlogged": [0], "busy": [1]}
        start_worker(app, worker_id="busy", buckets=2, concurrency=1)
        held = app.enqueue("hold", 0)
        wait_for(
            lambda: (
                db.execute("SELECT owner_id FROM workflow_executions WHERE id = %s", (held,)).fetchone()[0] == "busy"
            ),
            what="the busy worker to hold its one slot",
        )
        peer = start_worker(app, worker_id="backlogged", buckets=2, concurrency=2)
        wait_for(
            lambda: peer.buckets_served == buckets_of([0], 2),
            what="the backlogged worker to leave the busy one its group",
        )
        backlog = [app.enqueue("job", i, concurrency_key=k) for i, k in enumerate(keys_in(db, buckets_of([0], 2), 400))]
        wait_for(
            lambda: db.execute("SELECT count(*) FROM workflow_executions WHERE status = 'success'").fetchone()[0] >= 20,
            what="the backlogged worker to be running its backlog",
        )
        enqueued_at = time.time()
        victim = app.enqueue("job", -1, priority=100, concurrency_key=keys_in(db, buckets_of([1], 2))[0])
        wait_until_none_left(lambda: db.execute(UNFINISHED).fetchone()[0], what="the backlog and the victim")
        before = db.execute(
            "SELECT count(*) FROM workflow_executions b, workflow_executions v"
            " WHERE b.id = ANY(%s) AND v.id = %s AND (b.output->>'began')::float8 < (v.output->>'began')::float8"
            " AND (b.output->>'began')::float8 > %s",
            (backlog, victim, enqueued_at),
        ).fetchone()[0]
        assert before < 100, f"{before} priority-0 executions began between the priority-100 one's enqueue and start"
    finally:
        release.set()


def test_the_fallback_is_overdue_a_poll_interval_after_it_last_ran_whatever_it_found() -> None:
    fallback = Fallback(every=1.0)
    assert fallback.overdue(0.0), "never run: overdue"
    fallback.ran(0.0, found=True)
    assert fallback.due(0.5) and not fallback.overdue(0.5) and fallback.overdue(1.0)
    fallback.ran(1.0, found=False)
    assert not fallback.due(1.5) and not fallback.overdue(1.5) and fallback.overdue(2.0) and fallback.due(2.0)
