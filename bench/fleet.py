"""Hundreds of workers (issue 48): ``python -m bench workers --count 500``.

N worker identities, each a real ``Worker`` (its own ``workers`` row, heartbeat, claim loop,
sweeps and connections), ``PER_PROCESS`` of them in each of a few processes, on a private
server started for the run (``max_connections`` sized for them, pg_stat_statements loaded:
the shared server has neither). Run once with ``BASELINE`` (10) workers and once with N, each
for an idle window and then a window with a steady load of one-step workflows, and measured:

- database time per second spent on heartbeats, claims and sweeps: the ``total_exec_time`` of
  their statements in pg_stat_statements over the window (executor time, CPU here: the data
  is in shared buffers; a statement waiting for a lock counts its wait too, which the lock
  samples below would show), and the whole server's CPU (utime + stime of every process of
  the private server, from /proc) for scale;
- claim latency: ``started_at - created_at`` of every execution enqueued in the load window
  (the server's clock at enqueue and at claim);
- lock waits: ``pg_stat_activity`` sampled every 0.1 s, backends waiting on a heavyweight lock
  (``Lock``) and on a lightweight one (``LWLock``); a convoy would show as many at once.

The ratios N / BASELINE come from one run on one machine; the load is the same in both.

``--through-pgbouncer``: the workers connect through a PgBouncer in transaction pooling
(``.ci/pgbouncer.sh``, started for the run in front of the private server, ``POOLED_BACKENDS``
server connections), as a fleet of hundreds would: the server sees the pool's backends instead
of ~6 per worker, and the workers poll instead of listening (LISTEN needs a session).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from kestrel_core import Kestrel

from .report import ratio, table
from .workloads import NOOP1

BASELINE = 10
PER_PROCESS = 50  # Worker objects per process: ~10 threads each
CONNECTIONS_PER_WORKER = 8  # measured ~6 (pool, claim session, listener, maintenance session): room to spare
POOLED_BACKENDS = 40  # PgBouncer's server connections with --through-pgbouncer
LEASE_S = 30.0  # the default: a heartbeat every 10 s, a lease sweep every 5 s per worker
# Each process starts its workers this far apart (the processes start together): a fleet
# comes up at ~40 workers a second, as a rolling deploy would, not 500 logins at one instant
# (which timed out on 2 cores: docs/scale.md).
START_EVERY_S = 0.25
STATEMENTS = """
SELECT query, calls, total_exec_time FROM pg_stat_statements
 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
"""
WAITS = """
SELECT count(*) FILTER (WHERE wait_event_type = 'Lock'), count(*) FILTER (WHERE wait_event_type = 'LWLock'),
       count(*) FILTER (WHERE state = 'active')
  FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
"""
LOCK_WAITERS = """
SELECT wait_event, left(regexp_replace(query, '\\s+', ' ', 'g'), 90), count(*)
  FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' GROUP BY 1, 2
"""
LATENCY = """
SELECT percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - created_at)),
       count(*)
  FROM kestrel.workflow_executions WHERE workflow_name = %s AND started_at IS NOT NULL
"""
UNFINISHED = "SELECT count(*) FROM kestrel.workflow_executions WHERE status IN ('enqueued', 'running')"
REGISTERED = (
    "SELECT count(*) FROM kestrel.workers WHERE stopped_at IS NULL AND last_heartbeat > now() - interval '1 minute'"
)


def kind(query: str) -> str:
    """Which duty a statement belongs to, by its text."""
    q = " ".join(query.replace('"', "").split())  # the schema is a quoted identifier
    if "last_heartbeat = now()" in q and "UPDATE" in q:
        return "heartbeat"
    if "DELETE FROM kestrel.executions_ready r USING picked" in q:
        return "claim"
    if (
        "lease_expires < now()" in q
        or "last_heartbeat + coalesce" in q
        or "DELETE FROM kestrel.executions_ready r WHERE" in q
    ):
        return "sweep"
    return "other"


def top_statements(conn: psycopg.Connection, seconds: float, most: int = 8) -> list[dict[str, Any]]:
    """The statements that took the most database time, then those run most often (each cost
    a round trip and a plan, through PgBouncer), each with its duty: what a figure of the
    table is made of."""
    every = conn.execute(STATEMENTS).fetchall()
    by_time = sorted(every, key=lambda r: -r[2])[:most]
    rows = by_time + [r for r in sorted(every, key=lambda r: -r[1])[:most] if r not in by_time]
    return [
        {
            "duty": kind(q),
            "calls_per_s": round(c / seconds, 1),
            "db_ms_per_s": round(ms / seconds, 1),
            "query": " ".join(q.split())[:160],
        }
        for q, c, ms in rows
    ]


def by_kind(conn: psycopg.Connection) -> dict[str, tuple[int, float]]:
    out: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for query, calls, ms in conn.execute(STATEMENTS):
        k = out[kind(query)]
        k[0] += calls
        k[1] += ms
    return {k: (int(v[0]), float(v[1])) for k, v in out.items()}


def server_cpu_s(data_dir: Path) -> float:
    """CPU seconds (user + system) of the postmaster and every process it started."""
    postmaster = int((data_dir / "postmaster.pid").read_text().split()[0])
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry.name) == postmaster or int(fields[1]) == postmaster:
            total += int(fields[11]) + int(fields[12])
    return total / tick


class WaitSampler(threading.Thread):
    """pg_stat_activity every 0.1 s: backends waiting on locks, and active ones."""

    def __init__(self, dsn: str) -> None:
        super().__init__(daemon=True, name="lock-sampler")
        self.dsn, self.stop = dsn, threading.Event()
        self.samples: list[tuple[int, int, int]] = []
        self.waiters: dict[tuple[str, str], int] = defaultdict(int)  # (lock, statement): samples

    def run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not self.stop.wait(0.1):
                self.samples.append(tuple(conn.execute(WAITS).fetchone()))  # type: ignore[arg-type]
                if self.samples[-1][0]:
                    for event, query, n in conn.execute(LOCK_WAITERS):
                        self.waiters[(event, query)] += n

    def summary(self) -> dict[str, Any]:
        self.stop.set()
        self.join()
        n = max(1, len(self.samples))
        return {
            "samples": len(self.samples),
            "lock_waiting_max": max((s[0] for s in self.samples), default=0),
            "lock_waiting_mean": round(sum(s[0] for s in self.samples) / n, 3),
            "lwlock_waiting_max": max((s[1] for s in self.samples), default=0),
            "active_mean": round(sum(s[2] for s in self.samples) / n, 2),
            # what waited on a lock, most often first: (lock, statement, backends summed over samples)
            "lock_waiters": sorted(([e, q, k] for (e, q), k in self.waiters.items()), key=lambda w: -w[2])[:6],
        }


def _window(dsn: str, data_dir: Path, seconds: float, feed_rate: float) -> dict[str, Any]:
    """One measured window: statements by duty, server CPU, lock samples; with a feed of
    ``feed_rate`` one-step workflows a second when it is not 0."""
    app = Kestrel(dsn, application_name="bench-fleet-feed")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_statements_reset()")
        cpu0, t0 = server_cpu_s(data_dir), time.monotonic()
        sampler = WaitSampler(dsn)
        sampler.start()
        fed = 0
        while (now := time.monotonic()) < t0 + seconds:
            if feed_rate:
                due = int((now - t0) * feed_rate) - fed
                if due > 0:
                    app.enqueue_many(NOOP1, [None] * due)
                    fed += due
            time.sleep(0.02)
        elapsed = time.monotonic() - t0
        cpu = server_cpu_s(data_dir) - cpu0
        stmts = by_kind(conn)
        top = top_statements(conn, elapsed)
        waits = sampler.summary()
        deadline = time.monotonic() + 120
        while conn.execute(UNFINISHED).fetchone()[0] and time.monotonic() < deadline:
            time.sleep(0.1)
    app.close()
    duties = {
        k: {"calls_per_s": round(c / elapsed, 1), "db_ms_per_s": round(ms / elapsed, 1)} for k, (c, ms) in stmts.items()
    }
    return {
        "seconds": round(elapsed, 1),
        "server_cpu_pct": round(100 * cpu / elapsed, 1),
        "duties": duties,
        "top_statements": top,
        **waits,
    }


def _latency(dsn: str) -> dict[str, Any]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        (p50, p95, p99), n = conn.execute(LATENCY, (NOOP1,)).fetchone()
    ms = [None if v is None else round(1000 * v, 1) for v in (p50, p95, p99)]
    return {"claimed": n, "p50_ms": ms[0], "p95_ms": ms[1], "p99_ms": ms[2]}


def run_fleet(
    cluster: Any, count: int, *, idle_s: float, load_s: float, rate: float, pooler: str | None = None
) -> dict[str, Any]:
    """``count`` workers on a fresh database of ``cluster``: the idle window, then the load.
    ``pooler``: a PgBouncer DSN in front of ``cluster`` the workers connect through."""
    name = f"fleet_{count}_{os.getpid()}"
    dsn = cluster.create_database(name)
    workers_dsn = make_conninfo(pooler, dbname=name) if pooler else dsn
    with Kestrel(dsn) as app:
        app.migrate()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    procs: list[subprocess.Popen] = []
    started = time.monotonic()
    try:
        for first in range(0, count, PER_PROCESS):
            n = min(PER_PROCESS, count - first)
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "bench.fleet", workers_dsn, str(first), str(n), str(int(bool(pooler)))],
                    cwd=Path(__file__).resolve().parents[1],
                    stdin=subprocess.PIPE,
                )
            )
        with psycopg.connect(dsn, autocommit=True) as conn:
            deadline = time.monotonic() + 60 + count * 0.5
            while conn.execute(REGISTERED).fetchone()[0] < count:
                if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                    raise RuntimeError(f"only {conn.execute(REGISTERED).fetchone()[0]} of {count} workers started")
                time.sleep(0.2)
            connections = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
            backends = connections.fetchone()[0]
        ready_s = time.monotonic() - started
        time.sleep(min(5.0, idle_s))  # the start-up's burst of registrations and first beats passes
        idle = _window(dsn, cluster.data_dir, idle_s, 0)
        load = _window(dsn, cluster.data_dir, load_s, rate)
        latency = _latency(dsn)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)  # the database is dropped next: no need to hand anything back
            p.wait()
        with psycopg.connect(cluster.dsn_for("postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return {
        "workers": count,
        "through_pgbouncer": pooler is not None,
        "processes": len(procs),
        "backends": backends,
        "started_s": round(ready_s, 1),
        "idle": idle,
        "load": {**load, "rate_per_s": rate, **latency},
    }


@dataclass(frozen=True)
class Fleets:
    """``count`` worker identities against the baseline: the seconds of each window, idle then
    loaded, the one-step workflows enqueued a second in the loaded one, and whether the workers
    connect through a PgBouncer started for the run."""

    count: int = 500
    idle_s: float = 20.0
    load_s: float = 20.0
    rate: float = 50.0
    through_pgbouncer: bool = False


def run_fleets(plan: Fleets = Fleets(), echo: Callable[[str], None] = print) -> dict[str, Any]:
    """The baseline (``BASELINE`` workers, or ``count`` if fewer) and ``count`` workers, on one
    private server started for the run (through a PgBouncer started for it with
    ``through_pgbouncer``); the ratios of ``count`` to the baseline."""
    count = plan.count
    baseline = min(BASELINE, count)
    cluster = private_server(count)
    pooler, pooler_env = None, None
    try:
        if plan.through_pgbouncer:
            pooler, pooler_env = start_pgbouncer(cluster, count)
        runs = []
        for n in dict.fromkeys((baseline, count)):
            via = " through PgBouncer" if pooler else ""
            echo(f"  {n} workers{via}: {plan.idle_s:g} s idle, then {plan.load_s:g} s at {plan.rate:g} workflows/s ...")
            runs.append(run_fleet(cluster, n, idle_s=plan.idle_s, load_s=plan.load_s, rate=plan.rate, pooler=pooler))
    finally:
        if pooler_env:
            stop_pgbouncer(pooler_env)
        cluster.destroy()
        shutil.rmtree(cluster.data_dir.parent, ignore_errors=True)  # the temporary directory around it
    small, big = runs[0], runs[-1]
    return {"baseline": small, "fleet": big, "ratios": ratios(small, big)}


def ratios(small: dict[str, Any], big: dict[str, Any]) -> dict[str, float | None]:
    """``big`` over ``small`` for each figure of the table."""
    out: dict[str, float | None] = {"workers": ratio(big["workers"], small["workers"])}
    for label, (window, path) in FIGURES.items():
        out[label] = ratio(path(big[window]), path(small[window]))
    return out


def _duty(name: str, what: str = "db_ms_per_s") -> Callable[[dict[str, Any]], float | None]:
    return lambda w: w["duties"].get(name, {}).get(what, 0.0)


# The table's rows: (window, how to read the figure from it).
FIGURES: dict[str, tuple[str, Callable[[dict[str, Any]], Any]]] = {
    "idle: heartbeat statements/s": ("idle", _duty("heartbeat", "calls_per_s")),
    "idle: heartbeat DB ms/s": ("idle", _duty("heartbeat")),
    "idle: claim (polls) DB ms/s": ("idle", _duty("claim")),
    "idle: sweep DB ms/s": ("idle", _duty("sweep")),
    "idle: server CPU %": ("idle", lambda w: w["server_cpu_pct"]),
    "load: heartbeat DB ms/s": ("load", _duty("heartbeat")),
    "load: claim DB ms/s": ("load", _duty("claim")),
    "load: sweep DB ms/s": ("load", _duty("sweep")),
    "load: other DB ms/s (steps, enqueues)": ("load", _duty("other")),
    "load: server CPU %": ("load", lambda w: w["server_cpu_pct"]),
    "load: claim latency p50 ms": ("load", lambda w: w["p50_ms"]),
    "load: claim latency p95 ms": ("load", lambda w: w["p95_ms"]),
    "load: backends waiting on a Lock, max": ("load", lambda w: w["lock_waiting_max"]),
    "load: backends waiting on an LWLock, max": ("load", lambda w: w["lwlock_waiting_max"]),
}


def fleet_table(r: dict[str, Any]) -> str:
    small, big = r["baseline"], r["fleet"]
    rows = [["workers (processes; server backends)", f"{small['workers']} ({small['processes']}; {small['backends']})",
             f"{big['workers']} ({big['processes']}; {big['backends']})", r["ratios"]["workers"]]]  # fmt: skip
    for label, (window, path) in FIGURES.items():
        rows.append([label, path(small[window]), path(big[window]), r["ratios"][label]])
    return table(
        f"{big['workers']} workers against {small['workers']} (one run; DB ms/s: pg_stat_statements "
        f"total_exec_time per second; latency: enqueue to claim, {big['load']['rate_per_s']:g}/s)",
        ["figure", f"{small['workers']} workers", f"{big['workers']} workers", "ratio"],
        rows,
    )


def _child(dsn: str, first: int, n: int, pooled: bool) -> None:
    """``n`` Worker objects in this process, until the parent closes our stdin (or kills us);
    ``pooled``: through PgBouncer's transaction pooling."""
    from kestrel_core import Worker

    from .workloads import app as workloads

    app = workloads.with_settings(dsn=dsn, transaction_pooling=pooled)
    workers = [
        Worker(app, concurrency=1, lease=timedelta(seconds=LEASE_S), worker_id=f"fleet-{first + i}") for i in range(n)
    ]
    for w in workers:
        w.start()
        time.sleep(START_EVERY_S)
    sys.stdin.read()
    os._exit(0)


PGBOUNCER_SCRIPT = Path(__file__).resolve().parents[1] / ".ci" / "pgbouncer.sh"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_pgbouncer(cluster: Any, count: int) -> tuple[str, dict[str, str]]:
    """A PgBouncer (transaction pooling) in front of ``cluster`` for ``count`` workers: its DSN,
    and the environment that names it to ``stop_pgbouncer``."""
    env = {
        **os.environ,
        "KESTREL_PGBOUNCER_PORT": str(_free_port()),
        "KESTREL_PGBOUNCER_UPSTREAM": f"127.0.0.1:{cluster.port}",
        "KESTREL_PGBOUNCER_DIR": str(cluster.data_dir.parent / "pgbouncer"),
        "KESTREL_PGBOUNCER_POOL_SIZE": str(POOLED_BACKENDS),
        "KESTREL_PGBOUNCER_MAX_CLIENTS": str(count * CONNECTIONS_PER_WORKER + 100),
    }
    done = subprocess.run(["bash", str(PGBOUNCER_SCRIPT), "start"], env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"PgBouncer did not start (.ci/pgbouncer.sh): {done.stderr.strip()}")
    return done.stdout.strip(), env


def stop_pgbouncer(env: dict[str, str]) -> None:
    subprocess.run(["bash", str(PGBOUNCER_SCRIPT), "stop"], env=env, capture_output=True)


def private_server(count: int) -> Any:
    """A private server for ``count`` workers: enough connections, pg_stat_statements loaded."""
    from kestrel_console.embedded_pg import LocalCluster

    base = Path(tempfile.mkdtemp(prefix="kestrel-fleet-"))
    base.chmod(0o755)  # as root the server runs as postgres, which must enter it
    cluster = LocalCluster(
        base / "data",
        durable=True,
        settings={
            "max_connections": count * CONNECTIONS_PER_WORKER + 50,
            "shared_preload_libraries": "pg_stat_statements",
            "pg_stat_statements.track": "top",
        },
    )
    cluster.start(timeout=120)
    return cluster


if __name__ == "__main__":
    _child(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1")
