"""Crash recovery with real worker processes: SIGKILL, SIGSTOP, SIGTERM, Postgres restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from kestrel_core import DatabaseUnavailable, Kestrel
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
LEASE = 2.0
SWEEP = 1.0  # the worker's default sweep interval (jittered by +-20 %)
LEASE_EXPIRES = "SELECT lease_expires FROM workflow_executions WHERE id = %s"
FIRST_STEP_OF = "SELECT min(started_at) FROM step_attempts WHERE execution_id = %s AND owner_id = %s"


class Workers:
    """Worker subprocesses running tests/core/crash_app.py; all killed at teardown."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.procs: list[subprocess.Popen] = []

    def start(self, name: str, step_seconds: float = 0.5, lease: float = LEASE) -> subprocess.Popen:
        env = dict(
            os.environ,
            KESTREL_DSN=self.dsn,
            WORKER_NAME=name,
            CRASH_STEP_SECONDS=str(step_seconds),
            PYTHONPATH=str(ROOT),
        )
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kestrel_console",
                "worker",
                "tests.core.crash_app:app",
                "--concurrency",
                "4",
                "--lease",
                str(lease),
                "--worker-id",
                name,
                "--processes",
                "1",
            ],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.procs.append(proc)
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            wait_for(
                lambda: (
                    conn.execute(
                        "SELECT 1 FROM kestrel.workers WHERE worker_id = %s AND stopped_at IS NULL", (name,)
                    ).fetchone()
                    or proc.poll() is not None
                ),
                timeout=20,
                what=f"worker {name} to register",
            )
        assert proc.poll() is None, proc.stdout.read()
        return proc

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.kill(proc.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
                proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def workers(dsn: str, ledger) -> Iterator[Workers]:
    group = Workers(dsn)
    yield group
    group.stop_all()


def checkpoints(db: psycopg.Connection, eid: int) -> list[str]:
    return [
        r[0]
        for r in db.execute("SELECT step_id FROM operation_outputs WHERE execution_id = %s ORDER BY step_id", (eid,))
    ]


def ran(db: psycopg.Connection, eid: int) -> dict[str, int]:
    return dict(
        db.execute("SELECT step_id, count(*) FROM public.ledger WHERE execution_id = %s GROUP BY 1", (eid,)).fetchall()
    )


def test_sigkilled_worker_is_recovered_and_checkpointed_steps_not_rerun(app: Kestrel, db, workers: Workers) -> None:
    a = workers.start("worker-a")
    eid = app.enqueue("slow", {"steps": 6})
    wait_for(lambda: len(checkpoints(db, eid)) >= 2, what="two checkpoints")
    done_before_kill = checkpoints(db, eid)
    a.send_signal(signal.SIGKILL)
    a.wait()
    killed_at = time.monotonic()
    (lease_left_by_a,) = db.execute(LEASE_EXPIRES, (eid,)).fetchone()
    workers.start("worker-b")
    # A hang guard only: how soon the lease and the sweep recover it is measured by
    # `python -m bench recovery` (bench/recovery.py, target in bench/targets.py).
    wait_for(
        lambda: (
            db.execute(
                "SELECT owner_id = 'worker-b' AND status = 'running' FROM workflow_executions WHERE id = %s", (eid,)
            ).fetchone()[0]
            or app.get(eid).done
        ),
        timeout=30,
        interval=0.02,
        what="worker-b to take over",
    )
    recovered_in = time.monotonic() - killed_at
    wait_for(lambda: app.get(eid).done, timeout=30)
    # Taken over once worker-a's lease had lapsed, not before (the database's clock).
    (first_step_of_b,) = db.execute(FIRST_STEP_OF, (eid, "worker-b")).fetchone()
    assert first_step_of_b >= lease_left_by_a
    assert app.get(eid).status == "success"
    assert app.get(eid).output == [f"s{i}-done" for i in range(6)]
    counts = ran(db, eid)
    for step in done_before_kill:
        assert counts[step] == 1, f"checkpointed step {step} ran again"
    assert sum(c - 1 for c in counts.values()) <= 1  # at most the step in flight at the kill re-ran
    print(
        f"\nrecovered in {recovered_in:.2f} s (lease {LEASE} s, sweep {SWEEP} s); re-run steps: "
        f"{[s for s, c in counts.items() if c > 1]}"
    )


def test_sigstopped_worker_loses_execution_and_cannot_complete_it(app: Kestrel, db, workers: Workers) -> None:
    a = workers.start("worker-a", step_seconds=1.0)
    eid = app.enqueue("slow", {"steps": 3})
    wait_for(
        lambda: (
            db.execute("SELECT count(*) FROM public.ledger WHERE execution_id = %s", (eid,)).fetchone()[0] >= 1
            or db.execute(
                "SELECT count(*) FROM step_attempts WHERE execution_id = %s AND step_id = 's1'", (eid,)
            ).fetchone()[0]
            >= 1
        ),
        what="worker-a to be in a step",
    )
    os.kill(a.pid, signal.SIGSTOP)
    workers.start("worker-b", step_seconds=0.2)
    wait_for(lambda: app.get(eid).done, timeout=20, what="worker-b to finish the execution")
    final = db.execute(
        "SELECT status, owner_id, output, updated_at FROM workflow_executions WHERE id = %s", (eid,)
    ).fetchone()
    assert final[:2] == ("success", "worker-b")
    outputs = dict(
        db.execute("SELECT step_id, output FROM operation_outputs WHERE execution_id = %s", (eid,)).fetchall()
    )
    lines: list[str] = []

    def follow() -> None:
        for line in a.stdout:
            lines.append(line)

    threading.Thread(target=follow, daemon=True).start()
    os.kill(a.pid, signal.SIGCONT)  # worker-a wakes up mid-step and tries to write
    wait_for(
        lambda: any("event=write_refused" in line or "event=claim_lost" in line for line in lines),
        timeout=30,
        what="worker-a to find it no longer owns the execution",
    )
    a.terminate()  # it finishes the step in flight (its write refused) and exits
    try:
        a.wait(timeout=30)
    except subprocess.TimeoutExpired:
        a.kill()
        raise AssertionError(f"worker-a did not exit within 30 s of SIGTERM; its log ends:\n{''.join(lines)[-3000:]}")
    # Checked once worker-a is gone: nothing it did after waking up changed the execution.
    after = db.execute(
        "SELECT status, owner_id, output, updated_at FROM workflow_executions WHERE id = %s", (eid,)
    ).fetchone()
    assert after == final
    assert (
        dict(db.execute("SELECT step_id, output FROM operation_outputs WHERE execution_id = %s", (eid,)).fetchall())
        == outputs
    )
    assert final[2] == [outputs[f"s{i}"] for i in range(3)]


def test_sigterm_finishes_the_step_then_releases_the_lease(app: Kestrel, db, workers: Workers) -> None:
    a = workers.start("worker-a", step_seconds=1.0, lease=30)
    eid = app.enqueue("slow", {"steps": 5})
    wait_for(
        lambda: db.execute("SELECT count(*) FROM step_attempts WHERE execution_id = %s", (eid,)).fetchone()[0] >= 1
    )
    a.send_signal(signal.SIGTERM)
    out = a.communicate(timeout=40)[0]
    assert a.returncode == 0, out
    row = db.execute("SELECT status, lease_expires FROM workflow_executions WHERE id = %s", (eid,)).fetchone()
    assert row == ("enqueued", None)  # released at once, not left to a 30 s lease
    assert "s0" in checkpoints(db, eid)  # the step in flight finished and was checkpointed
    assert db.execute("SELECT stopped_at IS NOT NULL FROM workers WHERE worker_id = 'worker-a'").fetchone() == (True,)


def test_sleep_survives_a_restart_of_every_worker_process(app: Kestrel, db, workers: Workers) -> None:
    a = workers.start("worker-a")
    eid = app.enqueue("sleeper", {"seconds": 2})
    wait_for(lambda: app.get(eid).status == "waiting")
    a.send_signal(signal.SIGKILL)
    a.wait()
    workers.start("worker-b")
    wait_for(lambda: app.get(eid).done, timeout=15)
    assert app.get(eid).status == "success"
    assert ran(db, eid) == {"before": 1, "after": 1}


def test_postgres_restart_mid_run(private_cluster) -> None:
    dsn = private_cluster.create_database(f"restart_{os.getpid()}")
    app = Kestrel(dsn)
    app.migrate()
    progress: list[int] = []

    @app.workflow("chain")
    def chain(ctx, n):
        total = 0
        for i in range(5):
            total += ctx.step(f"s{i}", lambda i=i: (time.sleep(0.1), i)[1])
        progress.append(n)
        return total

    worker = app.worker(concurrency=4, lease=timedelta(seconds=3), poll_interval=0.2, sweep_interval=0.5)
    worker.start()
    try:
        ids = app.enqueue_many("chain", list(range(20)))
        wait_for(lambda: len(progress) >= 3, timeout=20, what="some executions to finish")
        private_cluster.restart()
        wait_for(
            lambda: all(app.get(i).done for i in ids),
            timeout=60,
            interval=0.2,
            what="every execution to finish after the restart",
        )
        assert {app.get(i).status for i in ids} == {"success"}
        assert {app.get(i).output for i in ids} == {10}
    finally:
        worker.stop(grace=timedelta(0))
        app.close()


def test_a_worker_started_while_postgres_is_down_waits_for_it(private_cluster, caplog) -> None:
    dsn = private_cluster.create_database(f"late_{os.getpid()}")
    app = Kestrel(dsn)
    app.migrate()

    @app.workflow("double")
    def double(ctx, n):
        return ctx.step("times-two", lambda: 2 * n)

    eid = app.enqueue("double", 21)
    private_cluster.stop()
    worker = app.worker(concurrency=2, lease=timedelta(seconds=3), poll_interval=0.2, startup_timeout=30)
    starting = threading.Thread(target=worker.start)
    caplog.set_level("WARNING", logger="kestrel.worker")
    try:
        starting.start()
        wait_for(
            lambda: "event=waiting_for_database" in caplog.text, timeout=15, what="the worker to wait for the database"
        )
        assert starting.is_alive(), "start() should still be waiting for the database"
        private_cluster.start()
        starting.join(timeout=30)
        assert not starting.is_alive()
        wait_for(lambda: app.get(eid).done, timeout=20, what="the execution enqueued before the outage")
        assert (app.get(eid).status, app.get(eid).output) == ("success", 42)
        assert "event=waiting_for_database" in caplog.text
    finally:
        worker.stop(grace=timedelta(0))
        app.close()


def test_a_worker_gives_up_on_an_unreachable_database_after_its_startup_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = Kestrel("postgresql://kestrel:s3cret@127.0.0.1:1/nowhere")
    app.workflow("noop")(lambda ctx, _: None)
    worker = app.worker(startup_timeout=1.0)
    caplog.set_level("WARNING", logger="kestrel.worker")
    t0 = time.monotonic()
    with pytest.raises(
        DatabaseUnavailable, match="cannot connect to PostgreSQL at kestrel@127.0.0.1:1/nowhere"
    ) as info:
        worker.start()
    # It kept retrying (with backoff) until its window closed: never sooner, whatever the load.
    assert time.monotonic() - t0 >= 1.0
    retries = [r.getMessage() for r in caplog.records if "event=waiting_for_database" in r.getMessage()]
    assert len(retries) >= 2, retries
    assert "s3cret" not in str(info.value) and not any("s3cret" in r for r in retries)


def test_stopping_a_worker_that_waits_for_the_database_ends_the_wait(caplog: pytest.LogCaptureFixture) -> None:
    app = Kestrel("host=127.0.0.1 port=1 dbname=nowhere")
    app.workflow("noop")(lambda ctx, _: None)
    worker = app.worker(startup_timeout=60)
    outcome: list[object] = []

    def start() -> None:
        try:
            outcome.append(worker.start())
        except BaseException as exc:  # the test asserts there was none
            outcome.append(exc)

    starting = threading.Thread(target=start)
    caplog.set_level("WARNING", logger="kestrel.worker")
    starting.start()
    wait_for(
        lambda: "event=waiting_for_database" in caplog.text, timeout=15, what="the worker to wait for the database"
    )
    worker.stop()
    # Its startup window is 60 s: ended within 10 s, the wait was ended by the stop, and
    # start() returned instead of giving up with DatabaseUnavailable.
    starting.join(timeout=10)
    assert not starting.is_alive()
    assert outcome == [worker], outcome


def test_a_fork_survives_a_sigkill_and_never_runs_the_steps_it_kept(app: Kestrel, db, workers: Workers) -> None:
    """Issue 47: a fork from s2 of a six-step run whose worker is killed mid-step: another
    worker finishes it; s0 and s1 (kept) never run in the fork, each later step once, save the
    step in flight at the kill."""
    a = workers.start("worker-a", step_seconds=0.2)
    origin = app.enqueue("slow", {"steps": 6})
    wait_for(lambda: app.get(origin).done, timeout=30, what="the origin to finish")
    fork = app.fork(origin, from_step="s2", by="alice")
    wait_for(lambda: "s3" in checkpoints(db, fork), timeout=30, what="the fork past s3")
    a.send_signal(signal.SIGKILL)
    a.wait()
    workers.start("worker-b", step_seconds=0.2)
    wait_for(lambda: app.get(fork).done, timeout=30, what="the fork to finish on worker-b")
    assert app.get(fork).status == "success"
    assert app.get(fork).output == [f"s{i}-done" for i in range(6)]
    counts = ran(db, fork)
    assert "s0" not in counts and "s1" not in counts
    assert set(counts) == {f"s{i}" for i in range(2, 6)}
    assert sum(c - 1 for c in counts.values()) <= 1  # at most the step in flight at the kill re-ran
