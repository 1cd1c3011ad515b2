"""Recovery: SIGKILL a worker holding M executions (each in a long step) and time until all of
them run again in another worker.

Worker A claims M ``hold`` executions and starts their step; worker B is started and idle.
A is killed with SIGKILL (no release, no goodbye); B's sweeper finds the lapsed leases and
re-enqueues them, B claims them and starts the step again. Measured: from the kill to the start
of the last step attempt written by B (the database's clock_timestamp(), same machine).
Expected: the lease left at the kill (between 2/3 and all of the lease, since the heartbeat
renews every third) + up to one sweep interval (x1.2 jitter) + the claim.
"""

from __future__ import annotations

import random
import time
from typing import Any

import psycopg

from kestrel_core import Kestrel
from kestrel_core.db import render

from .databases import fresh_database
from .procs import kestrel_worker, stop_all, wait_registered
from .workloads import HOLD

SCHEMA = "kestrel"
STEPS_RUNNING = """
SELECT count(DISTINCT execution_id) FROM {schema}.step_attempts
 WHERE owner_id = %(worker_id)s AND step_id = 'hold' AND outcome = 'running'
"""
LEASE_LEFT = """
SELECT extract(epoch FROM max(lease_expires))::float8, extract(epoch FROM min(lease_expires))::float8
  FROM {schema}.workflow_executions WHERE owner_id = %(worker_id)s AND status = 'running'
"""
RESUMED = """
SELECT count(DISTINCT execution_id), extract(epoch FROM min(started_at))::float8,
       extract(epoch FROM max(started_at))::float8
  FROM {schema}.step_attempts WHERE owner_id = %(worker_id)s AND step_id = 'hold'
"""


def _wait_steps(conn: psycopg.Connection, worker_id: str, m: int, timeout: float, procs: list) -> None:
    deadline = time.monotonic() + timeout
    while conn.execute(render(STEPS_RUNNING, SCHEMA), {"worker_id": worker_id}).fetchone()[0] < m:
        for p in procs:
            p.check_alive()
        if time.monotonic() > deadline:
            raise TimeoutError(f"{worker_id} did not start {m} steps within {timeout:.0f} s")
        time.sleep(0.02)


def run_recovery(
    admin: str, *, executions: int, lease: float = 5.0, sweep_interval: float = 1.0, timeout: float | None = None
) -> dict[str, Any]:
    """Kill a worker holding ``executions`` executions; seconds until all run again elsewhere."""
    m = executions
    hold_s = 6 * lease + 30
    with fresh_database(admin) as dsn:
        a = kestrel_worker(dsn, worker_id="victim", concurrency=m, lease=lease, sweep_interval=sweep_interval)
        procs = [a]
        try:
            wait_registered(dsn, [a], ["victim"])
            with Kestrel(dsn) as app, app.connection() as conn:
                app.enqueue_many(HOLD, [hold_s] * m)
                _wait_steps(conn, "victim", m, 60, procs)
                b = kestrel_worker(dsn, worker_id="rescuer", concurrency=m, lease=lease, sweep_interval=sweep_interval)
                procs.append(b)
                wait_registered(dsn, [b], ["rescuer"])
                # A random point of the heartbeat cycle, so the lease left at the kill is too.
                time.sleep(random.uniform(0, lease / 3))
                lease_max, _lease_min = conn.execute(render(LEASE_LEFT, SCHEMA), {"worker_id": "victim"}).fetchone()
                t_kill = time.time()
                a.kill()
                _wait_steps(conn, "rescuer", m, timeout or (lease + 30), [b])
                n, first, last = conn.execute(render(RESUMED, SCHEMA), {"worker_id": "rescuer"}).fetchone()
        finally:
            for p in procs:
                p.kill()
            stop_all(procs)
    recovered = last - t_kill
    return {
        "executions": m,
        "lease_s": lease,
        "sweep_interval_s": sweep_interval,
        "lease_left_at_kill_s": round(lease_max - t_kill, 3),
        "first_resumed_s": round(first - t_kill, 3),
        "all_resumed_s": round(recovered, 3),
        "resumed": n,
        "design_bound_s": round(lease + 1.2 * sweep_interval, 2),
        "target_s": lease + 2.0,
        "within_target": recovered <= lease + 2.0,
        "over_lease_left_s": round(recovered - (lease_max - t_kill), 3),
    }
