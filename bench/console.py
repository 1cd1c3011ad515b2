"""Console: the dashboard's refresh queries on a big history (1M finished + 10k live).

Times ``kestrel_console.read.Reader.dashboard()`` (every dashboard read, one snapshot, one
pipelined round trip) end to end from the client, and each refresh query of
``Reader.refresh_statements()`` on its own, p50/p95.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from kestrel_core.db import render
from kestrel_core.dispatch import FOLD_EVERY_S, fold_activity, fold_counts

from .databases import fresh_database
from .report import summary_ms

SCHEMA = "kestrel"
NAMES = ["billing", "remediate", "provision", "ci"]
# The finished executions' inputs: {"n": i, "pod": "api-<i % PODS>", "region": one of REGIONS}
# (a pod is rare: 1 in PODS; a region common: 1 in 3), and every 10th an idempotency key
# order-<i>, for the search's input.x= and key: filters.
PODS = 5000
REGIONS = ["eu", "us", "ap"]

# Finished executions spread evenly over the last ``spread`` (newest has the highest id), four
# workflow names, every 10th an error; ``ANALYZE`` afterwards as autovacuum would.
SEED_FINISHED = """
INSERT INTO {schema}.workflow_executions
    (workflow_name, status, input, output, error, owner_id, claims, claim_epoch, run_at,
     created_at, updated_at, started_at, finished_at, idempotency_key)
SELECT (%(names)s::text[])[1 + i %% 4],
       CASE WHEN i %% 10 = 0 THEN 'error' ELSE 'success' END,
       jsonb_build_object('n', i, 'pod', 'api-' || (i %% %(pods)s::int), 'region', (%(regions)s::text[])[1 + i %% 3]),
       CASE WHEN i %% 10 = 0 THEN NULL ELSE jsonb_build_object('ok', true) END,
       CASE WHEN i %% 10 = 0 THEN 'step ''work'' failed: boom' END,
       'worker-' || (i %% 3), 1, 1, fin - interval '3 seconds', fin - interval '3 seconds', fin,
       fin - interval '2 seconds', fin, CASE WHEN i %% 10 = 3 THEN 'order-' || i END
  FROM generate_series(%(n)s::int, 1, -1) AS i,
       LATERAL (SELECT now() - %(spread)s::interval * i / %(n)s::int AS fin) AS t
"""

# Live executions: 60% enqueued, 30% running (1 in 60 with a lapsed lease), 10% waiting on an
# approval gate. The other leases run an hour: at 30 s (before) they had all lapsed by the time
# a 10M seed was timed, and stuck_leases returned its 500-row page there, ~50 rows at 1M.
SEED_LIVE = """
INSERT INTO {schema}.workflow_executions
    (workflow_name, status, input, owner_id, lease_expires, claims, claim_epoch, run_at,
     created_at, updated_at, started_at)
SELECT (%(names)s::text[])[1 + i %% 4], kind,
       jsonb_build_object('n', i),
       CASE WHEN kind <> 'enqueued' THEN 'worker-' || (i %% 3) END,
       CASE WHEN kind = 'running'
            THEN now() + CASE WHEN i %% 60 = 0 THEN interval '-1 minute' ELSE interval '1 hour' END END,
       CASE WHEN kind = 'enqueued' THEN 0 ELSE 1 END, CASE WHEN kind = 'enqueued' THEN 0 ELSE 1 END,
       now() - interval '1 second' * (i %% 600), now() - interval '1 second' * (i %% 600), now(),
       CASE WHEN kind <> 'enqueued' THEN now() - interval '1 second' * (i %% 300) END
  FROM generate_series(1, %(n)s::int) AS i,
       LATERAL (SELECT CASE WHEN i %% 10 < 6 THEN 'enqueued' WHEN i %% 10 < 9 THEN 'running'
                            ELSE 'waiting' END AS kind) AS k
"""
SEED_WAITS = """
INSERT INTO {schema}.workflow_waits (execution_id, step_id, kind, wake_at, details, created_at)
SELECT id, 'approve', 'approval', now() + interval '2 days', '{{"patch": "restart"}}', updated_at
  FROM {schema}.workflow_executions WHERE status = 'waiting'
"""
SEED_WORKERS = """
INSERT INTO {schema}.workers (worker_id, hostname, pid, workflows, concurrency)
SELECT 'worker-' || i, 'host-' || i, 100 + i, %(names)s::text[], 16 FROM generate_series(0, 2) AS i
"""
# Ranges for every id the seed hands out (the history is partitioned by id range, issue 22): a
# running engine's workers create them a few ranges ahead as the ids grow; the seed jumps.
RANGE_SIZE = "SELECT range_size FROM {schema}.history_settings"
RANGES_AHEAD = "SELECT {schema}.ensure_partitions(%s)"
MAX_AHEAD = 50  # ensure_partitions' own limit
ANALYZE = "ANALYZE {schema}.workflow_executions, {schema}.workflow_waits, {schema}.workers, {schema}.execution_counts"
VACUUM = "VACUUM (ANALYZE) {schema}.workflow_executions, {schema}.execution_counts"
# The seeded workers beat while the refreshes are timed, as running workers do (every lease/3):
# otherwise they are dead 30 s after the seed, and the dashboard would time "no live worker
# serves any workflow" (issue 22). They also fold every minute, as running workers do
# (sweeper.fold_counts, sweeper.fold_activity; the seed folds once): the counters of old id
# blocks go into one row per (workflow, status), and the activity of the closed minutes is
# recorded, so that a refresh reads live only what happened since the last fold, not a window
# that grows by a minute of history each minute of the run.
HEARTBEAT = "UPDATE {schema}.workers SET last_heartbeat = now()"
BEAT_EVERY_S = 5.0


@contextmanager
def beating(dsn: str) -> Iterator[None]:
    """Keep the seeded workers' heartbeats fresh and fold every minute (a thread) for the
    duration of the block."""
    stop = threading.Event()

    def beat() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            next_fold = time.monotonic() + FOLD_EVERY_S
            while True:
                conn.execute(render(HEARTBEAT, SCHEMA))
                if time.monotonic() >= next_fold:
                    fold_counts(conn, SCHEMA)
                    fold_activity(conn, SCHEMA)
                    next_fold += FOLD_EVERY_S
                if stop.wait(BEAT_EVERY_S):
                    return

    thread = threading.Thread(target=beat, name="bench-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


# The free-text filter walks the history until a page is full (none matches here: all of
# it), 2-4 s at 1M finished and ~10x that at 10M: timed 3 times, not 30, and never part of a
# dashboard refresh.
FEW_SAMPLES = {"list_executions[text]"}
# Each query on its own may take that long (the free-text filter at 10M: ~40 s on a slow day).
QUERY_TIMEOUT_MS = 300_000


def seed(dsn: str, *, finished: int, live: int, spread_hours: float) -> float:
    """Seed the history and the live rows; returns the seconds it took."""
    started = time.monotonic()
    params = {"names": NAMES, "spread": f"{spread_hours} hours", "pods": PODS, "regions": REGIONS}
    with psycopg.connect(dsn, autocommit=True) as conn:
        size = conn.execute(render(RANGE_SIZE, SCHEMA)).fetchone()[0]
        conn.execute(render(RANGES_AHEAD, SCHEMA), (min(MAX_AHEAD, -(-(finished + live) // size) + 1),))
        conn.execute(render(SEED_FINISHED, SCHEMA), {**params, "n": finished})
        conn.execute(render(SEED_LIVE, SCHEMA), {**params, "n": live})
        conn.execute(render(SEED_WAITS, SCHEMA))
        conn.execute(render(SEED_WORKERS, SCHEMA), params)
        fold_counts(conn, SCHEMA)
        fold_activity(conn, SCHEMA)
        # As autovacuum leaves a table at rest: visibility map set, statistics current.
        conn.execute(render(VACUUM, SCHEMA))
        conn.execute(render(ANALYZE, SCHEMA))
    return time.monotonic() - started


def reader_available() -> str | None:
    """None if the console's Reader can be imported, else why not."""
    try:
        from kestrel_console.read import Reader  # noqa: F401
    except Exception as exc:
        return f"kestrel_console.read.Reader is not importable ({type(exc).__name__}: {exc})"
    return None


def run_console(
    admin: str, *, finished: int, live: int, samples: int = 100, query_samples: int = 30, spread_hours: float = 24 * 7
) -> dict[str, Any]:
    """Seed ``finished`` + ``live`` executions, then time the dashboard refresh."""
    reason = reader_available()
    if reason:
        raise RuntimeError(reason)
    from kestrel_console.read import SET_SESSION, Reader

    with fresh_database(admin) as dsn:
        seed_s = seed(dsn, finished=finished, live=live, spread_hours=spread_hours)
        with beating(dsn), Reader(dsn) as reader:
            for _ in range(5):
                reader.dashboard()
            times = []
            for _ in range(samples):
                t = time.perf_counter()
                reader.dashboard()
                times.append(time.perf_counter() - t)
            statements = reader.refresh_statements()
        per_query: dict[str, Any] = {}
        with beating(dsn), psycopg.connect(dsn, autocommit=True, prepare_threshold=None) as conn:
            # the Reader's own session settings (no JIT, no parallel workers, read-only)
            conn.execute(SET_SESSION, {"timeout": f"{QUERY_TIMEOUT_MS}ms"})
            for key, (statement, params) in statements.items():
                query = render(statement, SCHEMA)
                few = key in FEW_SAMPLES
                for _ in range(1 if few else 3):
                    conn.execute(query, params).fetchall()
                q_times = []
                for _ in range(min(query_samples, 3) if few else query_samples):
                    t = time.perf_counter()
                    conn.execute(query, params).fetchall()
                    q_times.append(time.perf_counter() - t)
                per_query[key] = summary_ms(q_times)
    return {
        "finished": finished,
        "live": live,
        "spread_hours": spread_hours,
        "seed_s": round(seed_s, 1),
        "dashboard": summary_ms(times),
        "queries": per_query,
    }
