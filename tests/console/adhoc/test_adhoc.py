"""run_read_only against a real Postgres: hostile queries change nothing, reads return the truth.

Every hostile query is refused by the guard (layer a); where it makes sense it is also sent
with ``check=False`` to prove the read-only, rolled-back transaction (layer b) stops it alone.
After every case the Kestrel tables, the database's objects, roles, advisory locks and large
objects are as before, and a bystander session is still alive.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import psycopg
import pytest
from psycopg import sql

from kestrel_console.adhoc import QueryFailed, QueryResult, QueryTimeout
from kestrel_console.adhoc import run_read_only as _run_read_only
from kestrel_console.adhoc.guard import QueryRefused
from kestrel_console.adhoc.read_only import MAX_TIMEOUT_MS
from kestrel_core import DatabaseUnavailable
from tests.conftest import KeptSessions

TABLES = ("workflow_executions", "operation_outputs", "workflow_waits", "step_attempts", "workers", "operator_actions")

SEED = """
-- ids 1..5: the dsn fixture restarts identities
INSERT INTO kestrel.workflow_executions (workflow_name, status, input, output, error) VALUES
    ('report', 'success', '{"pod": "api-1"}', '{"ok": true}', NULL),
    ('report', 'error', '{"pod": "api-2"}', NULL, 'boom'),
    ('import', 'waiting', '{"pod": "db-1"}', NULL, NULL),
    ('export', 'enqueued', '[1, 2]', NULL, NULL),
    ('import', 'running', NULL, NULL, NULL);
INSERT INTO kestrel.operation_outputs (execution_id, step_id, output, error)
VALUES (1, 'fetch', '{"rows": 3}', NULL), (2, 'fetch', NULL, 'timeout');
INSERT INTO kestrel.workflow_waits (execution_id, step_id, kind, details)
VALUES (3, 'approve-import', 'approval', '{"rows": 10}');
INSERT INTO kestrel.step_attempts (execution_id, step_id, attempt, owner_id, outcome, error)
VALUES (1, 'fetch', 1, 'w1', 'success', NULL), (2, 'fetch', 1, 'w1', 'error', 'timeout'),
       (2, 'fetch', 2, 'w1', 'error', 'timeout');
INSERT INTO kestrel.workers (worker_id, hostname, pid, workflows, concurrency)
VALUES ('w1', 'host-a', 4242, '{report,import}', 4);
INSERT INTO kestrel.operator_actions (actor, action, execution_id, comment, from_status)
VALUES ('alice', 'requeue', 2, 'retry', 'error');
"""
SEED_NAMES = ["report", "report", "import", "export", "import"]

# Used by the CALL case: a procedure that would empty the queue.
PURGE_PROCEDURE = """
CREATE PROCEDURE public.kestrel_test_purge() LANGUAGE sql
AS $$ DELETE FROM kestrel.workflow_executions $$
"""

TABLE_CHECKSUM = sql.SQL(
    "SELECT count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM kestrel.{} t"
)
DATABASE_STATE = """
SELECT
    (SELECT string_agg(c.oid::regclass::text, ',' ORDER BY c.oid::regclass::text)
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')) AS relations,
    (SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
      WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')) AS functions,
    (SELECT count(*) FROM pg_roles WHERE rolname LIKE 'kestrel\\_evil%%') AS evil_roles,
    (SELECT count(*) FROM pg_largeobject_metadata) AS large_objects,
    (SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
      WHERE l.locktype = 'advisory' AND d.datname = current_database()) AS advisory_locks,
    (SELECT string_agg(sequencename || '=' || coalesce(last_value::text, '-'), ',' ORDER BY sequencename)
       FROM pg_sequences WHERE schemaname = 'kestrel') AS sequences,
    (SELECT string_agg(acl::text, ',' ORDER BY acl::text)
       FROM pg_class c, unnest(coalesce(c.relacl, '{}')) acl
      WHERE c.relnamespace = 'kestrel'::regnamespace) AS grants
"""
SESSION_STATE = """
SELECT current_user, current_setting('search_path'), current_setting('statement_timeout'),
       current_setting('work_mem'),
       (SELECT count(*) FROM pg_listening_channels()) AS listening,
       (SELECT count(*) FROM pg_prepared_statements WHERE name NOT LIKE '\\_pg3\\_%%') AS prepared,
       (SELECT count(*) FROM pg_cursors) AS cursors,
       pg_backend_pid()
"""

# These tests run as the test server's superuser on purpose (the layers under the strongest
# login), so they opt in as the console's --allow-privileged-sql does.
run_read_only = functools.partial(_run_read_only, allow_privileged=True)


@pytest.fixture(scope="module")
def purge_procedure(migrated: str) -> None:
    with psycopg.connect(migrated, autocommit=True) as conn:
        conn.execute(PURGE_PROCEDURE)


@pytest.fixture
def seeded(dsn: str, purge_procedure: None, sessions: KeptSessions) -> str:
    sessions.session(dsn, "observer").execute(SEED)
    return dsn


@pytest.fixture
def plain(seeded: str, sessions: KeptSessions) -> psycopg.Connection:
    """An autocommit connection with the default search_path: kestrel tables need the schema."""
    return sessions.session(seeded, "plain")


@pytest.fixture
def bystander(seeded: str, sessions: KeptSessions) -> psycopg.Connection:
    """Another session: the target of the pg_terminate_backend / pg_cancel_backend cases."""
    return sessions.session(seeded, "bystander")


def database_state(observer: psycopg.Connection) -> tuple:
    tables = tuple(observer.execute(TABLE_CHECKSUM.format(sql.Identifier(t))).fetchone() for t in TABLES)
    return tables, observer.execute(DATABASE_STATE).fetchone()


def session_state(conn: psycopg.Connection) -> tuple:
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    return conn.execute(SESSION_STATE).fetchone()


# --- hostile queries ---------------------------------------------------------------------------

SKIP = None  # layer (b) cannot stop it alone (or running it would harm the test server)
NO_TRACE = "no trace"  # the read-only transaction may let it run, but the rollback undoes it


@dataclass(frozen=True)
class Hostile:
    query: str
    reason: str  # the guard's reason must start with this
    bypass: str | None  # SQLSTATE layer (b) must fail with, NO_TRACE, or SKIP (with why)


READ_ONLY = "25006"  # read_only_sql_transaction
IN_TRANSACTION = "25001"  # active_sql_transaction: cannot run inside a transaction block
MULTIPLE = "42601"  # cannot insert multiple commands into a prepared statement
NOT_SUPPORTED = "0A000"  # feature_not_supported

HOSTILE = {
    "delete": Hostile("DELETE FROM workflow_executions", "not a read: DELETE", READ_ONLY),
    "update": Hostile("UPDATE workflow_executions SET status = 'cancelled'", "not a read: UPDATE", READ_ONLY),
    "insert": Hostile("INSERT INTO workers (worker_id) VALUES ('evil')", "not a read: INSERT", READ_ONLY),
    "merge": Hostile(
        "MERGE INTO workers w USING (SELECT 'evil' AS id) s ON w.worker_id = s.id "
        "WHEN NOT MATCHED THEN INSERT (worker_id) VALUES (s.id)",
        "not a read: MERGE",
        READ_ONLY,
    ),
    "drop": Hostile("DROP TABLE operator_actions", "not a read: DROP", READ_ONLY),
    "truncate": Hostile("TRUNCATE workflow_executions CASCADE", "not a read: TRUNCATE", READ_ONLY),
    "create": Hostile("CREATE TABLE evil (a int)", "not a read: CREATE", READ_ONLY),
    "create-temp": Hostile("CREATE TEMP TABLE evil AS SELECT 1", "not a read: CREATE", READ_ONLY),
    "create-role": Hostile("CREATE ROLE kestrel_evil SUPERUSER", "not a read: CREATE", READ_ONLY),
    "alter": Hostile("ALTER TABLE workers ADD COLUMN evil int", "not a read: ALTER", READ_ONLY),
    "grant": Hostile("GRANT ALL ON workflow_executions TO PUBLIC", "not a read: GRANT", READ_ONLY),
    "cte-delete": Hostile(
        "WITH d AS (DELETE FROM workflow_executions RETURNING id) SELECT count(*) FROM d",
        "data-modifying CTE: DELETE",
        READ_ONLY,
    ),
    # Postgres itself refuses a data-modifying CTE below the top level.
    "cte-in-subquery": Hostile(
        "SELECT * FROM (WITH u AS (UPDATE workflow_executions SET status = 'error' RETURNING id) "
        "SELECT id FROM u) AS s",
        "data-modifying CTE: UPDATE",
        NOT_SUPPORTED,
    ),
    "cte-second": Hostile(
        "WITH a AS (SELECT 1), b AS (INSERT INTO workers (worker_id) VALUES ('evil') RETURNING *) SELECT * FROM a",
        "data-modifying CTE: INSERT",
        READ_ONLY,
    ),
    "cte-then-delete": Hostile("WITH x AS (SELECT 1) DELETE FROM workflow_executions", "not a read: DELETE", READ_ONLY),
    "select-into": Hostile("SELECT * INTO evil FROM workflow_executions", "SELECT ... INTO", READ_ONLY),
    "for-update": Hostile("SELECT * FROM workflow_executions FOR UPDATE", "locking clause FOR UPDATE", READ_ONLY),
    "for-no-key-update": Hostile(
        "SELECT id FROM workflow_executions FOR NO KEY UPDATE SKIP LOCKED",
        "locking clause FOR NO KEY UPDATE",
        READ_ONLY,
    ),
    "for-key-share": Hostile("SELECT 1 FROM workers FOR KEY SHARE", "locking clause FOR KEY SHARE", READ_ONLY),
    # Signals work in a read-only transaction: only the guard stops them.
    "terminate": Hostile("SELECT pg_terminate_backend({pid})", "function pg_terminate_backend", SKIP),
    "cancel-qualified": Hostile("select PG_CATALOG.pg_cancel_backend({pid})", "function pg_cancel_backend", SKIP),
    "terminate-in-from": Hostile("SELECT * FROM pg_terminate_backend({pid})", "function pg_terminate_backend", SKIP),
    "terminate-union": Hostile(
        "(SELECT true) UNION (SELECT pg_terminate_backend({pid}))", "function pg_terminate_backend", SKIP
    ),
    "set-config": Hostile("SELECT set_config('search_path', 'public', false)", "function set_config", NO_TRACE),
    # Reads a server file: allowed by a read-only transaction, so only the guard stops it.
    "read-file": Hostile("SELECT pg_read_file('/etc/hostname')", "function pg_read_file", SKIP),
    "lo-import": Hostile("SELECT lo_import('/etc/hostname')", "function lo_import", SKIP),
    "dblink": Hostile("SELECT * FROM dblink('dbname=postgres', 'DELETE FROM x') AS t(a int)", "function dblink", SKIP),
    "two-statements": Hostile("SELECT 1; DROP TABLE workers", "2 statements: run one at a time", MULTIPLE),
    "comment-trick": Hostile("SELECT 1 /* ; */; DELETE FROM workflow_executions", "2 statements", MULTIPLE),
    "nested-comment-trick": Hostile(
        "/* /* */ SELECT 'x */ DELETE FROM workflow_executions --'", "not a read: DELETE", READ_ONLY
    ),
    "backslash-trick": Hostile("SELECT 'a\\', pg_terminate_backend({pid}) --'", "function pg_terminate_backend", SKIP),
    "copy-program": Hostile("COPY workflow_executions TO PROGRAM 'touch /tmp/kestrel-pwned'", "not a read: COPY", SKIP),
    "copy-from": Hostile("COPY workers FROM STDIN", "not a read: COPY", READ_ONLY),
    # Past the guard, COPY's data is not read and the connection is brought out of COPY mode.
    "copy-to-stdout": Hostile("COPY workflow_executions TO STDOUT", "not a read: COPY", NO_TRACE),
    "do": Hostile("DO $$BEGIN DELETE FROM kestrel.workflow_executions; END$$", "not a read: DO", READ_ONLY),
    "call": Hostile("CALL public.kestrel_test_purge()", "not a read: CALL", READ_ONLY),
    "lock": Hostile("LOCK TABLE workflow_executions IN ACCESS EXCLUSIVE MODE", "not a read: LOCK", NO_TRACE),
    "vacuum": Hostile("VACUUM workflow_executions", "not a read: VACUUM", IN_TRANSACTION),
    "set-role": Hostile("SET ROLE pg_monitor", "not a read: SET", NO_TRACE),
    "set-session-rw": Hostile("SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE", "not a read: SET", NO_TRACE),
    "commit": Hostile("COMMIT", "not a read: COMMIT", NO_TRACE),
    "listen": Hostile("LISTEN kestrel", "not a read: LISTEN", NO_TRACE),
    "notify": Hostile("NOTIFY kestrel", "not a read: NOTIFY", NO_TRACE),
    # A prepared statement outlives the rollback: only the guard stops it.
    "prepare": Hostile("PREPARE evil AS DELETE FROM workflow_executions", "not a read: PREPARE", SKIP),
    "discard": Hostile("DISCARD ALL", "not a read: DISCARD", IN_TRANSACTION),
    "nextval": Hostile("SELECT nextval('workflow_executions_id_seq')", "function nextval", READ_ONLY),
    "setval": Hostile("SELECT setval('workflow_executions_id_seq', 1000)", "function setval", READ_ONLY),
    # A session-level advisory lock outlives the rollback: only the guard stops it.
    "advisory-lock": Hostile("SELECT pg_advisory_lock(42)", "function pg_advisory_lock", SKIP),
    "notify-function": Hostile("SELECT pg_notify('kestrel', 'x')", "function pg_notify", NO_TRACE),
    "txid": Hostile("SELECT txid_current()", "function txid_current", NO_TRACE),
    # SQL inside a string is out of the guard's sight: the function running it is refused.
    "query-to-xml": Hostile(
        "SELECT query_to_xml('SELECT pg_cancel_backend({pid})', true, true, '')", "function query_to_xml", SKIP
    ),
    "operator-function": Hostile(
        "SELECT decide_approval(3, 'approve-import', true, 'mallory', 'x')", "function decide_approval", READ_ONLY
    ),
    "explain-analyze-delete": Hostile(
        "EXPLAIN ANALYZE DELETE FROM workflow_executions", "EXPLAIN of a write: DELETE", READ_ONLY
    ),
    "explain-analyze-cte": Hostile(
        "EXPLAIN (ANALYZE, COSTS OFF) WITH d AS (DELETE FROM workflow_executions RETURNING id) SELECT * FROM d",
        "data-modifying CTE: DELETE",
        READ_ONLY,
    ),
    "garbage": Hostile("this is not sql ((", "cannot parse: ", "42601"),
    "empty": Hostile("", "empty query", SKIP),  # nothing to run
    "only-comment": Hostile("  -- nothing here\n", "empty query", SKIP),
    "unicode-identifier": Hostile(
        'SELECT U&"pg_\\0074erminate_backend"({pid})', "function pg_terminate_backend: ", SKIP
    ),
    # Red team (issue 9): statements that would leave something in the session, or change the
    # transaction's mode, and row locks below the top level.
    "declare-with-hold": Hostile(
        "DECLARE c CURSOR WITH HOLD FOR SELECT * FROM workers", "not a read: DECLARE", NO_TRACE
    ),  # a WITH HOLD cursor dies with the rolled-back transaction
    "explain-declare": Hostile(
        "EXPLAIN DECLARE c CURSOR WITH HOLD FOR SELECT 1", "EXPLAIN of a non-read: DECLARE", NO_TRACE
    ),
    "explain-execute": Hostile("EXPLAIN EXECUTE evil", "EXPLAIN of a non-read: EXECUTE", "26000"),
    "reset-role": Hostile("RESET ROLE", "not a read: RESET", NO_TRACE),
    "start-read-write": Hostile("START TRANSACTION READ WRITE", "not a read: START", IN_TRANSACTION),
    "alter-system": Hostile("ALTER SYSTEM SET work_mem = '1MB'", "not a read: ALTER", IN_TRANSACTION),
    "for-share-in-subquery": Hostile("SELECT (SELECT 1 FROM workers FOR SHARE)", "locking clause FOR SHARE", READ_ONLY),
    "for-update-in-cte": Hostile(
        "WITH w AS (SELECT * FROM workers FOR UPDATE) SELECT * FROM w", "locking clause FOR UPDATE", READ_ONLY
    ),
    # A superuser session loads a library for good (LOAD works in a read-only transaction).
    "load": Hostile("LOAD 'auto_explain'", "not a read: LOAD", SKIP),
    # Would drop psycopg's own prepared statements.
    "deallocate": Hostile("DEALLOCATE ALL", "not a read: DEALLOCATE", SKIP),
}


@pytest.mark.parametrize("case", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_query_is_refused_and_changes_nothing(
    case: Hostile, plain: psycopg.Connection, observer: psycopg.Connection, bystander: psycopg.Connection
) -> None:
    query = case.query.replace("{pid}", str(bystander.info.backend_pid))
    before, session_before = database_state(observer), session_state(plain)

    with pytest.raises(QueryRefused) as refused:
        run_read_only(plain, query)
    assert refused.value.reason.startswith(case.reason), refused.value.reason
    assert database_state(observer) == before
    assert session_state(plain) == session_before

    if case.bypass is not SKIP:
        if case.bypass == NO_TRACE:
            try:
                run_read_only(plain, query, check=False, reader_role=None)
            except QueryFailed:
                pass
        else:
            with pytest.raises(QueryFailed) as failed:
                run_read_only(plain, query, check=False, reader_role=None)
            assert failed.value.sqlstate == case.bypass, str(failed.value)
        assert database_state(observer) == before
        assert session_state(plain) == session_before

    assert bystander.execute("SELECT 1").fetchone() == (1,)  # not terminated


def test_the_hostile_table_is_big_enough() -> None:
    assert len(HOSTILE) >= 30
    assert sum(case.bypass is not SKIP for case in HOSTILE.values()) >= 30


# --- reads ------------------------------------------------------------------------------------

READS = [
    "SELECT id, workflow_name, status FROM workflow_executions ORDER BY id",
    "WITH e AS (SELECT status FROM workflow_executions) SELECT status, count(*) FROM e GROUP BY status ORDER BY 1",
    "VALUES (1, 'a'), (2, 'b')",
    "SELECT workflow_name FROM workflow_executions UNION SELECT worker_id FROM workers ORDER BY 1",
    "EXPLAIN SELECT * FROM workflow_executions WHERE status = 'error'",
    "SELECT id, workflow_name FROM workflow_executions WHERE workflow_name LIKE '%port%' ORDER BY id",
    "SELECT id FROM workflow_executions WHERE input->>'pod' LIKE 'api-%' ORDER BY id",
    "SELECT e.id, count(a.*) FROM workflow_executions e LEFT JOIN step_attempts a ON a.execution_id = e.id "
    "GROUP BY e.id ORDER BY e.id",
    "TABLE workers",
    "SELECT 'a;b' AS s, $$c;d$$ AS d, count(*) FROM workflow_executions -- trailing; comment",
    "SELECT status FROM workflow_executions WHERE status = 'error';",
]


@pytest.mark.parametrize("query", READS)
def test_reads_return_what_postgres_returns(query: str, plain: psycopg.Connection, db: psycopg.Connection) -> None:
    result = run_read_only(plain, query)
    with db.cursor() as cur:  # the same query, run directly with search_path=kestrel
        cur.execute(query.encode())
        expected_rows = cur.fetchall()
        expected_columns = [c.name for c in cur.description]
    assert result.columns == expected_columns
    assert result.rows == expected_rows
    assert result.row_count == len(expected_rows) > 0
    assert result.truncated is False
    assert result.elapsed_ms > 0
    assert plain.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_unqualified_tables_resolve_to_the_kestrel_schema_and_the_session_keeps_its_path(
    plain: psycopg.Connection,
) -> None:
    default_path = plain.execute("SHOW search_path").fetchone()[0]
    result = run_read_only(plain, "SELECT workflow_name FROM workflow_executions ORDER BY id")
    assert [name for (name,) in result.rows] == SEED_NAMES
    assert run_read_only(plain, "SHOW search_path").rows == [("pg_catalog, kestrel, pg_temp",)]
    assert plain.execute("SHOW search_path").fetchone()[0] == default_path
    with pytest.raises(psycopg.errors.UndefinedTable):
        plain.execute("SELECT 1 FROM workflow_executions")


def test_like_with_percent_needs_no_escaping(plain: psycopg.Connection) -> None:
    result = run_read_only(
        plain, "SELECT DISTINCT workflow_name FROM workflow_executions WHERE workflow_name LIKE '%port%' ORDER BY 1"
    )
    assert result.rows == [("export",), ("import",), ("report",)]


def test_pg_sleep_is_allowed(plain: psycopg.Connection) -> None:
    result = run_read_only(plain, "SELECT 1 AS slept FROM pg_sleep(0.01)")
    assert result.rows == [(1,)]
    assert result.elapsed_ms >= 10


def test_explain_analyze_of_a_read_runs(plain: psycopg.Connection) -> None:
    result = run_read_only(plain, "EXPLAIN (ANALYZE, COSTS OFF) SELECT count(*) FROM workflow_executions")
    plan = "\n".join(line for (line,) in result.rows)
    assert result.columns == ["QUERY PLAN"]
    assert "Seq Scan on workflow_executions" in plan and "actual time" in plan


def test_an_empty_result_still_has_its_columns(plain: psycopg.Connection) -> None:
    result = run_read_only(plain, "SELECT id, status AS state FROM workflow_executions WHERE false")
    assert result == QueryResult(["id", "state"], [], False, result.elapsed_ms)


def test_report_parameters_are_bound(plain: psycopg.Connection, observer: psycopg.Connection) -> None:
    observer.execute("UPDATE kestrel.workflow_executions SET created_at = now() - interval '2 days' WHERE id <= 2")
    report = (
        "-- description: recent runs of a workflow\n"
        "SELECT id FROM workflow_executions\n"
        "WHERE created_at > now() - %(since)s::interval AND workflow_name LIKE %(name)s || '%%'\n"
        "ORDER BY id"
    )
    result = run_read_only(plain, report, {"since": "1 day", "name": "imp"}, placeholders=True)
    assert result.rows == [(3,), (5,)]
    empty = run_read_only(plain, report, {"since": "1 day", "name": "nope"}, placeholders=True)
    assert empty.columns == ["id"] and empty.rows == []
    assert run_read_only(plain, "SELECT count(*) FROM workers WHERE worker_id LIKE 'w%%'", placeholders=True).rows == [
        (1,)
    ]


def test_bound_values_are_never_sql(plain: psycopg.Connection, observer: psycopg.Connection) -> None:
    before = database_state(observer)
    result = run_read_only(
        plain, "SELECT %(name)s AS name", {"name": "x'; DELETE FROM workflow_executions; --"}, placeholders=True
    )
    assert result.rows == [("x'; DELETE FROM workflow_executions; --",)]
    assert database_state(observer) == before


# --- limits, timeouts, failures ---------------------------------------------------------------


def test_results_are_cut_at_max_rows(plain: psycopg.Connection) -> None:
    query = "SELECT id FROM workflow_executions ORDER BY id"
    cut = run_read_only(plain, query, max_rows=3)
    assert (cut.rows, cut.truncated, cut.row_count) == ([(1,), (2,), (3,)], True, 3)
    exact = run_read_only(plain, query, max_rows=5)
    assert (exact.row_count, exact.truncated) == (5, False)
    none = run_read_only(plain, query, max_rows=0)
    assert (none.columns, none.rows, none.truncated) == (["id"], [], True)


def test_a_truncated_query_is_not_run_to_the_end(plain: psycopg.Connection) -> None:
    # Run to the end this would sleep 1000 s, past the longest statement_timeout there is (10
    # minutes, asked for here): had the rest not been cancelled, the call would raise QueryTimeout
    # or hang until the suite's timeout fails the test. Only the first rows are fetched. Rows are
    # wider than the server's 8 kB send buffer, so each reaches us as soon as it is made.
    result = run_read_only(
        plain,
        "SELECT g, repeat('x', 10000), pg_sleep(0.01) FROM generate_series(1, 100000) g",
        max_rows=5,
        timeout_ms=MAX_TIMEOUT_MS,
    )
    assert [row[0] for row in result.rows] == [1, 2, 3, 4, 5] and result.truncated
    assert plain.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert run_read_only(plain, "SELECT 42").rows == [(42,)]


def test_a_slow_query_is_cancelled_by_the_timeout(plain: psycopg.Connection) -> None:
    with pytest.raises(QueryTimeout) as caught:
        run_read_only(plain, "SELECT pg_sleep(2)", timeout_ms=200)
    # The server cancelled it for its statement_timeout (not the query ending, nor a client timer).
    cause = caught.value.__cause__
    assert isinstance(cause, psycopg.errors.QueryCanceled) and "statement timeout" in str(cause), cause
    assert str(caught.value) == "query cancelled after 0.2 s (statement_timeout); narrow it or add a LIMIT"
    assert plain.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert plain.execute("SHOW statement_timeout").fetchone() == ("0",)
    assert run_read_only(plain, "SELECT 1").rows == [(1,)]


def test_unknown_column_fails_with_postgres_message_and_hint(plain: psycopg.Connection) -> None:
    with pytest.raises(QueryFailed) as caught:
        run_read_only(plain, "SELECT workflow_nam FROM workflow_executions")
    assert str(caught.value) == (
        'column "workflow_nam" does not exist\n'
        'Perhaps you meant to reference the column "workflow_executions.workflow_name".'
    )
    assert caught.value.sqlstate == "42703"
    assert caught.value.position == 8
    assert plain.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert run_read_only(plain, "SELECT count(*) FROM workers").rows == [(1,)]


def test_a_syntax_error_past_the_guard_is_a_query_failure(plain: psycopg.Connection) -> None:
    with pytest.raises(QueryFailed) as caught:
        run_read_only(plain, "SELEC 1", check=False)
    assert str(caught.value) == 'syntax error at or near "SELEC"'
    assert caught.value.position == 1


def test_a_connection_that_is_not_autocommit_works_and_is_left_idle(seeded: str) -> None:
    with psycopg.connect(seeded) as conn:
        assert run_read_only(conn, "SELECT count(*) FROM workflow_executions").rows == [(5,)]
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        with pytest.raises(QueryFailed) as caught:
            run_read_only(conn, "DELETE FROM workflow_executions", check=False)
        assert caught.value.sqlstate == READ_ONLY
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert conn.execute("SELECT count(*) FROM kestrel.workflow_executions").fetchone() == (5,)


def test_a_connection_inside_a_transaction_is_refused_untouched(seeded: str) -> None:
    with psycopg.connect(seeded) as conn:
        conn.execute("INSERT INTO kestrel.workers (worker_id) VALUES ('pending')")
        with pytest.raises(psycopg.ProgrammingError, match="outside any transaction"):
            run_read_only(conn, "SELECT 1")
        conn.commit()  # the caller's transaction was left alone
        assert conn.execute("SELECT count(*) FROM kestrel.workers").fetchone() == (2,)


def test_a_lost_connection_is_reported_as_unavailable(plain: psycopg.Connection, observer: psycopg.Connection) -> None:
    observer.execute("SELECT pg_terminate_backend(%s)", (plain.info.backend_pid,))
    with pytest.raises(DatabaseUnavailable, match="lost the connection to PostgreSQL"):
        run_read_only(plain, "SELECT 1")


def test_the_guard_refuses_before_anything_reaches_the_server(seeded: str) -> None:
    conn = psycopg.connect(seeded, autocommit=True)
    conn.close()
    with pytest.raises(QueryRefused):
        run_read_only(conn, "DELETE FROM workflow_executions")
    with pytest.raises(DatabaseUnavailable):
        run_read_only(conn, "SELECT 1")
