"""The peer: the same no-op workloads on DBOS Transact, same server, same procedure.

W DBOS processes (``python -m bench.dbos_worker``) each dequeue from one DBOS queue with
``worker_concurrency`` = the Kestrel concurrency. They are launched and warmed before the
clock; the N workflows are enqueued with ``DBOSClient.enqueue_in_transaction`` in ONE
transaction (statistics refreshed inside it, as for Kestrel); the clock starts just before
COMMIT and stops at the last ``completed_at``. DBOS dequeues by polling: its queue polling
interval is a parameter (0.01 s was its best in our trials; its default is 1 s).
"""

from __future__ import annotations

import time
from typing import Any

import psycopg

from .cpu import CpuMeter
from .databases import checkpoint, fresh_database, rates, sqlalchemy_url
from .pgstats import commits
from .procs import Proc, stop_all
from .throughput import from_threads
from .workloads import STEPS

DEFAULT_POLLING = 0.01
QUEUE = "bench"  # bench.dbos_workloads.QUEUE (not imported: dbos may be missing here)
APP_NAME = "kestrel-bench"

LIVE = "SELECT count(*) FROM dbos.workflow_status WHERE name = %s AND status IN ('ENQUEUED', 'PENDING')"
OUTCOME = """
SELECT count(*) FILTER (WHERE status = 'SUCCESS'), count(*),
       max(coalesce(completed_at, updated_at)) / 1000.0
  FROM dbos.workflow_status WHERE name = %s
"""
BY_EXECUTOR = "SELECT executor_id, count(*) FROM dbos.workflow_status WHERE name = %s GROUP BY 1 ORDER BY 1"
ANALYZE = "ANALYZE dbos.workflow_status"


def available() -> str | None:
    """None if DBOS can be imported here, else why not."""
    try:
        import dbos  # noqa: F401
    except Exception as exc:  # ImportError, or a broken install
        return f"cannot import dbos ({type(exc).__name__}: {exc}); install it with: pip install 'kestrel[bench]'"
    return None


def dbos_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("dbos")
    except Exception:
        return None


def _wait_done(conn: psycopg.Connection, name: str, timeout: float, procs: list[Proc]) -> None:
    deadline = time.monotonic() + timeout
    while conn.execute(LIVE, (name,)).fetchone()[0]:
        for p in procs:
            p.check_alive()
        if time.monotonic() > deadline:
            raise TimeoutError(f"DBOS workflows {name!r} not finished after {timeout:.0f} s")
        time.sleep(0.05)


def _enqueue(client: Any, engine: Any, name: str, n: int) -> float:
    """Enqueue ``n`` workflows in one transaction; the time just before COMMIT."""
    options = {"workflow_name": name, "queue_name": QUEUE}
    with engine.begin() as conn:
        for i in range(n):
            client.enqueue_in_transaction(conn, options, i)
        conn.exec_driver_sql(ANALYZE)
        t0 = time.time()
    return t0


def _feed(client: Any, name: str, n: int, threads: int) -> tuple[float, float]:
    """``n`` single ``DBOSClient.enqueue`` calls from ``threads`` threads (as Kestrel is fed);
    the wall-clock start and the calls' own rate."""
    options = {"workflow_name": name, "queue_name": QUEUE}
    _, t0, rate = from_threads(n, threads, lambda _t, i: client.enqueue(options, i))
    return t0, rate


def run_dbos(
    admin: str,
    workflow: str,
    *,
    workers: int,
    concurrency: int,
    n: int,
    polling: float = DEFAULT_POLLING,
    timeout: float | None = None,
    feed_threads: int = 0,
) -> dict[str, Any]:
    """Run ``n`` DBOS workflows of the workload on ``workers`` DBOS processes; workflows/s.
    ``feed_threads``: enqueued by single calls from that many threads while they run."""
    reason = available()
    if reason:
        raise RuntimeError(reason)
    import sqlalchemy as sa
    from dbos import DBOSClient
    from dbos.cli.migration import run_dbos_database_migrations

    steps = STEPS[workflow]
    with fresh_database(admin, kestrel=False, prefix="dbos_bench") as dsn:
        url = sqlalchemy_url(dsn)
        run_dbos_database_migrations(system_database_url=url, schema="dbos", application_role=None, sharding=False)
        procs = [
            Proc(
                "bench.dbos_worker",
                [
                    "--url",
                    url,
                    "--executor-id",
                    f"dbos-w{i}",
                    "--concurrency",
                    str(concurrency),
                    "--polling",
                    str(polling),
                ],
                name=f"dbos-w{i}",
            )
            for i in range(workers)
        ]
        client = engine = None
        try:
            for p in procs:
                p.wait_for_output("ready")
            client = DBOSClient(system_database_url=url, application_name=APP_NAME)
            engine = sa.create_engine(url, pool_size=1)
            with psycopg.connect(dsn, autocommit=True) as conn:
                _enqueue(client, engine, "warmup", workers * concurrency * 4)
                _wait_done(conn, "warmup", 120, procs)
                checkpoint(conn)
                time.sleep(0.6)
                commits_before = commits(conn)
                meter = CpuMeter([p.pid for p in procs])
                fed: dict[str, Any] = {}
                if feed_threads:
                    t0, calls = _feed(client, workflow, n, feed_threads)
                    fed = {"feed_threads": feed_threads, "enqueue_calls_per_s": round(calls)}
                else:
                    t0 = _enqueue(client, engine, workflow, n)
                _wait_done(conn, workflow, timeout or max(180.0, n / 5.0), procs)
                cpu = meter.stop()
                time.sleep(0.6)
                per_workflow = (commits(conn) - commits_before) / n
                ok, _total, t_end = conn.execute(OUTCOME, (workflow,)).fetchone()
                per_worker = dict(conn.execute(BY_EXECUTOR, (workflow,)).fetchall())
        finally:
            stop_all(procs)
            if client is not None:
                client.destroy()
            if engine is not None:
                engine.dispose()
    if ok != n:
        raise RuntimeError(f"{n - ok} of {n} DBOS workflows did not succeed")
    elapsed = float(t_end) - t0
    return {
        "engine": "dbos",
        "dbos_version": dbos_version(),
        "workflow": workflow,
        "steps": steps,
        "workers": workers,
        "concurrency": concurrency,
        "polling_s": polling,
        "n": n,
        **rates(n, steps, elapsed),
        "per_worker": per_worker,
        "commits_per_workflow": round(per_workflow, 2),
        **cpu,
        **fed,
    }
