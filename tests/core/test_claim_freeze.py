"""A worker frozen between its claim statement and the claim's COMMIT (issue 43, break 7).

The claim used to be a transaction its client committed: a worker stopped (SIGSTOP, a GC
pause) right after the claim statement left it open, its rows locked and ``enqueued`` with no
lease to lapse, and every other worker skipped them for as long as the freeze lasted. Now the
fast claim is one statement that commits on the server, and a claim transaction (the limited
path) is ended by the server once its client sits idle in it for half the lease (at most
IDLE_IN_CLAIM_MS): either way
another worker runs the executions within the lease (plus a sweep) of the freeze, while the
frozen worker is still stopped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from kestrel_core import Kestrel
from tests.waiting import wait_all_succeeded, wait_for
from tests.worker_processes import one_worker

LEASE = 2
EXECUTIONS = 4


def stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def worker(dsn: str, log: Path, worker_id: str, freeze: bool) -> subprocess.Popen:
    env = {"KESTREL_FREEZE_AFTER_CLAIM": "1" if freeze else "0"}
    return one_worker(
        dsn, "tests.core.claim_freeze_app:app", log, worker_id, lease=LEASE, concurrency=2 * EXECUTIONS, env=env
    )


@pytest.fixture
def workers(dsn: str, tmp_path: Path) -> Iterator[list[subprocess.Popen]]:
    procs: list[subprocess.Popen] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
        proc.wait(timeout=10)


@pytest.mark.parametrize("workflow", ["w", "lim"])
def test_a_worker_frozen_after_its_claim_statement_holds_nothing_past_its_lease(
    app: Kestrel, db: psycopg.Connection, dsn: str, tmp_path: Path, workers: list[subprocess.Popen], workflow: str
) -> None:
    frozen = worker(dsn, tmp_path / "frozen.log", "frozen", freeze=True)
    workers.append(frozen)
    wait_for(
        lambda: db.execute("SELECT 1 FROM workers WHERE worker_id = 'frozen'").fetchone() or frozen.poll() is not None,
        timeout=30,
        what="the worker to register",
    )
    ids = app.enqueue_many(workflow, list(range(EXECUTIONS)))
    wait_for(lambda: stopped(frozen.pid), timeout=30, what="the worker to freeze after its claim")
    frozen_at = time.monotonic()
    workers.append(worker(dsn, tmp_path / "other.log", "other", freeze=False))
    # Within the lease, a sweep and the idle-in-transaction bound (2 s) of the freeze (plus
    # the other worker's start): far less than the freeze, which lasts to the end of the test.
    wait_all_succeeded(db, ids, timeout=20, what="another worker to run what the frozen one claimed")
    assert stopped(frozen.pid), "the frozen worker must still be stopped"
    print(f"recovered {time.monotonic() - frozen_at:.2f} s after the freeze")


def test_a_claim_transaction_paused_past_its_lease_never_commits_a_lapsed_lease(
    app: Kestrel, db: psycopg.Connection, dsn: str, ledger: psycopg.Connection, tmp_path: Path, workers
) -> None:
    """Issue 43 review (d): the limited claim is a transaction (any claim is, through
    PgBouncer); a client that pauses between its claim statement and COMMIT for longer than the
    lease (1 s) but less than the old idle-in-transaction bound (2 s) committed leases already
    lapsed. The bound is now below the lease: the server ends such a transaction instead."""
    pooled = bool(getattr(app, "transaction_pooling", False))
    log = tmp_path / "paused.log"
    env = {"KESTREL_PAUSE_IN_CLAIM_S": "1.5", "KESTREL_LEDGER_DSN": dsn, "KESTREL_TEST_POOLING": "1" if pooled else "0"}
    route = app.dsn if pooled else dsn
    workers.append(
        one_worker(route, "tests.core.claim_freeze_app:app", log, lease=1, concurrency=2 * EXECUTIONS, env=env)
    )
    wait_for(  # its queue declared: limited, so claimed by a transaction on both routes
        lambda: db.execute("SELECT 1 FROM queues WHERE name = 'limited' AND concurrency = 8").fetchone(),
        timeout=30,
        what="the worker to declare its queue",
    )
    ids = app.enqueue_many("lim", list(range(EXECUTIONS)))
    wait_for(
        lambda: ledger.execute("SELECT step_id, execution_id FROM public.ledger").fetchall(),
        timeout=30,
        what="the paused claim to be recorded",
    )
    wait_all_succeeded(db, ids, timeout=30, what="the executions to run")
    assert ledger.execute("SELECT step_id, execution_id FROM public.ledger").fetchall() == [("ended", 0)], (
        "a claim committed after its lease lapsed"
    )
