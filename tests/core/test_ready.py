"""executions_ready (migration 0015): the claimable work apart, kept by triggers, walked past a mark."""

from __future__ import annotations

import time
from datetime import timedelta

import psycopg

from kestrel_core import Kestrel
from kestrel_core.db.migrate import available, function_files, migrate
from kestrel_core.dispatch import lease, sweeper
from kestrel_core.dispatch.claim import RESCAN_COST_FACTOR, RESCAN_MAX_PACE_S, START_KEY, ClaimMark, claim, claim_batch
from tests.core.test_partitions_migration import LATER  # function files of versions 20-22

S = "kestrel"
NEW = {"ready_inserted", "ready_changed"}  # the function files of version 15
LEASE = timedelta(seconds=30)


def ready_ids(db: psycopg.Connection) -> list[int]:
    return [row[0] for row in db.execute("SELECT id FROM executions_ready ORDER BY id")]


def enqueued_ids(db: psycopg.Connection) -> list[int]:
    return [row[0] for row in db.execute("SELECT id FROM workflow_executions WHERE status = 'enqueued' ORDER BY id")]


def take(db: psycopg.Connection, n: int, mark: ClaimMark | None = None) -> list[int]:
    claims, _ = claim_batch(db, S, worker_id="w1", names=["w"], n=n, lease=LEASE, mark=mark)
    return [c.execution_id for c in claims]


def test_the_ready_table_follows_every_way_in_and_out_of_enqueued(app: Kestrel, db: psycopg.Connection) -> None:
    ids = app.enqueue_many("w", [{"n": i} for i in range(6)])
    assert ready_ids(db) == ids
    app.cancel(ids[0], by="t")  # enqueued -> cancelled
    db.execute("DELETE FROM workflow_executions WHERE id = %s", (ids[1],))
    assert ready_ids(db) == enqueued_ids(db) == ids[2:]
    claimed = take(db, 2)
    assert claimed == ids[2:4] and ready_ids(db) == ids[4:]
    # Back to enqueued: a lapsed lease swept, an execution released by its worker, a requeue.
    db.execute("UPDATE workflow_executions SET lease_expires = now() - interval '1 s' WHERE id = %s", (claimed[0],))
    assert sweeper.sweep_leases(db, S) == [claimed[0]]
    assert lease.release_all(db, S, "w1") == [claimed[1]]
    assert ready_ids(db) == enqueued_ids(db) == sorted([*claimed, *ids[4:]])
    db.execute("UPDATE workflow_executions SET priority = 7 WHERE id = %s", (ids[5],))  # a new claim key
    (first,) = take(db, 1)
    assert first == ids[5]
    app.requeue(ids[0], by="t")  # cancelled -> enqueued
    assert ready_ids(db) == enqueued_ids(db)
    db.execute("TRUNCATE workflow_executions CASCADE")
    assert ready_ids(db) == []


def test_a_claim_that_meets_a_stale_ready_row_drops_it(app: Kestrel, db: psycopg.Connection) -> None:
    # Code older than migration 0015 claims in workflow_executions alone: its ready row stays.
    a, b = app.enqueue_many("w", [1, 2])
    db.execute("UPDATE workflow_executions SET status = 'running', owner_id = 'old' WHERE id = %s", (a,))
    assert ready_ids(db) == [a, b]
    assert take(db, 2) == [b]
    assert ready_ids(db) == []
    assert db.execute("SELECT owner_id FROM workflow_executions WHERE id = %s", (a,)).fetchone() == ("old",)


def test_the_mark_skips_what_was_claimed_and_a_short_walk_looks_behind_it(app: Kestrel, db: psycopg.Connection) -> None:
    ids = app.enqueue_many("w", list(range(10)))
    mark = ClaimMark()
    assert take(db, 4, mark) == ids[:4]  # the first claim walks from the start
    assert mark.key[2] == ids[3]
    urgent = app.enqueue("w", "urgent", priority=5)  # claim order: before the mark
    # Past the mark with a backlog there: the urgent row waits for the walk from the start.
    assert take(db, 2, mark) == ids[4:6]
    # A walk past the mark that comes back short looks behind it at once (walks from the
    # start are cheap here: however long the first one took on a busy machine).
    mark.rescan_s = 0.0
    assert sorted(take(db, 10, mark)) == sorted([urgent, *ids[6:]])
    assert ready_ids(db) == []


def test_dear_walks_from_the_start_are_paced_by_their_cost(app: Kestrel, db: psycopg.Connection) -> None:
    ids = app.enqueue_many("w", list(range(6)))
    mark = ClaimMark()
    assert take(db, 3, mark) == ids[:3]
    urgent = app.enqueue("w", "urgent", priority=5)  # behind the mark
    # The last walk from the start took 0.2 s (a held snapshot's dead entries): the next may
    # come RESCAN_COST_FACTOR times that later, neither for a short walk nor once a second.
    mark.rescanned_at, mark.rescan_s = time.monotonic(), 0.2
    assert take(db, 10, mark) == ids[3:]
    mark.rescanned_at -= 1.5
    assert take(db, 10, mark) == []
    assert ready_ids(db) == [urgent]
    mark.rescanned_at -= RESCAN_COST_FACTOR * 0.2
    assert take(db, 10, mark) == [urgent]


def test_a_walk_that_waited_long_paces_the_next_by_at_most_the_cap(app: Kestrel, db: psycopg.Connection) -> None:
    ids = app.enqueue_many("w", list(range(3)))
    mark = ClaimMark()
    assert take(db, 2, mark) == ids[:2]
    urgent = app.enqueue("w", "urgent", priority=5)  # behind the mark
    # The last walk from the start took 10 s (it waited on a lock, or the machine stalled):
    # 20x that would leave the urgent row for 200 s; the cap makes it RESCAN_MAX_PACE_S.
    mark.rescanned_at, mark.rescan_s = time.monotonic() - RESCAN_MAX_PACE_S, 10.0
    assert take(db, 1, mark) == [urgent]


def test_the_walk_starts_over_once_a_second(app: Kestrel, db: psycopg.Connection) -> None:
    ids = app.enqueue_many("w", list(range(6)))
    mark = ClaimMark()
    assert take(db, 3, mark) == ids[:3]
    urgent = app.enqueue("w", "urgent", priority=5)
    assert take(db, 1, mark) == [ids[3]]
    mark.rescanned_at -= 1.0  # a second later, walks from the start being cheap here
    mark.rescan_s = 0.0
    assert take(db, 1, mark) == [urgent]
    assert mark.key[2] == ids[3]  # the mark never moves back


def test_a_rolled_back_claim_leaves_its_rows_claimable(app: Kestrel, db: psycopg.Connection) -> None:
    ids = app.enqueue_many("w", list(range(3)))
    with db.transaction():
        assert [c.execution_id for c in claim(db, S, worker_id="w1", names=["w"], n=3, lease=LEASE)] == ids
        raise psycopg.Rollback()
    assert ready_ids(db) == enqueued_ids(db) == ids
    # A mark past every row, and a walk from the start just done: the short walk looks behind.
    mark = ClaimMark(key=(0, START_KEY[1].replace(year=9999), 0), rescanned_at=time.monotonic())
    assert sorted(take(db, 3, mark)) == ids


def test_migrating_a_populated_database_makes_its_enqueued_rows_ready(database: str) -> None:
    before = [m for m in available() if m.version < 15]
    with psycopg.connect(database, autocommit=True) as conn:
        # As code of version 14 left it: its migrations and function files.
        at_14 = [f for f in function_files() if f.name not in NEW | LATER]
        migrate(conn, "ready_mig", migrations=before, functions=at_14)
        conn.execute(
            """INSERT INTO ready_mig.workflow_executions (workflow_name, status, priority, queue)
               SELECT 'w', s, (g % 3), 'default'
                 FROM generate_series(1, 3000) AS g,
                      LATERAL (SELECT (ARRAY['enqueued', 'running', 'success'])[1 + g % 3] AS s) st"""
        )
        migrate(conn, "ready_mig")
        ready = conn.execute(
            "SELECT count(*), min(neg_priority), max(neg_priority) FROM ready_mig.executions_ready"
        ).fetchone()
        enqueued = conn.execute(
            "SELECT count(*), -max(priority), -min(priority) FROM ready_mig.workflow_executions"
            " WHERE status = 'enqueued'"
        ).fetchone()
        assert ready == enqueued and ready[0] == 1000
        claims, _ = claim_batch(conn, "ready_mig", worker_id="w1", names=["w"], n=1000, lease=LEASE, mark=ClaimMark())
        assert len(claims) == 1000
        left = conn.execute("SELECT count(*) FROM ready_mig.workflow_executions WHERE status = 'enqueued'")
        assert left.fetchone() == (0,)
        conn.execute("DROP SCHEMA ready_mig CASCADE")
