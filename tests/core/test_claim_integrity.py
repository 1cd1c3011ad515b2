"""What a claim takes is checked against the execution itself (issue 43, break 4): a ready row
left behind by a claim that rolled back while a cancel went on names the execution as it was,
and must not hand it, after a requeue, to a worker of another version, queue or run_at."""

from __future__ import annotations

from datetime import timedelta

import psycopg

from kestrel_core import Kestrel
from kestrel_core.dispatch.claim import ClaimMark, claim_batch

S = "kestrel"
LEASE = timedelta(seconds=30)


def take(db: psycopg.Connection, version: str | None, n: int = 5, mark: ClaimMark | None = None) -> list[int]:
    claims, _ = claim_batch(
        db, S, worker_id=f"v{version}", names=["w"], versions=[version], n=n, lease=LEASE, mark=mark
    )
    return [c.execution_id for c in claims]


def leave_a_stale_ready_row(db: psycopg.Connection, dsn: str, app: Kestrel, eid: int) -> None:
    """A claim locks the execution's ready row; a cancel commits meanwhile (its trigger skips
    the locked row); the claim rolls back: the ready row stays, naming an enqueued execution."""
    with psycopg.connect(dsn) as claimer:
        claimer.execute("SELECT 1 FROM kestrel.executions_ready WHERE id = %s FOR UPDATE", (eid,))
        app.cancel(eid, by="t")
        claimer.rollback()
    (stale,) = db.execute("SELECT count(*) FROM executions_ready WHERE id = %s", (eid,)).fetchone()
    assert stale == 1, "the cancel's trigger skipped the locked ready row"


def status_and_version(db: psycopg.Connection, eid: int) -> tuple[str, str | None]:
    row = db.execute("SELECT status, version FROM workflow_executions WHERE id = %s", (eid,)).fetchone()
    assert row is not None
    return row[0], row[1]


def run_by_version_1_then_requeued(db: psycopg.Connection, dsn: str, app: Kestrel, eid: int) -> None:
    """Behind a stale ready row, ``eid`` is requeued, taken by a version-1 worker, cancelled and
    requeued again: enqueued, as version 1."""
    leave_a_stale_ready_row(db, dsn, app, eid)
    app.requeue(eid, by="t")
    # A version-1 worker takes it (one row at a time, as a worker with one free slot would).
    for _ in range(3):
        if take(db, "1", n=1) == [eid]:
            break
    assert status_and_version(db, eid) == ("running", "1")
    app.cancel(eid, by="t")
    app.requeue(eid, by="t")


def test_a_stale_ready_row_cannot_hand_a_version_1_execution_to_a_version_2_worker(
    app: Kestrel, db: psycopg.Connection, dsn: str
) -> None:
    eid = app.enqueue("w", 1)  # no version yet: the first claim stamps its worker's
    run_by_version_1_then_requeued(db, dsn, app, eid)
    assert take(db, "2") == [], "a version-2 worker claimed a version-1 execution"
    assert status_and_version(db, eid) == ("enqueued", "1")
    assert take(db, "1") == [eid]


def test_a_stale_ready_row_claims_nothing_whatever_it_names(app: Kestrel, db: psycopg.Connection, dsn: str) -> None:
    """Every field a stale row can get wrong: the run_at (a requeue delayed past now), the
    status (cancelled, running elsewhere), the priority: the claim takes none of them."""
    a, b, c = app.enqueue_many("w", [1, 2, 3])
    for eid in (a, b, c):
        leave_a_stale_ready_row(db, dsn, app, eid)
    app.requeue(a, by="t")
    db.execute("UPDATE workflow_executions SET run_at = now() + interval '1 hour' WHERE id = %s", (a,))
    app.requeue(b, by="t")
    db.execute("UPDATE workflow_executions SET priority = 9 WHERE id = %s", (b,))
    # c stays cancelled. What is claimable: b alone (a is not due).
    assert take(db, None, n=10) == [b]
    assert status_and_version(db, a) == ("enqueued", None)
    assert status_and_version(db, c) == ("cancelled", None)
    # b's stale row may outlive the claim that took b by its current one (the claim skips an
    # execution its own statement already took), not the next claim, which takes nothing.
    assert take(db, None, n=10) == []
    assert db.execute("SELECT count(*) FROM executions_ready").fetchone() == (1,)  # a's own, not due


def test_a_stale_ready_row_in_a_limited_queue_claims_nothing(app: Kestrel, db: psycopg.Connection, dsn: str) -> None:
    db.execute("INSERT INTO queues (name, concurrency, declared_at) VALUES ('lim', 5, now())")
    eid = app.enqueue("w", 1, queue="lim")
    run_by_version_1_then_requeued(db, dsn, app, eid)
    assert take(db, "2") == []
    assert status_and_version(db, eid) == ("enqueued", "1")
    assert take(db, "1") == [eid]
