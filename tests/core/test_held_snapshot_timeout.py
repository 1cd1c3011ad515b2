"""Under a held snapshot, with a statement_timeout shorter than a walk through the dead index
entries it left (issue 43, break 6): a row behind the claim mark, and a lapsed lease, are still
reached.

The walk from the start was stamped before it ran and never recorded when the server
cancelled it, so it was cancelled every time and the rows behind the mark (a higher priority)
were never claimed: 0 of 30 in 68 s while 47,574 others ran. The lease sweep had the same
shape. Now a cancelled walk is recorded, and the look behind the mark goes on in slices of the
ready table's heap, each bounded by its size; the lease sweep owner by owner through the
workers that stopped beating, each walk bounded by one dead worker's entries.

Dead entries are made directly: rows inserted and deleted after the snapshot was taken, which
vacuum may not remove while it is held.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from kestrel_core import Kestrel
from tests.core.conftest import feeding
from tests.waiting import wait_for

DEAD = 300_000
TIMEOUT_MS = 200  # well under a walk through DEAD entries (~0.45 s), well over any other statement


@pytest.fixture
def held_snapshot(dsn: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(dsn) as holder:
        holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        holder.execute("SELECT 1")
        yield holder


@pytest.fixture
def timed_app(dsn: str) -> Iterator[Kestrel]:
    """The app, its sessions (the worker's) with a statement_timeout; its workflow ``w``
    returns its input."""
    with Kestrel(make_conninfo(dsn, options=f"-c statement_timeout={TIMEOUT_MS}")) as app:

        @app.workflow("w")
        def w(ctx, n):
            return n

        yield app


def test_a_row_behind_the_mark_is_claimed_when_every_walk_from_the_start_times_out(
    timed_app: Kestrel, db: psycopg.Connection, held_snapshot: psycopg.Connection, start_worker
) -> None:
    # Many slots, mostly free (the feed is a trickle): each claim asks for many rows, so a walk
    # from the start goes on past the urgent row, into the dead entries.
    start_worker(timed_app, worker_id="t", concurrency=16)
    with feeding(timed_app, "w") as fed:
        wait_for(
            lambda: (
                len(fed) > 20
                and db.execute("SELECT count(*) > 10 FROM workflow_executions WHERE status = 'success'").fetchone()[0]
            ),
            what="the worker to claim (its mark past the start)",
        )
        # Dead entries behind the mark (an hour old in claim order), ahead of nothing live.
        db.execute(
            "INSERT INTO executions_ready (id, neg_priority, run_at, workflow_name, queue)"
            " SELECT 9000000000 + g, 0, now() - interval '1 hour' + g * interval '1 ms', 'w', 'default'"
            " FROM generate_series(1, %s) g",
            (DEAD,),
        )
        db.execute("DELETE FROM executions_ready WHERE id > 9000000000")
        started = time.monotonic()
        urgent = timed_app.enqueue("w", "urgent", priority=100)  # behind the mark, before the dead entries
        wait_for(
            lambda: db.execute(
                "SELECT status <> 'enqueued' FROM workflow_executions WHERE id = %s", (urgent,)
            ).fetchone()[0],
            timeout=30,
            what="the urgent execution to be claimed",
        )
        print(f"claimed {time.monotonic() - started:.2f} s after its enqueue")
    assert held_snapshot.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS  # held all along


def test_a_lapsed_lease_is_swept_when_every_full_sweep_times_out(
    timed_app: Kestrel, db: psycopg.Connection, held_snapshot: psycopg.Connection, start_worker
) -> None:
    (stuck,) = timed_app.enqueue_many("w", ["stuck"])
    # A worker that died an hour ago holding it: its row, its lapsed lease.
    db.execute("INSERT INTO workers (worker_id, last_heartbeat) VALUES ('gone', now() - interval '1 hour')")
    db.execute(
        "UPDATE workflow_executions SET status = 'running', owner_id = 'gone', claim_epoch = 1,"
        " lease_expires = now() - interval '1 second' WHERE id = %s",
        (stuck,),
    )
    # The churn of a busy worker under the snapshot: running rows with older leases, inserted
    # and deleted, dead entries of the running rows' index that a full sweep walks through.
    db.execute(
        "INSERT INTO workflow_executions (workflow_name, status, queue, owner_id, lease_expires)"
        " SELECT 'w', 'running', 'default', 'busy', now() - interval '1 hour' + g * interval '1 ms'"
        " FROM generate_series(1, %s) g",
        (DEAD,),
    )
    db.execute("DELETE FROM workflow_executions WHERE id > %s", (stuck,))
    started = time.monotonic()
    start_worker(timed_app, worker_id="t", concurrency=2, lease=timedelta(seconds=2))
    wait_for(
        lambda: db.execute("SELECT claim_epoch > 1 FROM workflow_executions WHERE id = %s", (stuck,)).fetchone()[0],
        timeout=45,
        what="the lapsed lease to be swept and the execution claimed again",
    )
    # (Its run may then fail: its writes cross the same dead entries under the same timeout.)
    print(f"swept and claimed again {time.monotonic() - started:.2f} s after the worker started")
    assert held_snapshot.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
