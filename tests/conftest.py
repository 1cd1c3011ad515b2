"""Database fixtures shared by every test.

Tests talk to a real PostgreSQL: ``$KESTREL_TEST_DSN`` (an admin connection that may create
databases), else the local server at 127.0.0.1:5432 as user postgres. Each test module gets a
database of its own, a copy of one template the run migrates once (migrating costs ~2 s,
copying what creating an empty database costs); each test gets a migrated ``Kestrel`` on it
with empty tables (only those the last test wrote are truncated). When a module ends, its
database goes to the next module of the same process if nothing but rows changed in it
(``tests/database_reuse.py``), else it is closed and dropped when the run ends.
"""

from __future__ import annotations

import gc
import os
import tempfile
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg

# Loaded before anything loads pglast (libpg_query and its many thread-local variables): a test
# process that loaded pydantic_core late (typer's lazy import, by a CLI command run in-process
# after SQL-guard tests) once aborted inside that import ("Fatal Python error: Aborted"). The
# CLI itself loads it first, while parsing its arguments: this is the order the product runs in.
import pydantic_core  # noqa: F401
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import tuple_row

from kestrel_core import Kestrel
from tests import database_reuse
from tests.bytecode import compile_once
from tests.file_order import longest_files_first
from tests.private_pg import PrivateServer, new_private_server

DEFAULT_ADMIN_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres"
# $KESTREL_TEST_DSN=private: a private server for the run even when one is at the default place.
PRIVATE = "private"
ADMIN_DSN = os.environ.get("KESTREL_TEST_DSN") or DEFAULT_ADMIN_DSN
KESTREL_TABLES = (
    "operator_actions, step_attempts, workflow_waits, operation_outputs, workflow_executions, workers,"
    " queues, schedules, workflow_events, executions_ready, activity_minutes, execution_keys, declarations,"
    " execution_forks, bulk_batches, bulk_batch_items"
)


CREATE_DATABASE = sql.SQL("CREATE DATABASE {}")
FROM_TEMPLATE = sql.SQL(" TEMPLATE {}")
DROP_DATABASE = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
RENAME_DATABASE = sql.SQL("ALTER DATABASE {} RENAME TO {}")
CLOSE_DATABASE = sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS false")
END_SESSIONS = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()"
OTHER_SESSIONS = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
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


class _DropsAtTheEnd:
    """Drops the test modules' databases when this process's session ends, several at once.
    Each DROP DATABASE forces an immediate checkpoint (PostgreSQL 15): ~170 drops made during a
    run, as each module ended, wrote out every dirty page each time and made the next change of
    each page log a full-page image, which slowed every test. At the end, concurrent drops share
    their checkpoints, and there is little left to write. A module's sessions still end with it."""

    WORKERS = 8

    def __init__(self) -> None:
        self._dsns: list[str] = []
        self._lock = threading.Lock()

    def add(self, dsn: str) -> None:
        """Drop ``dsn``'s database at the end; close it to new sessions and end its sessions
        now, as DROP DATABASE ... WITH (FORCE) did (what a test left running would otherwise
        hold the server's connections for the rest of the run)."""
        name = conninfo_to_dict(dsn)["dbname"]
        with self._lock:
            self._dsns.append(dsn)
        try:
            with _admin() as conn:
                conn.execute(CLOSE_DATABASE.format(sql.Identifier(name)))
                conn.execute(END_SESSIONS, (name,))
        except psycopg.Error as exc:  # pragma: no cover - a test dropped it; the drop says so
            print(f"could not close the test database of {dsn}: {exc}")

    def wait(self) -> None:
        """Drop every database added so far: all are gone when this returns."""
        with self._lock:
            dsns, self._dsns = self._dsns, []
        if dsns:
            with ThreadPoolExecutor(self.WORKERS, thread_name_prefix="drop-test-databases") as pool:
                list(pool.map(_drop_or_say, dsns))


def _drop_or_say(dsn: str) -> None:
    try:
        drop_database(dsn)
    except psycopg.Error as exc:  # pragma: no cover - the server went away
        print(f"could not drop the test database of {dsn}: {exc}")


_later_drops = _DropsAtTheEnd()


def drop_at_the_end(dsn: str) -> None:
    """Drop a database a test created when the run ends (``_DropsAtTheEnd``); its sessions end now."""
    _later_drops.add(dsn)


def pytest_sessionfinish() -> None:
    while spare_databases:
        drop_at_the_end(spare_databases.pop())
    _later_drops.wait()


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    """A fresh database for this test module (DSN), dropped afterwards."""
    dsn = create_database()
    try:
        yield dsn
    finally:
        drop_at_the_end(dsn)


# This run's template database, named by the controlling process (pytest_configure) and found
# by its xdist workers in the environment they inherit.
TEMPLATE_VARIABLE = "KESTREL_TEST_TEMPLATE"


# The test processes collect garbage less often: a console test's app is hundreds of
# thousands of objects, and the default thresholds (700, 10, 10) ran a full collection over
# all of them again and again. What the imports and the collection made is frozen out of
# every later collection. The console's tests (tests/console/tui with test_async_fanout.py)
# took 76 s of CPU against 88 s; a full run's test processes 232-245 s against 258-268 s.
GC_THRESHOLDS = (50_000, 20, 20)


# The server this run started because none was configured or reachable (the controller's only).
_run_server: list[PrivateServer] = []


def in_ci() -> bool:
    """CI ($CI set, as .ci/run does): what a test would skip for lack of a tool fails instead."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_extension(name: str) -> None:
    """Skip a test that needs the server extension ``name`` when the test server cannot load it
    (the bundled server of ``kestrel[embedded]`` ships no contrib module); in CI, fail."""
    with psycopg.connect(ADMIN_DSN, autocommit=True, connect_timeout=5) as conn:
        found = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = %s", (name,)).fetchone()
    if found is None:
        why = f"the test server has no {name} extension (PostgreSQL's contrib modules are not installed)"
        if in_ci():
            pytest.fail(f"CI's server must have it: {why}")
        pytest.skip(why)


def reachable(dsn: str) -> bool:
    """Whether a server answers at ``dsn`` (within 3 s)."""
    try:
        psycopg.connect(dsn, connect_timeout=3).close()
    except psycopg.OperationalError:
        return False
    return True


# Test processes (xdist's ``-n auto``): seven keep 2 cores busy (pyproject.toml). Each may hold up
# to CONNECTIONS_PER_PROCESS server connections at its peak (a test's worker processes, their
# pools, listeners and the test's own sessions; 86 in all were measured at once with seven): a
# server that allows fewer gets fewer processes instead of "too many clients" mid-run.
MOST_PROCESSES = 7
CONNECTIONS_PER_PROCESS = 17
RESERVED_CONNECTIONS = 10
# The server a run starts for itself allows what seven processes need, and runs no autovacuum:
# a module's database is handed on only if its statistics are still the template's
# (tests/database_reuse.py), and an autovacuum ANALYZE between a module's tests and that check
# kept it from being handed on (test_database_reuse.py failed on the run's own server).
RUN_SERVER_SETTINGS: dict[str, int | str] = {"max_connections": 300, "autovacuum": "off"}
_processes_chosen: list[str] = []


def processes_for(max_connections: int) -> int:
    """How many test processes a server allowing ``max_connections`` sessions carries."""
    return max(1, min(MOST_PROCESSES, (max_connections - RESERVED_CONNECTIONS) // CONNECTIONS_PER_PROCESS))


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: MOST_PROCESSES, fewer when the test server allows too few connections."""
    if os.environ.get("KESTREL_TEST_DSN") == PRIVATE:
        return MOST_PROCESSES  # the run's own server (RUN_SERVER_SETTINGS)
    try:
        with psycopg.connect(ADMIN_DSN, connect_timeout=3) as conn:
            allowed = int(conn.execute("SHOW max_connections").fetchone()[0])
    except psycopg.Error:
        # Nothing answers: the run's own server (RUN_SERVER_SETTINGS), or pytest_configure says
        # what is wrong with the one $KESTREL_TEST_DSN names.
        return MOST_PROCESSES
    processes = processes_for(allowed)
    if processes < MOST_PROCESSES:
        _processes_chosen.append(
            f"{processes} test processes, not {MOST_PROCESSES}: the server allows {allowed} connections"
            f" (max_connections); {RESERVED_CONNECTIONS + MOST_PROCESSES * CONNECTIONS_PER_PROCESS} runs all"
            " seven, or set KESTREL_TEST_DSN=private for a server of the run's own"
        )
    return processes


def _server_for_the_run() -> None:
    """Start a private server for the run when $KESTREL_TEST_DSN is unset and nothing answers at
    127.0.0.1:5432 (a fresh machine), or when it says ``private``: the system's server binaries,
    else the bundled ones the demo uses. The test processes find it in $KESTREL_TEST_DSN."""
    global ADMIN_DSN
    wanted = os.environ.get("KESTREL_TEST_DSN")
    if wanted not in (None, "", PRIVATE) or (wanted != PRIVATE and reachable(DEFAULT_ADMIN_DSN)):
        return
    data_dir = Path(tempfile.mkdtemp(prefix="kestrel-test-pg-"))
    try:
        server = new_private_server(data_dir, durable=False, settings=RUN_SERVER_SETTINGS)
        server.start()
    except Exception as exc:
        pytest.exit(
            f"no PostgreSQL at 127.0.0.1:5432 and $KESTREL_TEST_DSN is not set, and a private server "
            f"could not start: {exc}\nInstall PostgreSQL's server (apt-get install postgresql) or "
            "pip install -e '.[embedded]', or point KESTREL_TEST_DSN at an admin DSN.",
            returncode=3,
        )
    _run_server.append(server)
    ADMIN_DSN = os.environ["KESTREL_TEST_DSN"] = server.dsn_for("postgres")


def pytest_report_header(config: pytest.Config) -> list[str]:
    lines = list(_processes_chosen)
    if _run_server:
        lines.append(
            f"PostgreSQL: a private server started for this run (port {_run_server[0].port}), removed at the end:"
            " $KESTREL_TEST_DSN is unset and nothing answers at 127.0.0.1:5432, or it says 'private'"
        )
    return lines


def pytest_configure(config: pytest.Config) -> None:
    gc.set_threshold(*GC_THRESHOLDS)
    if not hasattr(config, "workerinput"):  # the controller (or the only process, with -n 0)
        _server_for_the_run()
        os.environ[TEMPLATE_VARIABLE] = f"kestrel_tpl_{uuid.uuid4().hex[:12]}"
        compile_once(config)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    longest_files_first(items)


def pytest_collection_finish(session: pytest.Session) -> None:
    gc.collect()
    gc.freeze()


def pytest_unconfigure(config: pytest.Config) -> None:
    name = os.environ.pop(TEMPLATE_VARIABLE, None)
    if name and not hasattr(config, "workerinput"):
        try:
            with psycopg.connect(ADMIN_DSN, autocommit=True, connect_timeout=5) as conn:
                conn.execute(DROP_DATABASE.format(sql.Identifier(name)))
        except psycopg.Error:  # pragma: no cover - the server went away; nothing to clean
            pass
    while _run_server:
        _run_server.pop().destroy()


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
    """A database for this test module with the Kestrel schema applied (DSN): a copy of the
    run's template, or the database of an earlier module of this process that changed nothing
    but rows (``tests/database_reuse.py``), reset; handed on or dropped afterwards."""
    dsn = spare_databases.pop() if spare_databases else copy_of_template(template_database)
    handed_on = False
    try:
        yield dsn
        handed_on = hand_on(dsn)
    finally:
        if not handed_on:
            drop_at_the_end(dsn)


@dataclass(frozen=True)
class _FreshCopy:
    """What a copy of the template is, read from this process's first copy before any test."""

    state: list[str]  # database_reuse.state
    ranges: list[int]  # the history's ranges


# This process's module databases ready for its next module.
spare_databases: list[str] = []
_fresh: _FreshCopy | None = None


def copy_of_template(template: str) -> str:
    """A new database copied from ``template`` (the first copy is read as what fresh is)."""
    global _fresh
    dsn = create_database(template=template)
    if _fresh is None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            _fresh = _FreshCopy(database_reuse.state(conn, RESET_TABLES), [lo for (lo,) in conn.execute(RANGES)])
    return dsn


def hand_on(dsn: str) -> bool:
    """Reset ``dsn`` and keep it for the next module if it is again what a fresh copy is."""
    assert _fresh is not None, "a module database handed on before any was copied"
    name = conninfo_to_dict(dsn)["dbname"]
    try:
        with _admin() as admin:
            admin.execute(END_SESSIONS, (name,))
        reset = TablesReset(dsn, own_ranges=_fresh.ranges)
        try:
            reset()
        finally:
            reset.close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            same = database_reuse.state(conn, RESET_TABLES) == _fresh.state
            alone = conn.execute(OTHER_SESSIONS).fetchone() == (0,)
    except psycopg.Error:
        return False
    if same and alone:
        spare_databases.append(dsn)
    return same and alone


# The tables that hold rows, of those emptied between tests: a partitioned table's partitions.
LEAF_TABLES = """
SELECT c.relname FROM pg_class c
  LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
  LEFT JOIN pg_class parent ON parent.oid = i.inhparent
 WHERE c.relnamespace = 'kestrel'::regnamespace AND c.relkind = 'r'
   AND coalesce(parent.relname, c.relname) = ANY(%s)
"""
# How many rows a table holds, counted up to one past EMPTIED_BY_DELETE.
ROWS_HELD = sql.SQL("SELECT {name}, (SELECT count(*) FROM (SELECT FROM kestrel.{table} LIMIT {most}) AS r)")
TRUNCATE_TABLES = sql.SQL("TRUNCATE {}")
# Without triggers (foreign keys' too: every written table is emptied), as a superuser may.
DELETE_ROWS = sql.SQL("DELETE FROM {}")
WITHOUT_TRIGGERS = "SET LOCAL session_replication_role = replica"
# Up to this many rows a table is emptied by DELETE, else by TRUNCATE. TRUNCATE gives the table
# and each of its indexes a new file, and every session using them reloads them: a reset after
# a test of a few rows took 23-28 ms of server CPU, against 4-5 ms with DELETE (300 rows: 5 ms).
# The dead rows DELETE leaves are few and go with the module's database.
EMPTIED_BY_DELETE = 1000
# Ids taken (by a row, or by an insert refused or rolled back): the next test's start from 1.
RESTART_TAKEN_IDS = """
SELECT setval(format('%%I.%%I', s.schemaname, s.sequencename), s.start_value, false)
  FROM pg_sequences s
  JOIN pg_class seq ON seq.relname = s.sequencename AND seq.relnamespace = 'kestrel'::regnamespace
  JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = seq.oid AND d.deptype IN ('a', 'i')
  JOIN pg_class t ON t.oid = d.refobjid
 WHERE s.schemaname = 'kestrel' AND s.last_value IS NOT NULL AND t.relname = ANY(%s)
"""
ENSURE_PARTITIONS = "SELECT kestrel.ensure_partitions()"
# The history's id ranges (each a partition of the four partitioned tables) a test added to the
# module database's own: dropped, with their partitions, before the next test.
RANGES = "SELECT lo FROM kestrel.history_partitions ORDER BY lo"
HISTORY_TABLES = ("workflow_executions", "operation_outputs", "step_attempts", "workflow_waits")
DROP_TABLES = sql.SQL("DROP TABLE {}")
FORGET_RANGES = "DELETE FROM kestrel.history_partitions WHERE lo = ANY(%s)"
RESET_TABLES = [t.strip() for t in KESTREL_TABLES.split(",")] + ["execution_counts"]


class TablesReset:
    """Empties one database's Kestrel tables between its tests, on a connection kept for the
    test module, emptying only the tables (the partitions, for the history) that hold rows, by
    DELETE while they hold few (``EMPTIED_BY_DELETE``). TRUNCATE gives each table and index it
    empties a new file: all of them, with the history's partitions and their indexes, took
    ~50 ms of server CPU on an idle server and ~170 ms on a busy one, for tests that mostly
    write a few tables or none. Neither fires the triggers of the tables it empties (a
    partition's TRUNCATE, none of its parent's): what they fill is in RESET_TABLES too.

    The ranges a test created past the database's own (ids restarted far ahead, ranges made
    ahead) are dropped: they piled up over a module (test_partitions.py ended with 31 ranges,
    775 partitions and partition indexes, against 3 ranges), and every new session of the
    module's later tests loaded and planned over all of them: that file took 27 s of server
    CPU, and its test of a prune under load ran twice as long as alone."""

    def __init__(self, dsn: str, own_ranges: list[int] | None = None) -> None:
        self.dsn = dsn
        self._conn: psycopg.Connection | None = None
        # The copy of the template's ranges: given, or read before the module's first test.
        self._own_ranges = own_ranges

    def __call__(self) -> None:
        try:
            self._reset()
        except psycopg.OperationalError:  # a test ended this session (terminated, restarted)
            self.close()
            self._reset()

    def _reset(self) -> None:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self.dsn, autocommit=True, application_name="kestrel-tests-reset")
        conn = self._conn
        ranges = [lo for (lo,) in conn.execute(RANGES)]
        if self._own_ranges is None:
            self._own_ranges = ranges
        added = [lo for lo in ranges if lo not in self._own_ranges]
        if added:
            partitions = [sql.Identifier("kestrel", f"{t}_p{lo}") for lo in added for t in HISTORY_TABLES]
            with conn.transaction():
                conn.execute(DROP_TABLES.format(sql.SQL(", ").join(partitions)))
                conn.execute(FORGET_RANGES, (added,))
        leaves = [name for (name,) in conn.execute(LEAF_TABLES, (RESET_TABLES,))]
        counted = sql.SQL(" UNION ALL ").join(
            ROWS_HELD.format(name=sql.Literal(t), table=sql.Identifier(t), most=EMPTIED_BY_DELETE + 1) for t in leaves
        )
        rows = {t: n for t, n in conn.execute(counted) if n}
        superuser = conn.info.parameter_status("is_superuser") == "on"
        few = [t for t, n in rows.items() if n <= EMPTIED_BY_DELETE] if superuser else []
        many = [t for t in rows if t not in few]
        if few:
            deletes = [DELETE_ROWS.format(sql.Identifier("kestrel", t)) for t in few]
            with conn.transaction():
                conn.execute(sql.SQL("; ").join([sql.SQL(WITHOUT_TRIGGERS), *deletes]))
        if many:
            conn.execute(TRUNCATE_TABLES.format(sql.SQL(", ").join(sql.Identifier("kestrel", t) for t in many)))
        conn.execute(RESTART_TAKEN_IDS, (RESET_TABLES,))
        conn.execute(ENSURE_PARTITIONS)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


@pytest.fixture(scope="module")
def tables_reset(migrated: str) -> Iterator[TablesReset]:
    reset = TablesReset(migrated)
    try:
        yield reset
    finally:
        reset.close()


@pytest.fixture
def dsn(migrated: str, tables_reset: TablesReset) -> Iterator[str]:
    """DSN of a migrated database whose Kestrel tables are empty when the test starts, its ids
    restarted from 1 and the history's ranges from id 0 in place (a test may have dropped some)."""
    tables_reset()
    yield migrated


@pytest.fixture
def app(dsn: str) -> Iterator[Kestrel]:
    """A Kestrel app on an empty, migrated database; closed after the test."""
    with Kestrel(dsn) as kestrel:
        yield kestrel


# What a kept session forgets before each test: settings (back to what it was opened with),
# role, prepared statements and plans, temporary tables, LISTENs, advisory locks.
FORGET_SESSION = "DISCARD ALL"


class KeptSessions:
    """Plain connections for a module's tests (``db``, a test's observer or bystander), each
    kept for the module and made fresh for each test by DISCARD ALL. A new session for every
    test cost ~5 ms of server CPU to start and ~6 ms more for its first statement on the
    history (its partitions, indexes and triggers loaded into the session's caches again); the
    ad-hoc SQL tests alone opened ~680 a run, four a test. A session a test ended, closed, or
    left in a state of the client's own (not in autocommit, a transaction open, rows as other
    than tuples) is replaced by a new one."""

    def __init__(self) -> None:
        self._conns: dict[tuple[str, str, str | None], psycopg.Connection] = {}
        self._fresh: set[tuple[str, str, str | None]] = set()  # made fresh for the running test

    def next_test(self) -> None:
        self._fresh.clear()

    def session(self, dsn: str, name: str = "db", options: str | None = None) -> psycopg.Connection:
        """The session ``name`` on ``dsn``, to this test as a new connection opens it (the same
        one each time the test asks)."""
        key = (name, dsn, options)
        conn = self._conns.get(key)
        if conn is not None and key in self._fresh and not conn.closed:
            return conn
        if conn is None or not self._forgotten(conn):
            self._close(key)
            # Not prepared by psycopg: after the first, psycopg misses that DISCARD ALL dropped them.
            kwargs = {"options": options} if options else {}
            conn = self._conns[key] = psycopg.connect(dsn, autocommit=True, prepare_threshold=None, **kwargs)
        self._fresh.add(key)
        return conn

    @staticmethod
    def _forgotten(conn: psycopg.Connection) -> bool:
        """Whether ``conn`` is as opened (on the client's side) and has forgotten the last test."""
        as_opened = (
            not conn.closed
            and not conn.broken
            and conn.autocommit
            and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            and conn.row_factory is tuple_row
            and conn.prepare_threshold is None
        )
        if not as_opened:
            return False
        try:
            conn.execute(FORGET_SESSION)
        except psycopg.OperationalError:  # a test ended the session (terminated, restarted)
            return False
        return True

    def _close(self, key: tuple[str, str, str | None]) -> None:
        conn = self._conns.pop(key, None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        for key in list(self._conns):
            self._close(key)


@pytest.fixture(scope="module")
def kept_sessions(migrated: str) -> Iterator[KeptSessions]:
    kept = KeptSessions()
    try:
        yield kept
    finally:
        kept.close()  # before the module's database is handed on: it must have no session left


@pytest.fixture
def sessions(kept_sessions: KeptSessions) -> KeptSessions:
    """The module's kept sessions, each made fresh for this test when it first asks for it."""
    kept_sessions.next_test()
    return kept_sessions


@pytest.fixture
def db(dsn: str, sessions: KeptSessions) -> psycopg.Connection:
    """A plain autocommit connection to the test database, search_path set to kestrel: to the
    test, a new session (``KeptSessions``)."""
    return sessions.session(dsn, options="-c search_path=kestrel")


# -- Private PostgreSQL servers (tests/private_pg.py) ------------------------------------------
# For tests that stop, restart or crash the server: the shared server above must stay up.


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


@contextmanager
def admin_objects(dsn: str, create: str, drop: str) -> Iterator[None]:
    """Objects an administrator made in ``dsn``'s database (``create``), for the test's time:
    ``drop`` removes them after, whatever the test did."""
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(create)
    try:
        yield
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(drop)


@contextmanager
def login_in_role(dsn: str, prefix: str, role: str) -> Iterator[str]:
    """DSN of a new login, member of ``role``, for ``dsn``'s database. Roles are cluster-wide
    (other test runs share them): the login's name is unique, and it is dropped afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with _admin() as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(sql.Identifier(name), sql.Identifier(role)))
    try:
        yield make_conninfo(dsn, user=name)
    finally:
        with _admin() as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (name,))
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


@pytest.fixture(scope="module")
def reader_dsn(migrated: str) -> Iterator[str]:
    """DSN of a login granted kestrel_reader, for the module's database: the console refuses
    ad-hoc SQL on the superuser the tests connect as."""
    with login_in_role(migrated, "kt_reader", "kestrel_reader") as dsn:
        yield dsn


@pytest.fixture(scope="module")
def operator_dsn(migrated: str) -> Iterator[str]:
    """DSN of a login granted kestrel_operator (so a member of kestrel_reader), as
    docs/operations.md recommends."""
    with login_in_role(migrated, "kt_oplogin", "kestrel_operator") as dsn:
        yield dsn
