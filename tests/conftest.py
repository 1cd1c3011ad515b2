"""Database fixtures shared by every test.

Tests talk to a real PostgreSQL: ``$KESTREL_TEST_DSN`` (an admin connection that may create
databases), else the local server at 127.0.0.1:5432 as user postgres. Each test module gets its
own fresh database, dropped at the end; each test gets a migrated ``Kestrel`` on it with empty
tables. A module's migrated database is a copy of one template the run migrates once (migrating
costs ~2 s, copying what creating an empty database costs).
"""

from __future__ import annotations

import os
import queue
import threading
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from kestrel_core import Kestrel
from tests.file_order import longest_files_first

ADMIN_DSN = os.environ.get("KESTREL_TEST_DSN", "host=127.0.0.1 port=5432 user=postgres dbname=postgres")
KESTREL_TABLES = (
    "operator_actions, step_attempts, workflow_waits, operation_outputs, workflow_executions, workers,"
    " queues, schedules, workflow_events, executions_ready, activity_minutes, execution_keys"
)


CREATE_DATABASE = sql.SQL("CREATE DATABASE {}")
FROM_TEMPLATE = sql.SQL(" TEMPLATE {}")
DROP_DATABASE = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
RENAME_DATABASE = sql.SQL("ALTER DATABASE {} RENAME TO {}")
DATABASE_EXISTS = "SELECT 1 FROM pg_database WHERE datname = %s"
LOCK_NAME = "SELECT pg_advisory_lock(hashtext(%s))"
UNLOCK_NAME = "SELECT pg_advisory_unlock(hashtext(%s))"


def _admin() -> psycopg.Connection:
    try:
        return psycopg.connect(ADMIN_DSN, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:  # pragma: no cover - environment problem
        pytest.exit(
            f"cannot reach the test PostgreSQL ({ADMIN_DSN}): {exc}\n"
            "Start it (pg_ctlcluster 15 main start) or point KESTREL_TEST_DSN at one.",
            returncode=3,
        )


@pytest.fixture(scope="session")
def admin_dsn() -> str:
    return ADMIN_DSN


def create_database(prefix: str = "kestrel_t", template: str | None = None) -> str:
    """Create a database on the test server (empty, or a copy of ``template``); return its DSN."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    statement = CREATE_DATABASE.format(sql.Identifier(name))
    if template is not None:
        statement += FROM_TEMPLATE.format(sql.Identifier(template))
    with _admin() as conn:
        conn.execute(statement)
    return make_conninfo(ADMIN_DSN, dbname=name)


def drop_database(dsn: str) -> None:
    with _admin() as conn:
        conn.execute(DROP_DATABASE.format(sql.Identifier(conninfo_to_dict(dsn)["dbname"])))


class _LaterDrops:
    """Drops the test modules' databases on a thread of its own. DROP DATABASE waits for a
    checkpoint (0.5-2.5 s on a busy server): the next test module need not wait for it.
    ``wait()`` at the end of the session: every database is gone when the run ends."""

    def __init__(self) -> None:
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread: threading.Thread | None = None

    def add(self, dsn: str) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="drop-test-databases", daemon=True)
            self._thread.start()
        self._queue.put(dsn)

    def _run(self) -> None:
        while (dsn := self._queue.get()) is not None:
            try:
                drop_database(dsn)
            except psycopg.Error as exc:  # pragma: no cover - the server went away
                print(f"could not drop the test database of {dsn}: {exc}")

    def wait(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None


_later_drops = _LaterDrops()


def pytest_sessionfinish() -> None:
    _later_drops.wait()


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    """A fresh database for this test module (DSN), dropped afterwards."""
    dsn = create_database()
    try:
        yield dsn
    finally:
        _later_drops.add(dsn)


# This run's template database, named by the controlling process (pytest_configure) and found
# by its xdist workers in the environment they inherit.
TEMPLATE_VARIABLE = "KESTREL_TEST_TEMPLATE"


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller (or the only process, with -n 0)
        os.environ[TEMPLATE_VARIABLE] = f"kestrel_tpl_{uuid.uuid4().hex[:12]}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    longest_files_first(items)


def pytest_unconfigure(config: pytest.Config) -> None:
    name = os.environ.pop(TEMPLATE_VARIABLE, None)
    if name and not hasattr(config, "workerinput"):
        try:
            with psycopg.connect(ADMIN_DSN, autocommit=True, connect_timeout=5) as conn:
                conn.execute(DROP_DATABASE.format(sql.Identifier(name)))
        except psycopg.Error:  # pragma: no cover - the server went away; nothing to clean
            pass


@pytest.fixture(scope="session")
def template_database() -> str:
    """The name of this run's migrated template. The first process to ask builds it (under an
    advisory lock, so xdist workers wait for it instead of racing), under a scratch name renamed
    once migrated: a failed build leaves no half-made template behind."""
    name = os.environ.get(TEMPLATE_VARIABLE) or f"kestrel_tpl_{uuid.uuid4().hex[:12]}"
    os.environ[TEMPLATE_VARIABLE] = name
    with _admin() as conn:
        conn.execute(LOCK_NAME, (name,))
        try:
            if conn.execute(DATABASE_EXISTS, (name,)).fetchone() is None:
                dsn = create_database(f"{name}_build")
                try:
                    with Kestrel(dsn) as app:
                        app.migrate()
                    building = sql.Identifier(conninfo_to_dict(dsn)["dbname"])
                    conn.execute(RENAME_DATABASE.format(building, sql.Identifier(name)))
                except BaseException:
                    drop_database(dsn)
                    raise
        finally:
            conn.execute(UNLOCK_NAME, (name,))
    return name


@pytest.fixture(scope="module")
def migrated(template_database: str) -> Iterator[str]:
    """A fresh database for this test module with the Kestrel schema applied (DSN), a copy of
    the run's template; dropped afterwards."""
    dsn = create_database(template=template_database)
    try:
        yield dsn
    finally:
        _later_drops.add(dsn)


@pytest.fixture
def dsn(migrated: str) -> Iterator[str]:
    """DSN of a migrated database whose Kestrel tables are empty when the test starts, its ids
    restarted from 1 and the history's ranges from id 0 in place (a test may have dropped some)."""
    with psycopg.connect(migrated, autocommit=True) as conn:
        conn.execute(
            f"TRUNCATE {', '.join('kestrel.' + t.strip() for t in KESTREL_TABLES.split(','))} RESTART IDENTITY CASCADE"
        )
        conn.execute("SELECT kestrel.ensure_partitions()")
    yield migrated


@pytest.fixture
def app(dsn: str) -> Iterator[Kestrel]:
    """A Kestrel app on an empty, migrated database; closed after the test."""
    with Kestrel(dsn) as kestrel:
        yield kestrel


@pytest.fixture
def db(dsn: str) -> Iterator[psycopg.Connection]:
    """A plain autocommit connection to the test database, search_path set to kestrel."""
    with psycopg.connect(dsn, autocommit=True, options="-c search_path=kestrel") as conn:
        yield conn


# -- Private PostgreSQL servers (tests/private_pg.py) ------------------------------------------
# For tests that stop, restart or crash the server: the shared server above must stay up.

import tempfile
from pathlib import Path

from tests.private_pg import PrivateServer, new_private_server


@pytest.fixture(scope="module")
def private_cluster_module() -> Iterator[PrivateServer]:
    """A private, non-durable PostgreSQL server shared by one test module; deleted afterwards.

    Its data dir is a fresh directory directly under the temp dir (not pytest's tmp_path,
    whose parents are private to root: as root the server runs as ``postgres``).
    """
    cluster = new_private_server(Path(tempfile.mkdtemp(prefix="kestrel-pg-")), durable=False)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def private_cluster(private_cluster_module: PrivateServer) -> PrivateServer:
    """The module's private server, running when the test starts (restarted if an earlier
    test stopped or killed it). Tests may stop, restart or kill it freely; give each test
    its own database (``create_database``) or tables, as data lives on across the module."""
    if not private_cluster_module.is_running():
        private_cluster_module.start()
    return private_cluster_module


# -- A read-only login for ad-hoc SQL (issue 18) ----------------------------------------------


@pytest.fixture(scope="module")
def reader_dsn(migrated: str) -> Iterator[str]:
    """DSN of a login granted kestrel_reader, for the module's database: the console refuses
    ad-hoc SQL on the superuser the tests connect as. Roles are cluster-wide (other test runs
    share them): the login's name is unique, and it is dropped afterwards."""
    name = f"kt_reader_{uuid.uuid4().hex[:10]}"
    with _admin() as conn:
        conn.execute(f'CREATE ROLE "{name}" LOGIN IN ROLE kestrel_reader')
    try:
        yield make_conninfo(migrated, user=name)
    finally:
        with _admin() as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (name,))
            conn.execute(f'DROP ROLE IF EXISTS "{name}"')


@pytest.fixture(scope="module")
def operator_dsn(migrated: str) -> Iterator[str]:
    """DSN of a login granted kestrel_operator (so a member of kestrel_reader), as
    docs/operations.md recommends; unique name, dropped afterwards."""
    name = f"kt_oplogin_{uuid.uuid4().hex[:10]}"
    with _admin() as conn:
        conn.execute(f'CREATE ROLE "{name}" LOGIN IN ROLE kestrel_operator')
    try:
        yield make_conninfo(migrated, user=name)
    finally:
        with _admin() as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (name,))
            conn.execute(f'DROP ROLE IF EXISTS "{name}"')
