"""Queues with limits, held across three worker processes (tests/core/queues_app.py):
a global concurrency of 3, a rate of 5 per 2 s, one running execution per key; sampled from
the table every few milliseconds while they run; then a rate of 4 per minute. Then pause/resume
and a worker that serves a subset of queues (in-process workers)."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from datetime import timedelta
from itertools import combinations

import psycopg
import pytest

from kestrel_core import ActionRefused, Kestrel, NotFound
from tests.conftest import TablesReset
from tests.waiting import wait_all_succeeded, wait_for, wait_until_none_left
from tests.worker_processes import start_worker_process as start_worker
from tests.worker_processes import stop_worker_processes

# 1,000 claims of the limited queue, each contended (12 slots for 3 places): its limit is hit
# throughout. 2,000 made this the dearest file of tests/core (16 s of CPU of a run's ~400).
QUICK, RATED, KEYED = 1000, 20, 12
RATE, WINDOW_S = 5, 2.0
PER_MINUTE, MINUTE_JOBS = 4, 12

# One sample: running now in the limited queue, and the most running for one key.
SAMPLE = """
SELECT count(*) FILTER (WHERE queue = 'limited'),
       coalesce(max(n) FILTER (WHERE queue = 'keyed'), 0),
       count(DISTINCT concurrency_key) FILTER (WHERE queue = 'keyed')
  FROM (SELECT queue, concurrency_key, count(*) OVER (PARTITION BY queue, concurrency_key) AS n
          FROM kestrel.workflow_executions WHERE status = 'running') AS r
"""
UNFINISHED = "SELECT count(*) FROM kestrel.workflow_executions WHERE status <> 'success'"


def start_worker_process(dsn: str, name: str, n: int, *extra: str) -> subprocess.Popen:
    return start_worker(
        dsn,
        "tests.core.queues_app:app",
        "--concurrency",
        "4",
        "--lease",
        "5",
        "--worker-id",
        name,
        "--processes",
        "1",
        "--log-level",
        "warning",
        *extra,
        env={"QUEUES_APP_N": str(n)},
    )


def share(total: int, i: int) -> int:
    """Worker i's part of ``total`` split in three."""
    return total // 3 + (i < total % 3)


class Sampler(threading.Thread):
    """Reads SAMPLE every few milliseconds until stopped."""

    def __init__(self, dsn: str) -> None:
        super().__init__(daemon=True)
        self.dsn = dsn
        self.samples: list[tuple[int, int, int]] = []
        self.done = threading.Event()

    def run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not self.done.wait(0.002):
                self.samples.append(conn.execute(SAMPLE).fetchone())


@pytest.fixture(scope="module")
def limited_run(migrated: str, tables_reset: TablesReset) -> Iterator[dict]:
    """Three worker processes run 1,000 'quick-N' executions (queue limited, concurrency 3),
    20 'rated-N' (5 per 2 s) and 12 'keyed-N' (3 keys, one running per key); worker N
    registers the workflows ending in N."""
    dsn = migrated
    tables_reset()
    procs = [start_worker_process(dsn, f"queue-worker-{i}", i) for i in range(3)]
    sampler = Sampler(dsn)
    try:
        with psycopg.connect(dsn, autocommit=True) as db:
            wait_for(
                lambda: (
                    db.execute("SELECT count(*) = 3 FROM kestrel.workers WHERE stopped_at IS NULL").fetchone()[0]
                    or any(p.poll() is not None for p in procs)
                ),
                timeout=30,
                what="three workers to register",
            )
            assert all(p.poll() is None for p in procs), [p.stdout.read() for p in procs if p.poll() is not None]
            sampler.start()
            with Kestrel(dsn) as app:
                # The keyed first, in one transaction, while the workers are idle: each worker's
                # first claim finds its share of every key at the head, so different keys run
                # side by side by construction (behind the backlog, on a loaded machine, they
                # were claimed one at a time and the test saw no overlap to judge).
                with psycopg.connect(dsn) as tx, tx.transaction():
                    for i in range(KEYED):  # every key in every worker's share
                        key = f"customer-{i // 3 % 3}"
                        app.enqueue(f"keyed-{i % 3}", {"s": 0.1}, concurrency_key=key, conn=tx)
                for i in range(3):  # each worker process runs its own: different heads
                    app.enqueue_many(f"quick-{i}", [{"s": 0.002}] * share(QUICK, i))
                    app.enqueue_many(f"rated-{i}", [{}] * share(RATED, i))
            wait_until_none_left(lambda: db.execute(UNFINISHED).fetchone()[0], what="every execution to succeed")
            sampler.done.set()
            sampler.join()
            rated = [
                r[0]
                for r in db.execute(
                    "SELECT started_at FROM kestrel.workflow_executions WHERE queue = 'rated' ORDER BY started_at"
                )
            ]
            queues = dict(
                db.execute(
                    "SELECT left(workflow_name, -2), queue FROM kestrel.workflow_executions GROUP BY 1, 2"
                ).fetchall()
            )
            keyed = db.execute(
                "SELECT concurrency_key, (output->>'began')::float8, (output->>'ended')::float8"
                " FROM kestrel.workflow_executions WHERE queue = 'keyed'"
            ).fetchall()
            per_minute = rate_per_minute_phase(dsn, db)
        yield {
            "samples": sampler.samples,
            "rated_starts": rated,
            "queues": queues,
            "per_minute": per_minute,
            "keyed": keyed,
        }
    finally:
        sampler.done.set()
        stop_worker_processes(procs, timeout=15)


def rate_per_minute_phase(dsn: str, db: psycopg.Connection) -> dict:
    """12 'minute-N' executions (4 per worker) on a queue limited to 4 claims a minute; once 4
    have run, one probe per worker on the default queue: each probe's claim is a claim that
    also looked at the rated queue (it had work and free slots), so when the probes are done
    every worker has tried again inside the minute."""
    with Kestrel(dsn) as app:
        for i in range(3):
            app.enqueue_many(f"minute-{i}", [{}] * (MINUTE_JOBS // 3))
        wait_for(
            lambda: (
                db.execute(
                    "SELECT count(*) FROM kestrel.workflow_executions WHERE queue = 'per-minute' AND status = 'success'"
                ).fetchone()[0]
                >= PER_MINUTE
            ),
            timeout=30,
            what=f"{PER_MINUTE} per-minute executions to run",
        )
        probes = [app.enqueue(f"probe-{i}", {}) for i in range(3)]
    wait_all_succeeded(db, probes, timeout=30, what="one probe per worker to run")
    starts = [
        r[0]
        for r in db.execute(
            "SELECT started_at FROM kestrel.workflow_executions WHERE queue = 'per-minute'"
            " AND started_at IS NOT NULL ORDER BY started_at"
        )
    ]
    probed = db.execute(
        "SELECT max(started_at), count(DISTINCT owner_id) FROM kestrel.workflow_executions WHERE id = ANY(%s)",
        (probes,),
    ).fetchone()
    return {"starts": starts, "last_probe": probed[0], "probe_workers": probed[1]}


def test_global_concurrency_never_exceeded_across_three_processes(limited_run: dict) -> None:
    samples = limited_run["samples"]
    assert len(samples) > 100, "the sampler must have watched the run"
    running = [s[0] for s in samples]
    assert max(running) <= 3, f"{max(running)} running in queue 'limited' at once (limit 3)"
    assert max(running) == 3, "the limit was reached at some point (the test exercised it)"
    assert limited_run["queues"] == {"quick": "limited", "rated": "rated", "keyed": "keyed"}


def test_rate_limit_holds_across_processes(limited_run: dict) -> None:
    starts = limited_run["rated_starts"]
    assert len(starts) == RATED
    window = timedelta(seconds=WINDOW_S)
    worst = max(sum(1 for t in starts[i:] if t < s + window) for i, s in enumerate(starts))
    assert worst == RATE, f"{worst} claims started within {WINDOW_S} s (rate {RATE} per {WINDOW_S} s)"


def test_a_rate_per_minute_holds_across_processes(limited_run: dict) -> None:
    run = limited_run["per_minute"]
    first = run["starts"][0]
    assert run["probe_workers"] == 3, "each worker claimed a probe"
    assert run["last_probe"] < first + timedelta(minutes=1), "the probes ran inside the first minute"
    in_first_minute = [t for t in run["starts"] if t < first + timedelta(minutes=1)]
    assert len(in_first_minute) == PER_MINUTE, (
        f"{len(in_first_minute)} of {MINUTE_JOBS} claimed within a minute by 3 workers (rate {PER_MINUTE} a minute)"
    )


def test_one_running_execution_per_key(limited_run: dict) -> None:
    samples = limited_run["samples"]
    assert max(s[1] for s in samples) == 1, "two executions with the same key were running at once"
    # Exactly, from when each ran (the sampler can miss a short overlap on a loaded machine).
    keyed = limited_run["keyed"]
    assert len(keyed) == KEYED
    overlapping = [(a[0], b[0]) for a, b in combinations(keyed, 2) if a[1] < b[2] and b[1] < a[2]]
    assert not [pair for pair in overlapping if pair[0] == pair[1]], "two executions with the same key ran at once"
    assert overlapping, "different keys ran side by side (the test exercised the limit per key, not a queue of one)"


# -- pause / resume, and serving a subset of queues (in-process workers) ---------------------


def held_app(dsn: str) -> Kestrel:
    app = Kestrel(dsn)
    app.queue("held", concurrency=5)

    @app.workflow("held_job", queue="held")
    def held_job(ctx, input):
        return input

    @app.workflow("probe")
    def probe(ctx, input):
        return input

    return app


def status_of(db: psycopg.Connection, eid: int) -> str:
    return db.execute("SELECT status FROM workflow_executions WHERE id = %s", (eid,)).fetchone()[0]


def test_paused_queue_is_not_claimed_until_resumed(dsn: str, db: psycopg.Connection, start_worker) -> None:
    with held_app(dsn) as app:
        start_worker(app)  # declares the queue
        wait_for(lambda: db.execute("SELECT 1 FROM queues WHERE name = 'held'").fetchone(), what="declaration")
        app.pause_queue("held", by="alice", comment="maintenance")
        held = app.enqueue("held_job", 1)
        probe = app.enqueue("probe", 2)
        wait_for(lambda: status_of(db, probe) == "success", what="the probe in the default queue to run")
        assert status_of(db, held) == "enqueued"
        with pytest.raises(ActionRefused, match="already paused"):
            app.pause_queue("held", by="bob")
        app.resume_queue("held", by="alice")
        wait_for(lambda: status_of(db, held) == "success", what="the held execution to run once resumed")
        with pytest.raises(NotFound, match="no queue named"):
            app.pause_queue("nope", by="alice")
    audit = db.execute("SELECT actor, action, comment, details->>'queue' FROM operator_actions ORDER BY id").fetchall()
    assert audit == [("alice", "pause_queue", "maintenance", "held"), ("alice", "resume_queue", None, "held")]


def test_worker_serves_only_its_queues(dsn: str, db: psycopg.Connection, start_worker) -> None:
    with held_app(dsn) as app:
        start_worker(app, queues=["default"])
        held = app.enqueue("held_job", 1)
        probe = app.enqueue("probe", 2)
        wait_for(lambda: status_of(db, probe) == "success", what="the default queue to be served")
        assert status_of(db, held) == "enqueued"
        start_worker(app, queues=["held"])
        wait_for(lambda: status_of(db, held) == "success", what="a worker for 'held' to run it")


def test_a_worker_told_to_serve_an_undeclared_queue_says_so(
    dsn: str, start_worker, caplog: pytest.LogCaptureFixture
) -> None:
    with held_app(dsn) as app, caplog.at_level("WARNING", logger="kestrel.worker"):
        start_worker(app, queues=["held", "default"])
        assert "undeclared_queues" not in caplog.text
        start_worker(app, queues=["helt", "held", "zzz"])
    (line,) = [r.getMessage() for r in caplog.records if "undeclared_queues" in r.getMessage()]
    assert "queues=helt,zzz (no code declares them" in line and "check --queues for a typo" in line


def test_explicit_queue_and_queue_priority(dsn: str, db: psycopg.Connection) -> None:
    with Kestrel(dsn) as app:
        app.queue("urgent", priority=10)

        @app.workflow("job", queue="urgent")
        def job(ctx, input):
            return input

        from kestrel_core.dispatch.queues import declare

        with app.connection() as conn:
            declare(conn, app.schema, list(app.queues.values()), {"urgent": ["job"]})
        a = app.enqueue("job", 1)
        b = app.enqueue("job", 2, queue="default", priority=3)
        with Kestrel(dsn) as no_code:  # a process without the code: the bound queue
            c = no_code.enqueue("job", 3)
    rows = db.execute("SELECT id, queue, priority, version FROM workflow_executions ORDER BY id").fetchall()
    assert rows[0][:3] == (a, "urgent", 10) and rows[0][3] is not None
    assert rows[1][:3] == (b, "default", 3)
    assert rows[2] == (c, "urgent", 10, None)
