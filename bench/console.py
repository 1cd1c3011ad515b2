"""Console: every screen's refresh and every kind of search on a big history (1M or 10M
finished + 10k live).

Times end to end from the client, through the console's own ``Reader``:
``Reader.dashboard()`` (every dashboard read, one snapshot, one pipelined round trip) at the
TUI's fastest refresh (one every 0.5 s), each other screen's refresh, each kind of filter of
the executions list (``id:``, ``key:``, ``input.x=``, ``status:`` with a time window, free
text) and paging, p50/p95 against the budgets (``BUDGET_MS``), with the plan of each search;
then each refresh query of ``Reader.refresh_statements()`` on its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql

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
# Ranges for every id the seed hands out (the history is partitioned by id range): a
# running engine's workers create them a few ranges ahead as the ids grow; the seed jumps.
RANGE_SIZE = "SELECT range_size FROM {schema}.history_settings"
RANGES_AHEAD = "SELECT {schema}.ensure_partitions(%s)"
MAX_AHEAD = 50  # ensure_partitions' own limit
# The input's GIN index (migration 0025) is built once after the seed, not row by row during it
# (as a restore would): its pending list made a 10M seed several times slower.
DROP_INPUT_INDEX = "DROP INDEX IF EXISTS {schema}.workflow_executions_input_idx"
CREATE_INPUT_INDEX = (
    "CREATE INDEX workflow_executions_input_idx ON {schema}.workflow_executions USING gin (input jsonb_path_ops)"
)
ANALYZE = "ANALYZE {schema}.workflow_executions, {schema}.workflow_waits, {schema}.workers, {schema}.execution_counts"
VACUUM = "VACUUM (ANALYZE) {schema}.workflow_executions, {schema}.execution_counts"
# The seeded workers beat while the refreshes are timed, as running workers do (every lease/3):
# otherwise they are dead 30 s after the seed, and the dashboard would time "no live worker
# serves any workflow", a screen no operator waits on. They also fold every minute, as running workers do
# (sweeper.fold_counts, sweeper.fold_activity; the seed folds once): the counters of old id
# blocks go into one row per (workflow, status), and the activity of the closed minutes is
# recorded, so that a refresh reads live only what happened since the last fold, not a window
# that grows by a minute of history each minute of the run.
HEARTBEAT = "UPDATE {schema}.workers SET last_heartbeat = now()"
EXPLAIN_ANALYZE = "EXPLAIN (ANALYZE, COSTS OFF, BUFFERS) "
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


FEW_SAMPLES: set[str] = set()
# Each query on its own may take that long.
QUERY_TIMEOUT_MS = 300_000
# What an operator may wait: a dashboard refresh (at a refresh every 0.5 s), any other screen's
# refresh, a search, a page.
BUDGET_MS = {"dashboard": 400.0, "screen": 300.0, "search": 300.0}
DASHBOARD_EVERY_S = 0.5
PAGE_SIZE = 100  # the Executions screen's


def searches(finished: int, live: int) -> dict[str, str]:
    """Each kind of filter, as typed after ``/`` (see SEED_FINISHED for what matches)."""
    middle = (finished + live) // 2
    return {
        "id:": f"id:{middle}",
        "key:": "key:order-13",
        "input.x= (1 in 5,000)": "input.pod=api-7",
        "input.x= (1 in 3) + status:": "input.region=eu status:error",
        "status: + since:2h": "status:success since:2h",
        "status: + from:3d until:2d": "status:error from:3d until:2d",
        "since:5m": "since:5m",
        "workflow: prefix": "workflow:remed",
        "free text, no match": "zzq-no-match",
        "free text + status:, matches": "boom status:error",
        "free text + from:/until:, no match": "zzq-no-match from:3d until:2d",
    }


def pages(finished: int, live: int) -> dict[str, tuple[str, int]]:
    """Pages further back: (filter, before_id)."""
    top = finished + live
    return {
        "page 2": ("", top - PAGE_SIZE),
        "page 1,000 (100,000 back)": ("", top - 1000 * PAGE_SIZE),
        "status:error, half the history back": ("status:error", top // 2),
        "input.x=, half the history back": ("input.pod=api-7", top // 2),
    }


def _timed(fn: Any, samples: int, every_s: float = 0.0) -> dict[str, float]:
    for _ in range(2):
        fn()
    times = []
    for _ in range(samples):
        t = time.perf_counter()
        fn()
        took = time.perf_counter() - t
        times.append(took)
        if every_s > took:
            time.sleep(every_s - took)
    return summary_ms(times)


def _plan(conn: psycopg.Connection, reader: Any, where: str, before_id: int | None) -> list[str]:
    """The plan the Reader's statement gets (EXPLAIN ANALYZE, the Reader's session settings)."""
    from kestrel_console.read.executions import search_statement
    from kestrel_console.read.search import parse_filter

    f = parse_filter(where)
    bounds = reader.id_bounds(f) if f.windowed else None
    statement, params = search_statement(f, limit=PAGE_SIZE, before_id=before_id, bounds=bounds)
    query = sql.SQL(EXPLAIN_ANALYZE) + render(statement, SCHEMA)
    return [row[0] for row in conn.execute(query, params)]


def time_screens(dsn: str, *, finished: int, live: int, samples: int) -> dict[str, Any]:
    """Each screen's refresh, each search and each page, through the Reader: p50/p95 and
    within its budget or not; the plan of each search and page."""
    from kestrel_console.read import SET_SESSION, Reader
    from kestrel_console.read.schedules import schedules
    from kestrel_console.read.search import parse_filter

    out: dict[str, Any] = {"screens": {}, "searches": {}, "pages": {}, "plans": {}}
    with Reader(dsn) as reader, psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SET_SESSION, {"timeout": f"{QUERY_TIMEOUT_MS}ms"})  # the Reader's settings
        some = reader.list_executions(status="success", limit=1, before_id=(finished + live) // 2)[0]["id"]
        screens = {
            "dashboard (every 0.5 s)": lambda: reader.dashboard(minutes=15, bucket_s=60),
            "executions": lambda: reader.list_executions(limit=PAGE_SIZE),
            "approvals": reader.pending_approvals,
            "queues": reader.queues,
            "schedules": lambda: schedules(reader),
            "detail": lambda: (reader.execution(some), reader.timeline(some), reader.steps(some), reader.blocker(some)),
        }
        for name, fn in screens.items():
            dash = name.startswith("dashboard")
            figures = _timed(fn, samples, DASHBOARD_EVERY_S if dash else 0.0)
            budget = BUDGET_MS["dashboard" if dash else "screen"]
            out["screens"][name] = {**figures, "budget_ms": budget, "within": figures["p95_ms"] < budget}
        for name, where in searches(finished, live).items():
            f = parse_filter(where)
            figures = _timed(lambda f=f: reader.list_executions(where=f, limit=PAGE_SIZE), samples)
            budget = BUDGET_MS["search"]
            out["searches"][name] = {
                "filter": where,
                **figures,
                "budget_ms": budget,
                "within": figures["p95_ms"] < budget,
                "estimate": reader.estimate_executions(f),
            }
            out["plans"][name] = _plan(conn, reader, where, None)
        for name, (where, before) in pages(finished, live).items():
            f = parse_filter(where)
            figures = _timed(
                lambda f=f, b=before: reader.list_executions(where=f, limit=PAGE_SIZE, before_id=b), samples
            )
            budget = BUDGET_MS["search"]
            out["pages"][name] = {
                "filter": where,
                "before_id": before,
                **figures,
                "budget_ms": budget,
                "within": figures["p95_ms"] < budget,
            }
            out["plans"][name] = _plan(conn, reader, where, before)
    return out


def seed(dsn: str, *, finished: int, live: int, spread_hours: float) -> float:
    """Seed the history and the live rows; returns the seconds it took."""
    started = time.monotonic()
    params = {"names": NAMES, "spread": f"{spread_hours} hours", "pods": PODS, "regions": REGIONS}
    with psycopg.connect(dsn, autocommit=True) as conn:
        size = conn.execute(render(RANGE_SIZE, SCHEMA)).fetchone()[0]
        conn.execute(render(RANGES_AHEAD, SCHEMA), (min(MAX_AHEAD, -(-(finished + live) // size) + 1),))
        conn.execute(render(DROP_INPUT_INDEX, SCHEMA))
        conn.execute(render(SEED_FINISHED, SCHEMA), {**params, "n": finished})
        conn.execute(render(SEED_LIVE, SCHEMA), {**params, "n": live})
        conn.execute(render(CREATE_INPUT_INDEX, SCHEMA))
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
    """Seed ``finished`` + ``live`` executions, then time the console's reads (``measure``)."""
    reason = reader_available()
    if reason:
        raise RuntimeError(reason)
    with fresh_database(admin) as dsn:
        seed_s = seed(dsn, finished=finished, live=live, spread_hours=spread_hours)
        figures = measure(dsn, finished=finished, live=live, samples=samples, query_samples=query_samples)
    return {"finished": finished, "live": live, "spread_hours": spread_hours, "seed_s": round(seed_s, 1), **figures}


def measure(dsn: str, *, finished: int, live: int, samples: int = 100, query_samples: int = 30) -> dict[str, Any]:
    """Time every screen, search and page (``time_screens``), the dashboard back to back, and
    each refresh statement alone, on a seeded database (the seeded workers beating)."""
    from kestrel_console.read import SET_SESSION, Reader

    with beating(dsn):
        screens = time_screens(dsn, finished=finished, live=live, samples=query_samples)
    with beating(dsn), Reader(dsn) as reader:
        for _ in range(5):
            reader.dashboard()
        times = []
        for _ in range(samples):
            t = time.perf_counter()
            reader.dashboard()
            times.append(time.perf_counter() - t)
        # the searches' statements are timed above, as the Reader runs them (their windows'
        # ids read first); here the dashboard's and the other screens' statements alone
        statements = {k: v for k, v in reader.refresh_statements().items() if not k.startswith("list_executions")}
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
    return {"dashboard": summary_ms(times), **screens, "queries": per_query}
