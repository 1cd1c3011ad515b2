"""Failover (issue 48): a synchronous streaming standby promoted while two worker processes run
and a thread enqueues, everything on one multi-host DSN (``host=a,b
target_session_attrs=read-write``). Nothing acknowledged is lost (every enqueue that returned an
id, every checkpoint), every execution finishes, each step's checkpoint is written once, and the
workers come back on the new primary by themselves.

The promotion waits a few seconds after the primary dies, as an HA manager's failure detection
does; libpq's multi-host DSN finds the new primary once it accepts writes.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from kestrel_core import Kestrel, KestrelError
from tests.private_pg import PrivateServer, new_private_server
from tests.waiting import wait_for
from tests.worker_processes import start_worker_process, stop_worker_processes

pytestmark = pytest.mark.slow

LEASE_S = 5
DETECTION_S = 3.0  # the primary is gone this long before the standby is promoted


@pytest.fixture
def primary_and_standby() -> Iterator[tuple[PrivateServer, PrivateServer]]:
    base = Path(tempfile.mkdtemp(prefix="kestrel-failover-"))
    base.chmod(0o755)  # the servers run as the postgres OS user when the tests run as root
    primary = new_private_server(base / "primary", durable=True)
    standby: PrivateServer | None = None
    try:
        primary.start()
        standby = primary.standby(base / "standby")
        standby.start()
        with psycopg.connect(primary.create_database("postgres"), autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
            conn.execute("SELECT pg_reload_conf()")
            wait_for(
                lambda: conn.execute("SELECT 1 FROM pg_stat_replication WHERE sync_state = 'sync'").fetchone(),
                timeout=30,
                what="the standby to be synchronous",
            )
        yield primary, standby
    finally:
        for server in (standby, primary):
            if server is not None:
                server.destroy()
        shutil.rmtree(base, ignore_errors=True)


def _statuses(conn: psycopg.Connection) -> dict[str, int]:
    return dict(conn.execute("SELECT status, count(*) FROM kestrel.workflow_executions GROUP BY 1").fetchall())


def test_promoting_a_synchronous_standby_loses_nothing_acknowledged(
    primary_and_standby: tuple[PrivateServer, PrivateServer], tmp_path: Path
) -> None:
    primary, standby = primary_and_standby
    hosts = make_conninfo(
        host="127.0.0.1,127.0.0.1",
        port=f"{primary.port},{standby.port}",
        user="postgres",
        dbname="postgres",
        target_session_attrs="read-write",
    )
    with psycopg.connect(primary.create_database("postgres"), autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE public.ledger (id bigserial PRIMARY KEY, execution_id bigint, step_id text,"
            " worker text, at timestamptz DEFAULT clock_timestamp())"
        )
    app = Kestrel(hosts)
    app.migrate()
    logs = [open(tmp_path / f"worker-{i}.log", "w") for i in range(2)]
    workers = [
        start_worker_process(
            hosts,
            "tests.core.failover_app:app",
            "--processes",
            "1",
            "--lease",
            str(LEASE_S),
            "--concurrency",
            "4",
            "--worker-id",
            f"failover-{i}",
            out=logs[i],
        )
        for i in range(2)
    ]
    acknowledged: list[int] = []
    stop = threading.Event()

    def feed() -> None:
        while not stop.is_set():
            try:
                acknowledged.append(app.enqueue("chain", None))
            except KestrelError:
                stop.wait(0.1)  # the database is away: try again, as a producer would
            stop.wait(0.05)  # slower than the workers drain: the backlog stays small

    feeder = threading.Thread(target=feed, name="failover-feed")
    feeder.start()
    try:
        with psycopg.connect(standby.dsn_for("postgres"), autocommit=True) as replica:
            wait_for(lambda: _statuses(replica).get("success", 0) >= 30, timeout=60, what="work before the switch")
        primary.stop("immediate")
        died = time.monotonic()
        time.sleep(DETECTION_S)  # an HA manager's detection time; nothing to wait for
        standby.promote()
        promoted = time.monotonic()
        promoted_at = time.time()
        before = len(acknowledged)
        wait_for(lambda: len(acknowledged) >= before + 30, timeout=60, what="enqueues on the new primary")
        stop.set()
        feeder.join()
        with psycopg.connect(standby.dsn_for("postgres"), autocommit=True) as conn:
            wait_for(
                lambda: set(_statuses(conn)) == {"success"},
                timeout=180,
                what=f"every execution to finish on the new primary ({_statuses(conn)})",
            )
            recovered = time.monotonic()
            # The workers' first finished execution on the new primary: they came back by themselves.
            back = conn.execute(
                "SELECT extract(epoch FROM min(updated_at)) - %s FROM kestrel.workflow_executions"
                " WHERE status = 'success' AND updated_at > to_timestamp(%s)",
                (promoted_at, promoted_at),
            ).fetchone()[0]
            assert back is not None
            stored = {row[0] for row in conn.execute("SELECT id FROM kestrel.workflow_executions")}
            assert set(acknowledged) <= stored, f"{len(set(acknowledged) - stored)} acknowledged enqueues lost"
            steps = conn.execute(
                "SELECT count(*), count(DISTINCT (execution_id, step_id)) FROM kestrel.operation_outputs"
            ).fetchone()
            assert steps == (3 * len(stored), 3 * len(stored))
            # The workers came back by themselves: both still run and both wrote on the new primary.
            assert all(w.poll() is None for w in workers)
            alive = conn.execute(
                "SELECT count(*) FROM kestrel.workers WHERE worker_id LIKE 'failover-%%' AND stopped_at IS NULL"
            ).fetchone()[0]
            assert alive == 2
        print(
            f"primary died -> promoted {promoted - died:.1f} s; first execution finished on the new primary "
            f"{float(back):.1f} s later; the backlog of {len(stored)} done {recovered - promoted:.1f} s after it"
        )
    finally:
        stop.set()
        feeder.join()
        stop_worker_processes(workers)
        for log in logs:
            log.close()
        app.close()
