"""Kestrel through PgBouncer in transaction pooling mode: ``Kestrel(dsn, transaction_pooling=True)``
(no LISTEN: workers poll; no server-side prepared statements).

PgBouncer is started by ``.ci/pgbouncer.sh`` (which installs Debian's package if missing); the
tests are skipped, saying why, only when it cannot be installed or started, and never in CI:
when ``$CI`` is set (``.ci/run`` sets it), a PgBouncer that cannot start fails them.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import NoReturn

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from kestrel_core import ActionRefused, AsyncKestrel, DatabaseUnavailable, Kestrel
from kestrel_core.db.outage import is_outage
from kestrel_core.dispatch import queues as queues_mod
from kestrel_core.engine.worker import Worker
from tests.chaos.harness import SHORT_RUN, run_checked
from tests.conftest import ADMIN_DSN, create_database, drop_at_the_end, in_ci
from tests.private_pg import PrivateServer
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "pgbouncer.sh"


def unavailable(reason: str) -> NoReturn:
    """Skip saying why; in CI, fail: there the PgBouncer tests must run."""
    if in_ci():
        pytest.fail(f"{reason} ($CI is set: PgBouncer must run in CI)", pytrace=False)
    pytest.skip(reason)


def start_bouncer(**env: str) -> str:
    """Run .ci/pgbouncer.sh with these settings; the DSN through it, or skip (fail in CI) saying why."""
    try:
        done = subprocess.run(
            ["bash", str(SCRIPT), "start"], env={**os.environ, **env}, capture_output=True, text=True, timeout=300
        )
    except subprocess.TimeoutExpired:
        unavailable("PgBouncer could not be installed or started: .ci/pgbouncer.sh timed out")
    if done.returncode != 0:
        unavailable(f"PgBouncer could not be installed or started: {done.stderr.strip()[-500:]}")
    return done.stdout.strip().splitlines()[-1]


def admin_console(bouncer_dsn: str, command: str) -> list[list[str]]:
    """Rows of a PgBouncer admin command (its console speaks only the simple protocol: psql)."""
    target = make_conninfo(bouncer_dsn, dbname="pgbouncer")
    done = subprocess.run(
        ["psql", target, "-AtF", "\t", "-c", command], capture_output=True, text=True, timeout=30, check=True
    )
    return [line.split("\t") for line in done.stdout.splitlines()]


def server_address() -> str:
    """host:port of the test server, as the bouncer script takes its upstream."""
    upstream = conninfo_to_dict(ADMIN_DSN)
    return f"{upstream.get('host', '127.0.0.1')}:{upstream.get('port', '5432')}"


@pytest.fixture(scope="module")
def bouncer() -> str:
    """DSN of the shared PgBouncer in front of the test server (left running: the script is idempotent)."""
    if shutil.which("psql") is None:
        unavailable("psql is not installed: needed to talk to PgBouncer's admin console")
    return start_bouncer(KESTREL_PGBOUNCER_UPSTREAM=server_address())


@pytest.fixture(scope="module")
def pooled_db(bouncer: str) -> Iterator[str]:
    """A fresh database, migrated through PgBouncer; yields the DSN that goes through it."""
    direct = create_database("kestrel_bouncer")
    through = make_conninfo(bouncer, dbname=conninfo_to_dict(direct)["dbname"])
    try:
        with Kestrel(through, transaction_pooling=True) as app:
            assert app.migrate()  # migrate's advisory lock is transaction-scoped: fine in this mode
        yield through
    finally:
        drop_at_the_end(direct)


@pytest.fixture
def pooled(pooled_db: str) -> Iterator[tuple[Kestrel, psycopg.Connection]]:
    """An app through PgBouncer on empty tables, and a direct connection to check rows."""
    direct_dsn = make_conninfo(ADMIN_DSN, dbname=conninfo_to_dict(pooled_db)["dbname"])
    with psycopg.connect(direct_dsn, autocommit=True, options="-c search_path=kestrel") as db:
        db.execute("TRUNCATE workflow_executions, workers, operator_actions RESTART IDENTITY CASCADE")
        with Kestrel(pooled_db, transaction_pooling=True) as app:
            yield app, db


def test_the_bouncer_pools_by_transaction(bouncer: str) -> None:
    config = {row[0]: row[1] for row in admin_console(bouncer, "SHOW CONFIG")}
    assert config["pool_mode"] == "transaction"


def test_workflows_with_steps_sleeps_and_approvals_run_through_the_bouncer(pooled, start_worker) -> None:
    app, db = pooled
    attempts: dict[int, int] = {}

    def flaky(i: int) -> int:
        attempts[i] = attempts.get(i, 0) + 1
        if attempts[i] == 1 and i % 4 == 0:
            raise RuntimeError("first try fails")
        return i * 10

    @app.workflow("pooled")
    def pooled_flow(ctx, spec):
        a = ctx.step("a", flaky, spec["i"], retries=2, backoff=0.05)
        if spec.get("nap"):
            ctx.sleep("nap", timedelta(milliseconds=200))
        decision = None
        if spec.get("gate"):
            decision = ctx.wait_for_approval("gate", timeout=timedelta(minutes=5)).approved
        b = ctx.step("b", lambda: a + 1)
        return {"a": a, "b": b, "approved": decision}

    worker = start_worker(app, concurrency=6)
    assert worker.listen is False  # transaction pooling: LISTEN would bind a server connection
    specs = [{"i": i, "nap": i % 3 == 0, "gate": i % 5 == 0} for i in range(60)]
    ids = app.enqueue_many("pooled", specs)
    doomed = app.enqueue("pooled", {"i": 999, "gate": True})
    gated = [eid for eid, spec in zip(ids, specs) if spec["gate"]] + [doomed]
    pending = (
        "SELECT count(*) FROM workflow_waits WHERE step_id = 'gate' AND resolved_at IS NULL AND execution_id = ANY(%s)"
    )
    wait_for(lambda: db.execute(pending, (gated,)).fetchone()[0] == len(gated), timeout=30, what="the gates")
    for eid in gated[:-1]:
        app.approve(eid, "gate", by="alice", comment="via pgbouncer")
    assert app.cancel(doomed, by="alice") == "waiting"
    with pytest.raises(ActionRefused):
        app.approve(doomed, "gate", by="bob")
    wait_for(lambda: all(app.get(eid).done for eid in ids), timeout=60, what="every execution to finish")

    for eid, spec in zip(ids, specs):
        i = spec["i"]
        assert app.get(eid).output == {"a": i * 10, "b": i * 10 + 1, "approved": True if spec["gate"] else None}
    assert app.get(doomed).status == "cancelled"
    assert db.execute("SELECT count(*) FROM operation_outputs WHERE execution_id = ANY(%s)", (ids,)).fetchone()[0] == (
        2 * 60 + sum(s["nap"] for s in specs) + sum(s["gate"] for s in specs)
    )
    assert db.execute("SELECT count(*) FROM operator_actions").fetchone()[0] == len(gated)


BACKEND_GONE = "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = %s"


def end_backend(direct: psycopg.Connection, pid: int) -> None:
    """End the server backend ``pid`` (as a database restart does) and wait until it is gone."""
    direct.execute("SELECT pg_terminate_backend(%s)", (pid,))
    wait_for(lambda: direct.execute(BACKEND_GONE, (pid,)).fetchone()[0], what="the backend to end")


def kill_server_mid_transaction(conn: psycopg.Connection, direct: psycopg.Connection) -> None:
    """Open a transaction on ``conn`` (through the bouncer) and end its server backend; the
    next command on ``conn`` finds the connection broken."""
    conn.execute("BEGIN")
    end_backend(direct, conn.execute("SELECT pg_backend_pid()").fetchone()[0])


def test_a_server_gone_under_an_open_transaction_is_an_outage(pooled, start_worker) -> None:
    """Through PgBouncer, a server that dies under an open transaction breaks the client's
    connection with an InternalError ("received 2 results from command 'SAVEPOINT ...'"), not an
    OperationalError. The worker's database calls take it for an outage and try again on
    another connection (its startup registration: the next test)."""
    app, db = pooled
    killed: list[int] = []

    def once_killed(conn: psycopg.Connection) -> int:
        if not killed:
            killed.append(1)
            kill_server_mid_transaction(conn, db)
            with conn.transaction():  # a SAVEPOINT: the startup's check, then its transaction
                pass
        return conn.execute("SELECT 42").fetchone()[0]

    broken = psycopg.connect(app.dsn, autocommit=True)
    with pytest.raises(psycopg.InternalError) as caught:
        kill_server_mid_transaction(broken, db)
        with broken.transaction():
            pass
    assert is_outage(caught.value, broken) and not is_outage(caught.value)
    broken.close()
    app.workflow("idle")(lambda ctx, input: None)
    worker: Worker = start_worker(app, concurrency=1)
    assert worker.db(once_killed, window=30) == 42
    assert killed == [1]


def test_a_worker_whose_server_restarts_while_it_registers_waits_and_registers(pooled, start_worker, monkeypatch):
    """The chaos run's failure: the server went away inside the worker's startup transaction
    (at queues.declare's SAVEPOINT), and the worker died of the InternalError. It now takes
    the broken connection for an outage, waits and registers on a new one."""
    app, db = pooled
    app.workflow("idle")(lambda ctx, input: None)
    real_declare = queues_mod.declare
    killed: list[int] = []

    def server_gone_then_declare(conn: psycopg.Connection, *args: object, **kwargs: object) -> object:
        if not killed:
            killed.append(conn.execute("SELECT pg_backend_pid()").fetchone()[0])
            end_backend(db, killed[0])
        return real_declare(conn, *args, **kwargs)

    monkeypatch.setattr(queues_mod, "declare", server_gone_then_declare)
    worker: Worker = start_worker(app, concurrency=1)
    assert len(killed) == 1
    live = "SELECT count(*) FROM workers WHERE worker_id = %s AND stopped_at IS NULL"
    assert db.execute(live, (worker.worker_id,)).fetchone()[0] == 1


def test_an_app_call_on_a_connection_the_server_left_says_the_database_is_unavailable(pooled) -> None:
    """The same broken connection under an app call: DatabaseUnavailable naming the server,
    not psycopg's InternalError; the next call gets a working connection."""
    app, db = pooled
    with pytest.raises(DatabaseUnavailable, match="cannot connect to PostgreSQL"):
        with app.connection() as conn:
            kill_server_mid_transaction(conn, db)
            with conn.transaction():
                pass
    assert app.get(app.enqueue("after", {})).status == "enqueued"


async def test_an_async_call_on_a_connection_the_server_left_says_the_database_is_unavailable(pooled) -> None:
    app, db = pooled
    async with AsyncKestrel(app.dsn, transaction_pooling=True) as client:
        with pytest.raises(DatabaseUnavailable, match="cannot connect to PostgreSQL"):
            async with client.connection() as conn:
                await conn.execute("BEGIN")
                end_backend(db, (await (await conn.execute("SELECT pg_backend_pid()")).fetchone())[0])
                async with conn.transaction():
                    pass
        assert (await client.get(await client.enqueue("after", {}))).status == "enqueued"


def free_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


def test_a_bouncer_left_running_in_front_of_another_server_is_restarted() -> None:
    """Starting is idempotent, so a run reuses the bouncer an earlier run left; one that run
    started in front of another server (another $KESTREL_TEST_DSN) sent this run's every
    connection there."""
    env = {"KESTREL_PGBOUNCER_PORT": free_port()}
    try:
        start_bouncer(**env, KESTREL_PGBOUNCER_UPSTREAM="127.0.0.1:1")  # nothing listens there
        dsn = start_bouncer(**env, KESTREL_PGBOUNCER_UPSTREAM=server_address())
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop"], env={**os.environ, **env}, timeout=60)


@pytest.fixture
def cluster_bouncer(private_cluster: PrivateServer) -> Iterator[str]:
    """A second PgBouncer, in front of the private server the chaos run restarts."""
    env = {
        "KESTREL_PGBOUNCER_PORT": free_port(),
        "KESTREL_PGBOUNCER_UPSTREAM": f"127.0.0.1:{private_cluster.port}",
        "KESTREL_PGBOUNCER_POOL_SIZE": "40",
    }
    dsn = start_bouncer(**env)
    try:
        yield dsn
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop"], env={**os.environ, **env}, timeout=60)


@pytest.mark.slow
def test_short_chaos_run_through_the_bouncer(
    private_cluster: PrivateServer, cluster_bouncer: str, capsys: pytest.CaptureFixture[str]
) -> None:
    database = f"chaos_bouncer_{uuid.uuid4().hex[:8]}"
    cfg = replace(
        SHORT_RUN,
        chaos_s=20.0,
        workers=2,
        rate=6.0,
        stops=1,
        worker_dsn=make_conninfo(cluster_bouncer, dbname=database),
        transaction_pooling=True,
    )
    report = run_checked(private_cluster, cfg, database=database, title="chaos through pgbouncer", capsys=capsys)
    assert report.kills >= 2 and report.stops == 1 and report.restarts == 2, report.summary()
    v = report.verdict  # the workload cancels and fails some on purpose (tests/chaos/workload.py)
    assert report.enqueued >= 80 and v.statuses["success"] + v.cancelled + v.failed_as_meant == report.enqueued
