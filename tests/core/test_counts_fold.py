"""fold_finished_counts: the counters of old id blocks fold into one row per (workflow, status),
the sums stay exact, and later changes in a folded block are counted (issue 22)."""

from __future__ import annotations

import threading

import psycopg

from kestrel_core.dispatch import sweeper
from tests.waiting import wait_for

S = "kestrel"

# 5,000 finished executions (ids 1-5,000: blocks 0-4 of 1,024 ids): 'b' succeeds, 'a' fails
# 1 time in 5; then one enqueued execution, id 5,001.
SEED = """
INSERT INTO workflow_executions (workflow_name, status, finished_at)
SELECT CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END, CASE WHEN i % 10 = 0 THEN 'error' ELSE 'success' END, now()
  FROM generate_series(1, 5000) AS i
"""
SEED_LIVE = "INSERT INTO workflow_executions (workflow_name) VALUES ('a') RETURNING id"
SUMS = """
SELECT workflow_name, status, sum(n)::bigint FROM execution_counts GROUP BY 1, 2 HAVING sum(n) <> 0 ORDER BY 1, 2
"""
TRUTH = """
SELECT workflow_name, status, count(*) FROM workflow_executions
 WHERE status IN ('success', 'error', 'cancelled') GROUP BY 1, 2 ORDER BY 1, 2
"""
ROWS = "SELECT count(*) FROM execution_counts"
SHARDS = "SELECT DISTINCT shard FROM execution_counts ORDER BY 1"
# Five finished executions, as prune deletes them (rows another transaction holds are skipped:
# a bare DELETE waiting for them can deadlock with a step boundary, as any hand-made one can).
PRUNE_SOME = "SELECT kestrel.prune_finished(now(), 5, 'tester')"


def test_folding_keeps_the_sums_and_counts_later_changes(db: psycopg.Connection) -> None:
    db.execute(SEED)
    live = db.execute(SEED_LIVE).fetchone()[0]  # type: ignore[index]
    truth = db.execute(TRUTH).fetchall()
    assert db.execute(ROWS).fetchone()[0] == 5 * 3  # type: ignore[index]  # 5 blocks x (a success, a error, b success)

    assert sweeper.fold_counts(db, S, keep=1) == 4 * 3  # blocks 0-3 folded, block 4 kept
    assert db.execute(SUMS).fetchall() == truth
    assert [r[0] for r in db.execute(SHARDS)] == [-1, 4]
    assert sweeper.fold_counts(db, S, keep=1) == 0  # nothing left to fold

    # A late completion and a delete in folded blocks recreate their blocks' rows (+1, -1).
    db.execute("DELETE FROM workflow_executions WHERE id = 10")  # an error of 'a' in block 0
    db.execute("UPDATE workflow_executions SET status = 'success', finished_at = now() WHERE id = %s", (live,))
    truth = db.execute(TRUTH).fetchall()
    assert db.execute(SUMS).fetchall() == truth
    assert sweeper.fold_counts(db, S, keep=1) == 1  # block 0's new row; id 5,001 is in block 4
    assert db.execute(SUMS).fetchall() == truth
    assert [r[0] for r in db.execute(SHARDS)] == [-1, 4]


def test_folding_while_workers_complete_and_prune_keeps_the_counts_exact(app, db, start_worker, dsn) -> None:
    """Folds every few milliseconds (keep=1: every block but the newest) while a worker
    completes 1,500 executions across two blocks and prune deletes finished ones: no deadlock,
    no error, the sums equal the table."""

    @app.workflow
    def quick(ctx, n):
        return ctx.step("s", lambda: n)

    errors: list[BaseException] = []
    stop = threading.Event()

    def fold() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            while not stop.is_set():
                try:
                    sweeper.fold_counts(conn, S, keep=1)
                    conn.execute(PRUNE_SOME)
                except BaseException as exc:
                    errors.append(exc)
                    return

    folder = threading.Thread(target=fold)
    folder.start()
    try:
        start_worker(app, concurrency=8)
        app.enqueue_many("quick", list(range(1500)))
        wait_for(
            lambda: db.execute("SELECT count(*) = 0 FROM workflow_executions WHERE status <> 'success'").fetchone()[0],
            timeout=120,
            what="every execution finished",
        )
    finally:
        stop.set()
        folder.join()
    assert errors == []
    sweeper.fold_counts(db, S, keep=1)
    assert db.execute(SUMS).fetchall() == db.execute(TRUTH).fetchall()


# Past activity and a stale ready row, for the worker's once-a-minute jobs (issue 22).
SEED_PAST = """
INSERT INTO workflow_executions (workflow_name, status, created_at, started_at, finished_at)
SELECT 'a', 'success', now() - interval '5 minutes', now() - interval '5 minutes', now() - interval '5 minutes'
  FROM generate_series(1, 10)
"""
OLD_CLAIM = "UPDATE workflow_executions SET status = 'running', owner_id = 'old' WHERE id = %s"
RECORDED_COMPLETIONS = "SELECT coalesce(sum(completed), 0) FROM activity_minutes"
READY = "SELECT count(*) FROM executions_ready"


def test_the_workers_loop_records_activity_minutes_and_drops_stale_ready_rows(
    app, db, start_worker, monkeypatch
) -> None:
    db.execute(SEED_PAST)
    (stale,) = app.enqueue_many("unserved", [1])
    db.execute(OLD_CLAIM, (stale,))  # as code older than migration 0015 claimed: its ready row stays
    assert db.execute(READY).fetchone()[0] == 1  # type: ignore[index]
    monkeypatch.setattr(sweeper, "FOLD_EVERY_S", 0.2)

    @app.workflow
    def other(ctx, n):
        return n

    start_worker(app, concurrency=1)
    wait_for(lambda: db.execute(RECORDED_COMPLETIONS).fetchone()[0] == 10, what="the past minutes recorded")  # type: ignore[index]
    wait_for(lambda: db.execute(READY).fetchone()[0] == 0, what="the stale ready row dropped")  # type: ignore[index]
