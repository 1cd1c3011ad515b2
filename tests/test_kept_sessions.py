"""The sessions kept for a module's tests (``KeptSessions``, behind ``db``): each test gets
the module's backend back, with nothing left of what the last test did in it."""

from __future__ import annotations

import psycopg

from tests.conftest import ADMIN_DSN, KeptSessions

SESSION_LEFTOVERS = """
SELECT current_setting('work_mem'), current_setting('search_path'), current_user,
       to_regclass('pg_temp.scratch') IS NOT NULL,
       (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()),
       (SELECT count(*) FROM pg_listening_channels()),
       (SELECT count(*) FROM pg_prepared_statements)
"""


def _leave_a_mess(conn: psycopg.Connection) -> None:
    conn.execute("SET work_mem = '7MB'")
    conn.execute("SET search_path = public")
    conn.execute("SET ROLE kestrel_reader")
    conn.execute("CREATE TEMP TABLE scratch (x int)")
    conn.execute("SELECT pg_advisory_lock(42)")
    conn.execute("LISTEN somewhere")
    conn.execute("PREPARE mine AS SELECT 1")
    for _ in range(10):  # past psycopg's threshold for preparing a statement itself
        conn.execute(SESSION_LEFTOVERS).fetchone()


def test_the_next_test_gets_the_same_backend_with_nothing_left_of_the_last(kept_sessions: KeptSessions, dsn: str):
    kept_sessions.next_test()
    conn = kept_sessions.session(dsn, "t", options="-c search_path=kestrel")
    opened = conn.execute(SESSION_LEFTOVERS).fetchone()
    pid = conn.info.backend_pid
    _leave_a_mess(conn)
    # Asked again by the same test: the same session, as it left it.
    assert kept_sessions.session(dsn, "t", options="-c search_path=kestrel") is conn
    assert conn.execute("SHOW work_mem").fetchone() == ("7MB",)

    kept_sessions.next_test()
    again = kept_sessions.session(dsn, "t", options="-c search_path=kestrel")
    assert again is conn and again.info.backend_pid == pid
    assert again.execute(SESSION_LEFTOVERS).fetchone() == opened
    assert opened[1] == "kestrel"  # the option it was opened with, not the server's default
    assert again.execute("SELECT count(*) FROM workflow_executions").fetchone() == (0,)


def test_a_session_a_test_ended_is_replaced(kept_sessions: KeptSessions, dsn: str):
    kept_sessions.next_test()
    conn = kept_sessions.session(dsn, "victim")
    pid = conn.info.backend_pid
    with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))

    kept_sessions.next_test()
    again = kept_sessions.session(dsn, "victim")
    assert again is not conn and again.info.backend_pid != pid
    assert again.execute("SELECT 1").fetchone() == (1,)


def test_a_session_left_in_a_transaction_or_not_in_autocommit_is_replaced(kept_sessions: KeptSessions, dsn: str):
    kept_sessions.next_test()
    conn = kept_sessions.session(dsn, "t2")
    conn.autocommit = False
    conn.execute("SELECT 1")  # a transaction is open

    kept_sessions.next_test()
    again = kept_sessions.session(dsn, "t2")
    assert again is not conn and conn.closed
    assert again.autocommit and again.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
